"""Summaries of the stacks, collectives, NCCL and GPU tables for the report (plain values, no rendering)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from postmortem.stacks import rank_ranges as stacks_rank_ranges

MAX_STACK_CLASSES = 30
MAX_SHOWN_FRAMES = 12
MAX_COLL_ROWS = 60
MAX_NCCL_WARNINGS = 12
MAX_GPU_SERIES = 64
MAX_LABELLED = 16           # chart lines with a colour and a legend entry each; beyond, grey lines
MAX_GPU_ROWS = 128          # GPU table rows; lost GPUs and GPUs with ECC errors are always listed


def rank_ranges(ranks) -> str:
    """Compact rank list: [0,1,2,3,7] -> '0-3, 7'."""
    return ", ".join(filter(None, stacks_rank_ranges({int(r) for r in ranks}).split(",")))


def _int(v):
    try:
        return None if v is None or pd.isna(v) else int(v)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------- stacks

@dataclass
class StackClass:
    """Threads (on one or more ranks) whose stacks are identical."""
    thread: str
    ranks: str
    count: int
    odd: bool
    kind: str
    frames: list[str]
    more_frames: list[str] = field(default_factory=list)
    more_label: str = ""
    hot: int = -1                    # index in `frames` of the frame that decided `kind` (-1: none shown)
    least: bool = False              # holds the least-progressed ranks (the merger's pick for a hang)
    procs: bool = False              # members are processes (dump ids), not ranks


@dataclass
class StackSummary:
    """Classes to show, how many were left out, and the least-progressed ranks when the merger names them."""
    classes: list[StackClass]
    hidden: int
    least: str = ""
    least_why: str = ""


def _frame_text(fr) -> str:
    if not isinstance(fr, dict):
        return str(fr)
    func, file, line = fr.get("func") or "?", fr.get("file") or "", fr.get("line")
    where = f"{file}:{line}" if file and line is not None else file
    return f"{func} ({where})" if where else str(func)


def _signature(frames) -> str:
    if not isinstance(frames, list):
        return ""
    return "\n".join(f"{f.get('func')}|{f.get('file')}|{f.get('line')}" if isinstance(f, dict) else str(f)
                     for f in frames)


def _members_label(members) -> str:
    ranks = [m for m in members if isinstance(m, int)]
    others = sorted(str(m) for m in members if not isinstance(m, int))
    return ", ".join(x for x in (rank_ranges(ranks), ", ".join(others)) if x)


def _stack_class(thread: str, members, frames, odd: bool, kind: str, blocking) -> StackClass:
    frames = frames if isinstance(frames, list) else []
    texts = [_frame_text(f) for f in frames]
    hot = next((i for i, f in enumerate(frames) if blocking is not None and f is blocking), -1)
    if hot < 0 and blocking is not None:
        hot = next((i for i, f in enumerate(frames) if f == blocking), -1)
    return StackClass(thread=thread, ranks=_members_label(members), count=len(members), odd=bool(odd),
                      procs=not any(isinstance(m, int) for m in members),
                      kind="" if kind in ("", "unknown", None) else str(kind), frames=texts[:MAX_SHOWN_FRAMES],
                      more_frames=texts[MAX_SHOWN_FRAMES:], hot=hot if hot < MAX_SHOWN_FRAMES else -1)


def stack_classes(stacks: pd.DataFrame, main_label: str = "MainThread") -> StackSummary:
    """Equivalence classes of identical stacks; odd (minority) classes first."""
    if not len(stacks):
        return StackSummary([], 0)
    summary = _merged_by_helper(stacks, main_label)
    if summary is None:
        summary = _merged_locally(stacks)
    out = summary.classes
    out.sort(key=lambda c: (not (c.odd or c.least), c.thread != main_label, c.thread,
                            c.count if c.odd else -c.count, c.ranks))
    summary.hidden = max(0, len(out) - MAX_STACK_CLASSES)
    summary.classes = out[:MAX_STACK_CLASSES]
    return summary


def _merged_by_helper(stacks: pd.DataFrame, main_label: str) -> StackSummary | None:
    """Classes from postmortem.stacks.merge_stacks (main thread of each rank), when that module is present."""
    try:
        from postmortem.stacks import merge_stacks
    except ImportError:
        return None
    try:
        merged = merge_stacks(stacks)
        odd = set(merged.odd_ones)
        least = list(getattr(merged, "least_progressed", []) or [])
        classes = []
        for c in merged.classes:
            if not c.members:
                continue
            sc = _stack_class(main_label, c.members, c.frames, any(m in odd for m in c.members), c.category,
                              c.blocking)
            sc.least = len(merged.classes) > 1 and any(m in least for m in c.members)
            classes.append(sc)
        return StackSummary(classes, 0, _members_label(least) if least and len(classes) > 1 else "",
                            str(getattr(merged, "least_progressed_why", "") or "") if least else "")
    except Exception:  # noqa: BLE001 - a merger bug must not take the report down; group locally instead
        return None


def _thread_name(row) -> str:
    name = row.get("thread_name")
    if isinstance(name, str) and name:
        return name
    return str(row.get("thread") or "thread")


def _merged_locally(stacks: pd.DataFrame) -> StackSummary:
    """Fallback grouping: per thread name, rows with equal signatures (or equal frames) form a class."""
    groups: dict[tuple[str, str], dict] = {}
    for row in stacks.to_dict("records"):
        sig = row.get("signature") if isinstance(row.get("signature"), str) and row.get("signature") else \
            _signature(row.get("frames"))
        key = (_thread_name(row), sig)
        g = groups.setdefault(key, {"thread": key[0], "members": set(), "frames": row.get("frames")})
        rank = _int(row.get("rank"))
        if rank is not None:
            g["members"].add(rank)
        else:
            pid = _int(row.get("pid"))
            g["members"].add(f"pid {pid}" if pid is not None else str(row.get("source")))
    biggest: dict[str, int] = {}
    count: dict[str, int] = {}
    for g in groups.values():
        biggest[g["thread"]] = max(biggest.get(g["thread"], 0), len(g["members"]))
        count[g["thread"]] = count.get(g["thread"], 0) + 1
    classes = [_stack_class(g["thread"], sorted(g["members"], key=lambda m: (not isinstance(m, int), str(m).zfill(12))),
                            g["frames"], count[g["thread"]] > 1 and len(g["members"]) < biggest[g["thread"]], "", None)
               for g in groups.values()]
    return StackSummary(classes, 0)


# ---------------------------------------------------------------- collectives

@dataclass
class CollRow:
    """Ranks that reached the same last collective in one process group."""
    pg: str
    ranks: str
    count: int
    seq: int | None
    op: str
    state: str
    last_enqueued: int | None
    last_completed: int | None
    behind: bool


def collective_rows(coll: pd.DataFrame, default_pg: str) -> tuple[list[CollRow], int]:
    """Last seq per rank and process group, ranks with identical last records grouped; laggards first."""
    c = coll[coll["seq"].notna() | coll["last_completed"].notna() | coll["last_enqueued"].notna()]
    if not len(c):
        return [], 0
    c = c.assign(pg=c["pg"].fillna(default_pg).astype(str),
                 order=c["seq"].fillna(c["last_completed"]).fillna(c["last_enqueued"]))
    c = c.sort_values(["pg", "rank", "order", "line"], kind="stable", na_position="first")
    by = c.groupby(["pg", "rank"], dropna=False, sort=True)
    last = by.tail(1)
    peaks = by[["last_enqueued", "last_completed"]].max()
    # Highest enqueued/completed per (pg, rank), looked up from a dict. Rows without a rank get none: the rank-less
    # group is never matched by its key, as before.
    highest = {(pg, _int(rank)): (_int(e), _int(d)) for (pg, rank), e, d in
               zip(peaks.index, peaks["last_enqueued"], peaks["last_completed"]) if _int(rank) is not None}
    rows: dict[tuple, dict] = {}
    for rec in last.to_dict("records"):
        e, d = highest.get((rec["pg"], _int(rec["rank"])), (None, None))
        key = (rec["pg"], _int(rec["seq"]), str(rec["op"] or ""), str(rec["state"] or ""), e, d)
        rows.setdefault(key, []).append(_int(rec["rank"]))
    front: dict[str, float] = {}
    for (pg, seq, _op, _st, e, d) in rows:
        val = seq if seq is not None else d if d is not None else e
        if val is not None:
            front[pg] = max(front.get(pg, val), val)
    out = []
    for (pg, seq, op, state, e, d), ranks in rows.items():
        val = seq if seq is not None else d if d is not None else e
        known = [r for r in ranks if r is not None]
        label = rank_ranges(known) + (", ?" if len(known) < len(ranks) else "")
        out.append(CollRow(pg=pg, ranks=label.strip(", "), count=len(ranks), seq=seq, op=op, state=state,
                           last_enqueued=e, last_completed=d, behind=val is not None and val < front.get(pg, val)))
    out.sort(key=lambda r: (r.pg, not r.behind, r.seq if r.seq is not None else -1, r.ranks))
    return out[:MAX_COLL_ROWS], max(0, len(out) - MAX_COLL_ROWS)


# ---------------------------------------------------------------- NCCL

@dataclass
class NcclView:
    """NCCL's own account of its setup."""
    version: str
    nranks: str
    comms: int
    hosts: int
    devices: str
    transports: list[str]
    network: str
    topology: str
    warnings: list[dict]
    rings: int
    trees: int


_VIA = re.compile(r"\bvia (P2P/[\w/ ]+?|SHM(?:/[\w/]+)?|NET/[\w/]+|direct shared memory|direct pointer)(?:\s*$|\s|,)")
_NETWORK = re.compile(r"\bUsing network (\w+)|\bNET/(IB|Socket|OFI|AWS Libfabric)\b(?: : Using (\[[^\]]*\][^\s;]*))?")
_VERSION = re.compile(r"NCCL version ([\w.+-]+)")


def _nccl_who(r: dict) -> str:
    """The rank of an NCCL line, else its process as NCCL names it (host:pid [cuda device])."""
    rank = _int(r.get("rank"))
    if rank is not None:
        return str(rank)
    host, pid, dev = r.get("host"), _int(r.get("pid")), _int(r.get("cuda_dev"))
    who = ":".join(str(x) for x in (host if isinstance(host, str) else None, pid) if x is not None)
    return f"{who} [{dev}]".strip() if dev is not None else who


def nccl_view(nccl: pd.DataFrame) -> NcclView | None:
    """Version, communicators, transports, topology and warnings from NCCL_DEBUG lines (None without any)."""
    if not len(nccl):
        return None
    msgs = nccl["message"].fillna("").astype(str)
    versions = set(str(v) for v in nccl["version"].dropna())
    for m in msgs[msgs.str.contains("NCCL version", regex=False)]:
        mm = _VERSION.search(m)
        if mm:
            versions.add(mm.group(1))
    transports: dict[str, int] = {}
    networks: set[str] = set()
    rings = trees = 0
    topo: list[str] = []
    # each distinct message once, with how often it came, in the order of first appearance (thousands of ranks
    # print the same few hundred lines)
    counts = msgs.value_counts(sort=False).to_dict()
    for m in pd.unique(msgs.to_numpy(dtype=object)):
        n = counts[m]
        if "via " in m:
            for t in _VIA.findall(m):
                transports[t.strip()] = transports.get(t.strip(), 0) + n
        if "network" in m or "NET/" in m:
            for a, b, c in _NETWORK.findall(m):
                networks.add((a or b) + (f" {c}" if c else ""))
        head = m.lstrip()
        if head.startswith(("Ring", "Channel")) and ("->" in m or ":" in m):
            if rings == 0:
                topo.append(head[:160])
            rings += n
        if head.startswith(("Trees", "Tree")):
            if trees == 0:
                topo.append(head[:160])
            trees += n
    comms = nccl["comm_id"].dropna().astype(str).nunique()
    hosts = nccl["host"].dropna().astype(str).nunique()
    devs = sorted({int(d) for d in nccl["cuda_dev"].dropna()})
    warn = nccl[nccl["level"].fillna("").astype(str).str.upper().str.startswith("WARN")]
    warnings = [{"source": r["source"], "line": _int(r["line"]), "who": _nccl_who(r),
                 "text": str(r["message"])[:300]} for r in warn.head(MAX_NCCL_WARNINGS).to_dict("records")]
    nranks = sorted({int(n) for n in nccl["nranks"].dropna()})
    return NcclView(version=", ".join(sorted(versions)), nranks=", ".join(map(str, nranks)), comms=comms,
                    hosts=hosts, devices=rank_ranges(devs), rings=rings, trees=trees,
                    transports=[f"{k} ({v})" for k, v in sorted(transports.items(), key=lambda kv: (-kv[1], kv[0]))],
                    network=", ".join(sorted(networks)), topology=" | ".join(topo), warnings=warnings)


# ---------------------------------------------------------------- GPU

@dataclass
class GpuRow:
    """One GPU across the nvidia-smi snapshots."""
    key: str
    host: str
    gpu: str
    bus: str
    peak: str
    total: str
    last: str
    util: str
    snapshots: int
    lost: bool
    ecc: int
    flags: str = ""


@dataclass
class GpuModel:
    """Rows for the table and series for the chart."""
    rows: list[GpuRow]
    mode: str                      # "time" or "snapshot"
    origin: pd.Timestamp | None
    series: dict                   # key -> (xs, used, total)
    oom_x: float | None
    oom_when: str
    oom_logged: bool
    hidden: int = 0                # GPUs left out of `rows` (none of them lost or with ECC errors)


def _mib(v) -> str:
    return "" if v is None or pd.isna(v) else f"{float(v):,.0f}"


def _gpu_series(g: pd.DataFrame, ids, keys: list[str], totals: list, faulty: set | None = None) -> dict:
    """Memory series of up to MAX_GPU_SERIES GPUs that report memory used, in table order: every faulty one (lost,
    uncorrectable ECC errors), then the first others."""
    ok = g["mem_used_mib"].notna().to_numpy()
    ids = ids[ok]
    order = np.argsort(ids, kind="stable")      # rows of one GPU together, still in x order
    ids = ids[order]
    xs = g["x"].to_numpy(dtype="float64")[ok][order]
    used = g["mem_used_mib"].to_numpy(dtype="float64")[ok][order]
    series: dict = {}
    gids = np.unique(ids)
    if len(gids) > MAX_GPU_SERIES:
        faulty = faulty or set()
        bad = [gid for gid in gids if gid in faulty][:MAX_GPU_SERIES]
        others = [gid for gid in gids if gid not in faulty][:MAX_GPU_SERIES - len(bad)]
        gids = sorted(bad + others)
    for gid in gids:
        a, b = np.searchsorted(ids, gid, "left"), np.searchsorted(ids, gid, "right")
        total = totals[gid]
        series[keys[gid]] = (xs[a:b].tolist(), used[a:b].tolist(), None if pd.isna(total) else float(total))
    return series


def gpu_model(gpu: pd.DataFrame, events: pd.DataFrame) -> GpuModel | None:
    """Per-GPU summary and memory series; the first OOM placed on the same axis when the inputs allow it."""
    if not len(gpu):
        return None
    g = gpu.copy()
    g["hostkey"] = g["host"].where(g["host"].notna(), g["source"]).astype(str)
    g["gpukey"] = g["gpu_index"].astype("string").fillna(g["bus_id"].astype("string")).fillna("?")
    timed = g["ts"].notna().mean() >= 0.5
    origin = g["ts"].min() if timed else None
    if timed:
        g["x"] = (g["ts"] - origin).dt.total_seconds()
    else:
        snap = g["snapshot"].astype("float64")
        g["x"] = snap.where(snap.notna(), g["line"].astype("float64"))
    g = g.sort_values(["hostkey", "gpukey", "x"], kind="stable")
    multi_host = g["hostkey"].nunique() > 1
    # One aggregation over all GPUs (first/last skip missing values, like the table wants), not a frame per GPU.
    by = g.assign(lost=g["lost"].fillna(False).astype(bool)).groupby(["hostkey", "gpukey"], sort=True)
    agg = by.agg(host=("host", "first"), bus=("bus_id", "first"), peak=("mem_used_mib", "max"),
                 total=("mem_total_mib", "max"), last=("mem_used_mib", "last"), util=("util_pct", "last"),
                 n=("mem_used_mib", "size"), lost=("lost", "any"), ecc=("ecc_uncorrected", "max"))
    rows, keys = [], []
    for (hk, gk), host, bus, peak, total, last, util, n, lost, ecc in zip(
            agg.index, agg["host"], agg["bus"], agg["peak"], agg["total"], agg["last"], agg["util"], agg["n"],
            agg["lost"], agg["ecc"]):
        key = f"{hk} GPU {gk}" if multi_host else f"GPU {gk}"
        keys.append(key)
        rows.append(GpuRow(key=key, host="" if pd.isna(host) else str(host), gpu=str(gk),
                           bus="" if pd.isna(bus) else str(bus), peak=_mib(peak), total=_mib(total), last=_mib(last),
                           util="" if pd.isna(util) else f"{util:.0f}", snapshots=int(n), lost=bool(lost),
                           ecc=0 if pd.isna(ecc) else int(ecc)))
    faulty = {i for i, r in enumerate(rows) if r.lost or r.ecc}
    series = _gpu_series(g, by.ngroup().to_numpy(), keys, agg["total"].tolist(), faulty)
    shown, quiet = [], 0
    for r in rows:
        if r.lost or r.ecc or quiet < MAX_GPU_ROWS:
            shown.append(r)
            quiet += not (r.lost or r.ecc)
    oom_x, oom_when = None, ""
    ooms = events[events["kind"].isin(["oom", "gpu_oom"])] if len(events) else events
    if len(ooms):
        if timed and ooms["ts"].notna().any():
            t = ooms["ts"].min()
            oom_x, oom_when = (t - origin).total_seconds(), t.strftime("%Y-%m-%d %H:%M:%S")
        elif not timed:
            # Same file as the snapshots: place the first such OOM between the snapshots printed before and after it.
            by_line = ooms.sort_values("line")
            placeable = by_line[by_line["line"].notna() & by_line["source"].notna()
                                & by_line["source"].isin(g["source"].dropna().unique())]
            if len(placeable):
                src, line = placeable["source"].iloc[0], placeable["line"].iloc[0]
                same = g[g["source"] == src]
                before = same[same["line"] <= line]
                oom_x = float(before["x"].max()) + 0.5 if len(before) else float(same["x"].min()) - 0.5
                oom_when = f"{src}:{int(line)}"
    return GpuModel(rows=shown, mode="time" if timed else "snapshot", origin=origin, series=series, oom_x=oom_x,
                    oom_when=oom_when, oom_logged=bool(len(ooms)), hidden=len(rows) - len(shown))


def _bus_number(text) -> int | None:
    """PCI address as a number: nvidia-smi `00000000:2A:00.0` and NCCL's `busId 2a000` give the same one."""
    if text is None or pd.isna(text):
        return None
    digits = re.sub(r"[^0-9a-fA-F]", "", str(text))
    if not digits or len(digits) > 16:
        return None
    if ":" in str(text) and "." not in str(text):
        digits += "0"   # `0000:2a:00` (dmesg style) has no function digit; NCCL's number always ends in it
    return int(digits, 16)


def gpu_culprits(analysis, gm) -> dict:
    """Series key -> the verdict's culprit ranks that ran on that GPU, from NCCL's host + busId of each culprit rank.

    Only worked out when the chart has more than MAX_LABELLED GPUs (smaller charts label every GPU anyway). A GPU
    without a host matches only when the nvidia-smi data and NCCL each name a single host: bus ids repeat per node."""
    verdict = getattr(analysis, "verdict", None)
    ranks = set(verdict.culprit_ranks or []) if verdict is not None else set()
    if gm is None or len(gm.series) <= MAX_LABELLED or not ranks:
        return {}
    nccl, gpu = analysis.tables.nccl, analysis.tables.gpu
    if not len(nccl):
        return {}
    mine = nccl[nccl["rank"].isin(ranks) & nccl["bus_id"].notna()]
    where: dict[tuple, set] = {}
    for rank, host, bus in zip(mine["rank"], mine["host"], mine["bus_id"]):
        num = _bus_number(bus)
        if num is not None:
            where.setdefault((None if pd.isna(host) else str(host), num), set()).add(int(rank))
    one_host = (nccl["host"].dropna().nunique() <= 1
                and gpu["host"].where(gpu["host"].notna(), gpu["source"]).nunique() == 1)
    out = {}
    for row in gm.rows:
        if row.key not in gm.series:
            continue
        num = _bus_number(row.bus or None)
        hit = set()
        for (host, bus), rs in where.items():
            if bus == num and (row.host == host if row.host and host else one_host):
                hit |= rs
        if hit:
            out[row.key] = sorted(hit)
    return out

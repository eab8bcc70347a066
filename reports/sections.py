"""Summaries of the stacks, collectives, NCCL and GPU tables for the report (plain values, no rendering)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from postmortem.stacks import rank_ranges as stacks_rank_ranges

MAX_STACK_CLASSES = 30
MAX_SHOWN_FRAMES = 12
MAX_COLL_ROWS = 60
MAX_NCCL_WARNINGS = 12
MAX_GPU_SERIES = 64


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
    last = c.groupby(["pg", "rank"], dropna=False, sort=True).tail(1)
    enq = c.groupby(["pg", "rank"], dropna=False)["last_enqueued"].max()
    comp = c.groupby(["pg", "rank"], dropna=False)["last_completed"].max()
    rows: dict[tuple, dict] = {}
    for rec in last.to_dict("records"):
        k = (rec["pg"], rec["rank"] if not pd.isna(rec["rank"]) else None)
        e, d = _int(enq.get(k)), _int(comp.get(k))
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
    for m in msgs:
        if "via " in m:
            for t in _VIA.findall(m):
                transports[t.strip()] = transports.get(t.strip(), 0) + 1
        if "network" in m or "NET/" in m:
            for a, b, c in _NETWORK.findall(m):
                networks.add((a or b) + (f" {c}" if c else ""))
        head = m.lstrip()
        if head.startswith(("Ring", "Channel")) and ("->" in m or ":" in m):
            rings += 1
            if rings == 1:
                topo.append(head[:160])
        if head.startswith(("Trees", "Tree")):
            trees += 1
            if trees == 1:
                topo.append(head[:160])
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


def _mib(v) -> str:
    return "" if v is None or pd.isna(v) else f"{float(v):,.0f}"


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
    rows, series = [], {}
    multi_host = g["hostkey"].nunique() > 1
    for (hk, gk), grp in g.groupby(["hostkey", "gpukey"], sort=True):
        key = f"{hk} GPU {gk}" if multi_host else f"GPU {gk}"
        used = grp["mem_used_mib"]
        total = grp["mem_total_mib"].dropna()
        bus = grp["bus_id"].dropna()
        util = grp["util_pct"].dropna()
        ecc = grp["ecc_uncorrected"].dropna()
        lost = bool(grp["lost"].fillna(False).astype(bool).any())
        rows.append(GpuRow(key=key, host=str(grp["host"].dropna().iloc[0]) if grp["host"].notna().any() else "",
                           gpu=str(gk), bus=str(bus.iloc[0]) if len(bus) else "", peak=_mib(used.max()),
                           total=_mib(total.max()) if len(total) else "", last=_mib(used.dropna().iloc[-1])
                           if used.notna().any() else "", util=f"{util.iloc[-1]:.0f}" if len(util) else "",
                           snapshots=int(len(grp)), lost=lost, ecc=int(ecc.max()) if len(ecc) else 0))
        if len(series) < MAX_GPU_SERIES and used.notna().any():
            ok = grp[grp["mem_used_mib"].notna()]
            series[key] = (list(map(float, ok["x"])), list(map(float, ok["mem_used_mib"])),
                           float(total.max()) if len(total) else None)
    oom_x, oom_when = None, ""
    ooms = events[events["kind"].isin(["oom", "gpu_oom"])] if len(events) else events
    if len(ooms):
        if timed and ooms["ts"].notna().any():
            t = ooms["ts"].min()
            oom_x, oom_when = (t - origin).total_seconds(), t.strftime("%Y-%m-%d %H:%M:%S")
        elif not timed:
            # Same file as the snapshots: place the OOM between the snapshots printed before and after it.
            for rec in ooms.sort_values("line").to_dict("records"):
                same = g[g["source"] == rec["source"]]
                if len(same) and rec["line"] is not None and not pd.isna(rec["line"]):
                    before = same[same["line"] <= rec["line"]]
                    oom_x = float(before["x"].max()) + 0.5 if len(before) else float(same["x"].min()) - 0.5
                    oom_when = f"{rec['source']}:{int(rec['line'])}"
                    break
    return GpuModel(rows=rows, mode="time" if timed else "snapshot", origin=origin, series=series, oom_x=oom_x,
                    oom_when=oom_when, oom_logged=bool(len(ooms)))

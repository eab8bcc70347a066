"""Facts about the bundle as a whole: which job each file belongs to, software versions, clocks across hosts."""
from __future__ import annotations

import re

import pandas as pd

# torchrun --log-dir layout: <log_dir>/<rdzv_run_id>_<8 random chars>/attempt_N/<local_rank>/...
_LOGDIR_RUN_RE = re.compile(r"(?:^|/)(?P<run>[^/]+)_[a-z0-9_]{8}/attempt_\d+/")
_WS_KEYS = ("ws1", "ws3", "ws5")  # WORLD_SIZE=, MEMBER: i/N, global_world_sizes=[N: statements of the whole world


def annotate(sources: list, frames: dict[str, pd.DataFrame], meta: dict) -> None:
    """Fill `sources.job` and meta["jobs"], meta["versions"], meta["clock_note"], meta["ranks_missing"]."""
    facts = _source_facts(sources, frames)
    labels, jobs = _group_jobs([s.source for s in sources], facts)
    if len(frames["sources"]):
        frames["sources"]["job"] = [labels.get(s.source) for s in sources]
    meta["jobs"] = jobs
    meta["versions"], version_note = _versions(frames)
    if version_note:
        meta["version_note"] = version_note
    clock, offsets = clock_note(frames)
    if clock:
        meta["clock_note"] = clock
        meta["clock_offsets_s"] = offsets
    ws = meta.get("world_size")
    if ws and not meta.get("world_size_inferred") and int(ws) <= 1_000_000:
        seen = set(meta.get("ranks_seen", []))
        meta["ranks_missing"] = [r for r in range(int(ws)) if r not in seen]


def _source_facts(sources: list, frames: dict[str, pd.DataFrame]) -> dict[str, dict[str, set]]:
    """Per display path: identity facts found in the path and the content."""
    facts: dict[str, dict[str, set]] = {}

    def add(source: str, key: str, value) -> None:
        if value is None or (isinstance(value, float) and pd.isna(value)):
            return
        facts.setdefault(source, {}).setdefault(key, set()).add(str(value))

    for src in sources:
        m = _LOGDIR_RUN_RE.search(src.source)
        if m:
            add(src.source, "run_id", m.group("run"))
    ev = frames["events"]
    if len(ev):
        ev = ev[ev["kind"].isin(("job_id", "config"))]
        for source, kind, attrs in zip(ev["source"], ev["kind"], ev["details"]):
            if not isinstance(attrs, dict):
                continue
            if kind == "job_id":
                add(source, "run_id", attrs.get("run_id") or attrs.get("rdzv_id"))
                add(source, "slurm_job", attrs.get("slurm_job"))
            elif kind == "config":
                sizes = [int(attrs[k]) for k in _WS_KEYS if str(attrs.get(k, "")).isdigit()]
                if sizes:
                    _max_into(facts, source, "world_size", max(sizes))
    nccl = frames["nccl"]
    if len(nccl):
        init = nccl[nccl["nranks"].notna()]
        if len(init):  # vectorised: a per-source loop of DataFrame filters costs seconds on 2,000 ranks
            by_source = init.groupby("source", sort=True)["nranks"]
            for source, world in by_source.max().items():
                _max_into(facts, source, "world_size", int(world))
            top = init[init["nranks"] == by_source.transform("max")]
            for source, comm in zip(top["source"], top["comm_id"]):
                add(source, "comm_id", comm)
    return facts


def _max_into(facts: dict, source: str, key: str, value: int) -> None:
    """World size per file is the largest group it reports (sub-groups are smaller)."""
    cur = facts.setdefault(source, {}).get(key)
    if not cur or value > int(next(iter(cur))):
        facts[source][key] = {str(value)}


# Keys that name one job: shared values join files into one job, different values keep them apart.
_STRONG = ("run_id", "slurm_job")
# A communicator id is shared only by the ranks of one job attempt: it joins files but a different one may just
# be another attempt of the same job, so it never separates.
_LINK_ONLY = ("comm_id",)
# A different world size separates files unless a strong key joins them (an elastic restart can resize).
_SEPARATE_ONLY = ("world_size",)
_KEY_WORDS = {"run_id": "torchrun run id", "slurm_job": "Slurm job id", "world_size": "world size"}


def _group_jobs(order: list[str], facts: dict[str, dict[str, set]]) -> tuple[dict[str, str], dict]:
    """Union files that share a strong or link key, then split groups whose strong keys or world sizes differ."""
    parent = {s: s for s in facts}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    owner: dict[tuple[str, str], str] = {}
    for source in sorted(facts):
        for key in _STRONG + _LINK_ONLY:
            for value in sorted(facts[source].get(key, ())):
                other = owner.setdefault((key, value), source)
                a, b = find(source), find(other)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    components: dict[str, dict[str, set]] = {}
    members: dict[str, list[str]] = {}
    for source in sorted(facts):
        root = find(source)
        comp = components.setdefault(root, {})
        for key, values in facts[source].items():
            comp.setdefault(key, set()).update(values)
        members.setdefault(root, []).append(source)
    # Greedy, deterministic: bigger components first; each joins the first job it does not contradict.
    position = {s: i for i, s in enumerate(order)}
    roots = sorted(components, key=lambda r: (-len(members[r]), min(position.get(s, 0) for s in members[r]), r))
    jobs: list[dict] = []
    for root in roots:
        comp = components[root]
        for job in jobs:
            if not _conflict(job["facts"], comp):
                for key, values in comp.items():
                    job["facts"].setdefault(key, set()).update(values)
                job["members"].extend(members[root])
                break
        else:
            jobs.append({"facts": {k: set(v) for k, v in comp.items()}, "members": list(members[root])})
    jobs.sort(key=lambda j: min(position.get(s, 0) for s in j["members"]))
    labels: dict[str, str] = {}
    listing = []
    for i, job in enumerate(jobs, 1):
        label = f"job{i}"
        for s in job["members"]:
            labels[s] = label
        listing.append({"job": label, "sources": sorted(job["members"], key=lambda s: position.get(s, 0)),
                        "keys": {k: sorted(v) for k, v in sorted(job["facts"].items())}})
    note = _jobs_note(jobs, listing) if len(jobs) > 1 else None
    unassigned = len(order) - len(labels)
    return labels, {"count": max(1, len(jobs)) if order else 0, "note": note, "groups": listing,
                    "unassigned_sources": unassigned}


def _conflict(a: dict[str, set], b: dict[str, set]) -> bool:
    for key in _STRONG + _SEPARATE_ONLY:
        if a.get(key) and b.get(key) and not (a[key] & b[key]):
            if key in _SEPARATE_ONLY and any(a.get(k) and b.get(k) and a[k] & b[k] for k in _STRONG):
                continue
            return True
    return False


def _jobs_note(jobs: list[dict], listing: list[dict]) -> str:
    keys = []
    for key in _STRONG + _SEPARATE_ONLY:
        values = [sorted(j["facts"].get(key, ())) for j in jobs]
        if len({tuple(v) for v in values if v}) > 1:
            shown = " vs ".join(",".join(_short(x) for x in v) for v in values if v)
            keys.append(f"{_KEY_WORDS[key]} {shown}")
    parts = "; ".join(f"{item['job']}: {len(item['sources'])} file(s) such as {item['sources'][0]}" for item in listing)
    why = ", ".join(keys) or "different identities"
    resize = " (or an elastic restart with a different world size)" if keys and all(
        k.startswith("world size") for k in keys) else ""
    return (f"the files come from {len(jobs)} different jobs{resize} ({why}): {parts}. Ranks of different jobs are "
            f"different processes; analyse each job's files on their own.")


def _short(value: str) -> str:
    return value if len(value) <= 14 else value[:12] + "…"


def _versions(frames: dict[str, pd.DataFrame]) -> tuple[dict, str | None]:
    """NCCL and PyTorch versions stated per file; a note when files disagree."""
    versions: dict[str, dict[str, list[str]]] = {"nccl": {}, "torch": {}}

    def add(pkg: str, version, source) -> None:
        if version and isinstance(version, str):
            lst = versions[pkg].setdefault(version, [])
            if source not in lst:
                lst.append(source)

    nccl = frames["nccl"]
    if len(nccl):
        for v, s in zip(nccl["version"], nccl["source"]):
            add("nccl", v, s)
    ev = frames["events"]
    if len(ev):
        ev = ev[ev["kind"].isin(("job_id", "config"))]
        for kind, attrs, s in zip(ev["kind"], ev["details"], ev["source"]):
            if isinstance(attrs, dict):
                if kind == "config" and attrs.get("format") == "nccl-version":
                    add("nccl", attrs.get("nccl_version"), s)
                elif kind == "job_id":
                    add("torch", attrs.get("torch_version") or attrs.get("torch_pin"), s)
    versions = {pkg: {v: sorted(srcs) for v, srcs in sorted(found.items())} for pkg, found in versions.items()}
    mixed = [pkg for pkg, found in versions.items() if len(found) > 1]
    if not mixed:
        return versions, None
    names = {"nccl": "NCCL", "torch": "PyTorch"}
    parts = []
    for pkg in mixed:
        shown = ", ".join(f"{v} ({len(s)} file(s), e.g. {s[0]})" for v, s in versions[pkg].items())
        parts.append(f"{names[pkg]} {shown}")
    note = ("files report different versions: " + "; ".join(parts) + ". Either they come from different jobs, or "
            "ranks ran different installs (peers with different NCCL versions can fail or hang at init).")
    return versions, note


def clock_note(frames: dict[str, pd.DataFrame]) -> tuple[str | None, dict[str, float]]:
    """A caution when timestamps written on different hosts are compared (their clocks are not known to agree),
    with each host's clock offset estimated from the steps all of them logged."""
    rank_host: dict[int, str] = {}
    for name in ("nccl", "events", "tracebacks", "stacks", "gpu"):
        df = frames[name]
        if not len(df):
            continue
        both = df.loc[df["rank"].notna() & df["host"].notna(), ["rank", "host"]].drop_duplicates("rank")
        for rank, host in zip(both["rank"], both["host"]):
            rank_host.setdefault(int(rank), str(host))
    timed = []
    for name in ("events", "tracebacks", "steps"):
        df = frames[name]
        if not len(df):
            continue
        t = df.loc[df["ts"].notna(), ["host", "rank", "ts"] + (["step"] if name == "steps" else [])]
        if not len(t):
            continue
        host = t["host"].where(t["host"].notna(), t["rank"].map(lambda r: rank_host.get(int(r)) if pd.notna(r)
                                                                 else None))
        timed.append(t.assign(host=host.astype(object))[host.notna()])
    if not timed:
        return None, {}
    rows = pd.concat(timed, ignore_index=True)
    spans = rows.groupby("host")["ts"].agg(["min", "max"]).sort_index()
    if len(spans) < 2:
        return None, {}
    names = [str(h) for h in spans.index]
    offsets = _clock_offsets(names, rows)
    shown = ", ".join(f"{h}: {spans.loc[h, 'min'].isoformat()} … {spans.loc[h, 'max'].isoformat()}" for h in names[:6])
    more = f" and {len(names) - 6} more" if len(names) > 6 else ""
    note = (f"timestamps from {len(names)} hosts ({shown}{more}) are compared as if their clocks agreed; clocks "
            f"of different hosts can be skewed (no NTP, time zones), so the order of events on different hosts "
            f"that are close in time is not certain.")
    skewed = {h: o for h, o in offsets.items() if abs(o) >= 5.0}
    if skewed:
        ref = names[0]
        note += " Estimated from the steps both hosts logged (synchronous training keeps ranks within a step): " + \
            "; ".join(f"{h}'s clock reads {_duration(abs(o))} {'ahead of' if o > 0 else 'behind'} {ref}'s"
                      for h, o in sorted(skewed.items())) + "."
    return note, offsets


def _clock_offsets(names: list[str], rows: pd.DataFrame) -> dict[str, float]:
    """Seconds each host's clock is ahead of the first host's: the median, over steps both logged, of the gap."""
    if "step" not in rows or not rows["step"].notna().any():
        return {}
    first = rows[rows["step"].notna()].groupby(["host", "step"])["ts"].min()
    ref = names[0]
    if ref not in first.index.get_level_values(0):
        return {}
    base = first.loc[ref]
    out: dict[str, float] = {}
    for h in names[1:]:
        if h not in first.index.get_level_values(0):
            continue
        gaps = (first.loc[h] - base).dropna()
        if len(gaps):
            out[h] = round(float(gaps.dt.total_seconds().median()), 3)
    return out


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.0f} s"

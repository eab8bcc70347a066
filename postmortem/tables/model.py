"""Stage 3, the pandas side: the `Tables` object and the validated DataFrames assembled from the folded columns
(ranks resolved, dates without a year placed, the job's world size)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from postmortem.ingest import bundle
from postmortem.tables import schema
from postmortem.tables.numbers import Numbers
from postmortem.ranks.ends import classify as classify_exception
from postmortem import stacks as stacks_mod
from postmortem.ingest.discover import Source


@dataclass
class Tables:
    """The job's evidence as DataFrames (schemas in postmortem.tables.schema) plus job-level facts in `meta`."""
    frames: dict[str, pd.DataFrame]
    meta: dict = field(default_factory=dict)

    def __getitem__(self, name: str) -> pd.DataFrame:
        return self.frames[name]

    def __getattr__(self, name: str) -> pd.DataFrame:
        frames = self.__dict__.get("frames", {})
        if name in frames:
            return frames[name]
        raise AttributeError(name)

    def as_dict(self) -> dict[str, pd.DataFrame]:
        """Name -> DataFrame, in schema order."""
        return dict(self.frames)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.__dict__.get("frames", {})))

    def __repr__(self) -> str:
        sizes = ", ".join(f"{name}={len(df)}" for name, df in self.frames.items())
        return f"Tables({sizes})"


def _table_property(name: str) -> property:
    """`tables.<name>` with a docstring listing its columns and dtypes (from postmortem.tables.schema)."""
    def get(self) -> pd.DataFrame:
        return self.frames[name]
    cols = "\n".join(f"    {c} ({schema.dtype_of(c)}): {schema.COLUMN_DOCS[c]}" for c in schema.columns(name))
    get.__doc__ = f"DataFrame: {schema.TABLE_DOCS[name]}.\n\nColumns:\n{cols}\n"
    get.__name__ = name
    return property(get, doc=get.__doc__)


for _name in schema.TABLE_NAMES:
    setattr(Tables, _name, _table_property(_name))
del _name


def assemble(sources: list[Source], acc: dict[str, dict[str, list]], counts: dict[str, int], meta: dict) -> Tables:
    """The validated tables from their column lists (rows in the order of the sources; `acc` is used up)."""
    _resolve_hostpid_ranks(acc, meta["hostpid_rank"])
    raw_ts: dict[str, list] = {}

    def frame_of(name: str) -> pd.DataFrame:
        data = acc.pop(name)  # one table at a time: its column lists go as soon as its frame holds the values
        for col, values in data.items():
            if type(values) is Numbers:
                typed = values.series()
                data[col] = typed if typed is not None else values.as_list()
        df = schema.frame_from_columns(name, data, counts[name])
        if df.attrs.get("ts_without_year"):
            raw_ts[name] = data["ts"]  # read again once the job's dated stamps say the year
        return df
    frames = {name: frame_of(name) for name in schema.TABLE_NAMES}
    _date_stamps_without_year(frames, raw_ts)
    frames["stacks"] = stacks_mod.join_ranks(frames["stacks"], meta["hostpid_rank"])  # dumped pids -> NCCL ranks
    frames["stacks"] = traceback_stacks(frames["stacks"], frames["tracebacks"], _handled(frames, meta))
    for name, df in frames.items():
        schema.validate(name, df)
    meta.update(_world(frames))
    bundle.annotate(sources, frames, meta)  # sources.job, jobs/versions/clock notes, missing ranks
    schema.conform(frames["sources"], {"job": "object"})
    return Tables(frames, meta)


# Tracebacks that show where a rank *was*, not what went wrong: the user's Ctrl-C or the launcher's SIGTERM on a
# hung job, a traceback cut off mid-print, a collective that gave up waiting. Their frames are that rank's stack.
_WHERE_EXC = re.compile(r"KeyboardInterrupt|SignalException|SystemExit|<truncated>|Timeout|DistBackendError|"
                        r"DistStoreError|ChildFailedError")
_WHERE_MSG = re.compile(r"(?i)timed? ?out|got signal|SIGTERM|SIGINT|Terminated")
_TIMEOUT_MSG = re.compile(r"(?i)timed? ?out|timeout")


# Root exceptions whose traceback still shows where a rank waited: the ranks' collectives did not match there.
_MISMATCH_CATEGORIES = ("barrier_skew", "ddp_usage_error", "collective_timeout")


def _handled(frames: dict, meta: dict | None = None) -> list[bool] | None:
    """Which tracebacks the program went on from (postmortem.ranks.ends.handled_tracebacks), from the frames so far."""
    from types import SimpleNamespace

    from postmortem.ranks.ends import handled_tracebacks
    if frames["tracebacks"].empty:
        return None
    view = SimpleNamespace(tracebacks=frames["tracebacks"], steps=frames["steps"], events=frames["events"],
                           meta=meta or {})
    return handled_tracebacks(view)


def traceback_stacks(stacks: pd.DataFrame, tracebacks: pd.DataFrame, handled: list[bool] | None = None) -> pd.DataFrame:
    """`stacks` plus one stack per 'where was it' traceback of a rank (or rank-less file) that no dump covers.
    `handled`: per traceback, whether the program went on after it (then it is not where the rank ended)."""
    if tracebacks.empty:
        return stacks
    dumped = {(r if pd.notna(r) else s) for r, s in zip(stacks["rank"], stacks["source"])} if len(stacks) else set()
    rows = []
    for i, tb in enumerate(tracebacks.itertuples(index=False)):
        frames = tb.frames or []
        if len(frames) < 2 or stacks_mod.is_launcher(frames):
            continue  # a launcher's own traceback (mp.spawn's join, torchrun's agent) is no rank's stack
        if handled is not None and handled[i]:
            continue  # the rank went on training after it: a handled error, not where the rank was at the end
        role, category, _ = classify_exception(tb.exc_type, tb.exc_message, frames)
        if role == "root" and category not in _MISMATCH_CATEGORIES:
            continue  # an exception of its own (a port in use at start-up): an error, not a picture of a wait
        where = _WHERE_EXC.search(str(tb.exc_type)) or _WHERE_MSG.search(str(tb.exc_message)[:300]) \
            or role in ("lost_peer", "waiting")
        if not where and stacks_mod.classify_frames(frames) != "collective_wait":
            continue  # an ordinary exception outside a collective is an error, not a picture of a hang
        if tb.exc_type == "<truncated>" and stacks_mod.classify_frames(frames) not in ("collective_wait", "logging"):
            # A traceback cut off mid-print shows a hang only where it stops inside a blocking call (a collective,
            # a logger); elsewhere it is more likely an error whose last line was lost.
            continue
        unit = tb.rank if pd.notna(tb.rank) else tb.source
        if unit in dumped:
            continue
        if role in ("lost_peer", "waiting") and stacks_mod.classify_frames(frames) != "collective_wait":
            # A collective that timed out or lost its peer raised inside C++ (DDP's gradient all-reduce in backward,
            # a gloo wait): the exception itself says where the rank was, so the stack says it too.
            what = "timed out" if role == "waiting" else "lost its peer"
            frames = [{"func": f"c10d::Work::wait (the collective {what} inside C++)", "file": "", "line": None,
                       "native": True}] + list(frames)
        outer = str(frames[-1].get("func", ""))
        rows.append({"source": tb.source, "line": tb.line, "rank": tb.rank, "host": tb.host, "ts": tb.ts,
                     "pid": None, "thread": None, "thread_name": "MainThread" if outer == "<module>" else None,
                     "active": None, "owns_gil": None, "frames": frames,
                     "signature": stacks_mod.signature(frames), "dump": f"traceback:{tb.source}:{tb.line}"})
    if not rows:
        return stacks
    extra = schema.frame_from_columns("stacks", schema.to_columns(rows).data, len(rows))
    return pd.concat([stacks, extra], ignore_index=True) if len(stacks) else extra


def _date_stamps_without_year(frames: dict[str, pd.DataFrame], raw_ts: dict[str, list]) -> None:
    """glog and syslog stamps name no year (`W1121 14:03:58`): give them the year of the job's dated stamps (the
    collector's arrival times, torchrun's error files, ISO log lines, flight-recorder records) when any exist."""
    undated = {name: df.attrs.pop("ts_without_year", 0) for name, df in frames.items()}
    if not any(undated.values()):
        return
    dated = [df["ts"].dropna() for df in frames.values() if "ts" in df and df["ts"].notna().any()]
    if not dated:
        return  # nothing says which year: the stamps stay unknown rather than guessed
    ref = pd.concat(dated).median()
    for name, n in undated.items():
        if n:   # only the rows still without a time are read again
            ts = frames[name]["ts"]
            raw = pd.Series(raw_ts[name], dtype=object, index=ts.index)
            redo = ts.isna() & raw.notna()
            frames[name].loc[redo, "ts"] = schema.times(raw[redo], ref)[0]


def _resolve_hostpid_ranks(cols: dict[str, dict[str, list]], hostpid_rank: dict) -> None:
    """NCCL lines carry host:pid, not rank; an `Init COMPLETE ... rank N nranks M` line of the same pid maps them."""
    if not hostpid_rank:
        return
    nccl = cols["nccl"]
    ranks, pids, hosts = nccl["rank"], nccl["pid"], nccl["host"]
    for i, (rank, pid) in enumerate(zip(ranks, pids)):
        if rank is None and pid is not None:
            ranks[i] = hostpid_rank.get(f"{hosts[i]}:{pid}")
    ev = cols["events"]
    ranks = ev["rank"]
    for i, (rank, attrs) in enumerate(zip(ranks, ev["details"])):
        hp = (attrs or {}).get("hostpid")
        if hp and rank is None:
            ranks[i] = hostpid_rank.get(hp)


def _world(frames: dict[str, pd.DataFrame]) -> dict:
    """World size from explicit statements (config echoes, NCCL nranks), else highest rank seen + 1 (inferred)."""
    ranks: set[int] = set()
    for name in ("events", "tracebacks", "steps", "collectives", "stacks", "nccl", "last_lines"):
        ranks.update(int(r) for r in frames[name]["rank"].dropna().unique())
    # A rank's own log file (torchrun's attempt_0/<rank>/stderr.log, rank3.log) shows the rank ran, even when
    # nothing in it became a row (a healthy rank prints little).
    src = frames["sources"]
    if len(src):
        own = src[src["rank"].notna() & (src["lines"].fillna(0) > 0) & (src["parsed_ok"] == True)]  # noqa: E712
        ranks.update(int(r) for r in own["rank"].unique())
    claims = []
    ev = frames["events"]
    if len(ev):
        for attrs in ev.loc[ev["kind"] == "config", "details"]:
            for key in ("ws1", "ws2", "ws3", "ws4", "ws5", "ws6"):
                if key in attrs:
                    claims.append(int(attrs[key]))
        for attrs in ev.loc[ev["kind"] == "torchrun_failure", "details"]:
            if isinstance(attrs.get("rank"), int):
                ranks.add(attrs["rank"])
    nccl = frames["nccl"]
    if len(nccl):
        claims.extend(int(n) for n in nccl["nranks"].dropna().unique())
    ranks_seen = sorted(r for r in ranks if 0 <= r < 1_000_000)
    if claims:
        return {"world_size": max(claims), "world_size_inferred": False, "ranks_seen": ranks_seen}
    if ranks_seen:
        return {"world_size": max(ranks_seen) + 1, "world_size_inferred": True, "ranks_seen": ranks_seen}
    return {"world_size": None, "world_size_inferred": True, "ranks_seen": ranks_seen}

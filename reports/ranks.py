"""Per-rank activity for the timeline and step sections: one summary per rank, then lanes of identical ranks."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

GROUP_ABOVE = 16          # up to this many ranks every rank gets its own lane; above it identical ranks share one
MAX_LANES = 40            # lanes drawn; smaller groups beyond this merge into one "other ranks" lane
MAX_MARKS = 60            # error / stop marks kept per lane (the figure needs shape, not every point)
MAX_SILENT = 65_536       # world sizes beyond this are not enumerated for silent ranks
MAX_STEP_POINTS = 1500    # points per rank in the step chart
TIME_SHARE = 0.5          # timed share of the ranks' lines from which the timeline is drawn against time


@dataclass
class Axis:
    """How positions are measured: seconds since `origin` (mode "time": the lines that carry a time, from any
    source), or the n-th event of each rank in its own log ("order": no source gives a time; ranks do not compare)."""
    mode: str
    origin: pd.Timestamp | None = None

    def where(self, x: float | None, source: str | None, line) -> str:
        """Human label of a position: a UTC time, or source:line."""
        if x is None:
            return ""
        if self.mode == "time" and self.origin is not None:
            return (self.origin + pd.Timedelta(seconds=float(x))).strftime("%Y-%m-%d %H:%M:%S")
        return f"{source}:{int(line)}" if source is not None and line is not None and not pd.isna(line) else ""


@dataclass
class RankSummary:
    """What one rank did, from its first to its last attributable line."""
    rank: int | None
    first_x: float
    last_x: float
    first_where: str
    last_where: str
    last_kind: str
    last_text: str
    last_key: str             # masked form of the last line, so identical ranks compare equal
    n_errors: int = 0
    error_xs: list[float] = field(default_factory=list)
    first_error_x: float | None = None
    first_error_text: str = ""
    error_kinds: tuple[str, ...] = ()
    last_step: int | None = None
    role: str = "other"
    busy_until: float | None = None   # x of the rank's last line that is not an error (steps, collectives, events)


@dataclass
class Lane:
    """One swimlane: a rank, or a group of ranks that behaved identically."""
    ranks: list[int]
    role: str
    first_x: float
    last_x: float
    stop_xs: list[float]
    error_xs: list[float]
    first_error_x: float | None
    n_errors: int
    first_where: str
    last_where: str
    how: str
    unattributed: bool = False
    silent: bool = False          # a culprit rank that left no attributable line: a label, no bar
    busy_until: float | None = None   # the end of the lane's activity; from there to last_x it was quiet or erring
    untimed: bool = False         # ... or whose lines all lack a time on a time axis


@dataclass
class RankModel:
    """Everything the timeline and step views need, computed once per report."""
    axis: Axis
    summaries: list[RankSummary]
    lanes: list[Lane]
    merged_groups: int
    silent: list[int]
    culprits: list[int]
    affected: list[int]
    steps_phase: str | None
    step_axis: Axis
    step_series: dict          # rank (or None) -> (xs, steps) for the chart
    step_last: list[dict]      # per rank: rank, last_step, x, where
    untimed_left_out: int = 0  # rank lines without a time, left off a time axis
    step_unit: str = "step"    # what the steps count: "step", or "item" for data-preparation progress bars


def _is_error(level) -> bool:
    return isinstance(level, str) and level[:1].upper() in ("E", "F")


def _errors(level: pd.Series) -> np.ndarray:
    """_is_error of a level column, decided once per distinct level (a job has a handful)."""
    codes, uniques = pd.factorize(level)
    if not len(uniques):
        return np.zeros(len(level), dtype=bool)
    per = np.array([_is_error(u) for u in uniques] + [False], dtype=bool)  # (code -1, a missing level: last)
    return per[codes]


def _activity(tables) -> pd.DataFrame:
    """Rows of rank activity from every table that has positions: rank, ts, source, line, kind, text, key, err.

    `key` is what follows "kind|" in the row's key (the rows' keys and texts are made into strings only where a
    rank summary reads them: a job of thousands of ranks has hundreds of thousands of event rows)."""
    parts = []
    ev = tables.events
    if len(ev):
        key = ev["template"].where(ev["template"].notna(), ev["message"])
        parts.append(pd.DataFrame({"rank": ev["rank"], "ts": ev["ts"], "source": ev["source"], "line": ev["line"],
                                   "kind": ev["kind"], "text": ev["message"], "key": key,
                                   "err": _errors(ev["level"])}))
    tb = tables.tracebacks
    if len(tb):
        line = tb["end_line"].where(tb["end_line"].notna(), tb["line"])
        text = tb["exc_type"].astype(str) + ": " + tb["exc_message"].fillna("").astype(str)
        parts.append(pd.DataFrame({"rank": tb["rank"], "ts": tb["ts"], "source": tb["source"], "line": line,
                                   "kind": "traceback", "text": text, "key": tb["exc_type"].astype(str),
                                   "err": True}))
    st = tables.steps
    if len(st):
        # Only each file's first and last step row matter for activity spans; keeps millions of steps cheap.
        s = st[st["line"].notna()]
        if len(s):
            idx = pd.Index(s.groupby(["source"], sort=False)["line"].idxmin()).append(
                pd.Index(s.groupby(["source"], sort=False)["line"].idxmax()))
            if s["rank"].notna().any():
                r = s[s["rank"].notna()]
                idx = idx.append(pd.Index(r.groupby(["source", "rank"], sort=False)["line"].idxmin())).append(
                    pd.Index(r.groupby(["source", "rank"], sort=False)["line"].idxmax()))
            s = s.loc[sorted(set(idx))]
            parts.append(pd.DataFrame({"rank": s["rank"], "ts": s["ts"], "source": s["source"], "line": s["line"],
                                       "kind": "step", "text": "step " + s["step"].astype(str),
                                       "key": s["phase"].fillna("").astype(str), "err": False}))
    co = tables.collectives
    if len(co):
        text = (co["op"].fillna("?").astype(str) + " seq " + co["seq"].astype(str) + " "
                + co["state"].fillna("").astype(str))
        parts.append(pd.DataFrame({"rank": co["rank"], "ts": co["ts"], "source": co["source"], "line": co["line"],
                                   "kind": "collective", "text": text.str.strip(),
                                   "key": co["op"].fillna("?").astype(str) + "|" + co["state"].fillna("").astype(str),
                                   "err": False}))
    if not parts:
        return pd.DataFrame(columns=["rank", "ts", "source", "line", "kind", "text", "key", "err"])
    parts = [p.astype({"rank": "Int64", "line": "Int64"}) for p in parts]
    df = pd.concat(parts, ignore_index=True)
    return df[df["line"].notna() | df["ts"].notna()]


def _axis(act: pd.DataFrame) -> Axis:
    """Time when the timed lines can place the ranks (at least half of the ranks' lines carry a time, or every rank
    has a timed line; untimed lines are left off the axis), else each rank's own order."""
    ranked = act[act["rank"].notna()]
    base = ranked if len(ranked) else act
    if not len(base) or not base["ts"].notna().any():
        return Axis("order")
    timed = base["ts"].notna()
    every = not len(ranked) or set(ranked["rank"].dropna()) == set(ranked.loc[ranked["ts"].notna(), "rank"].dropna())
    if timed.mean() >= TIME_SHARE or every:
        return Axis("time", base["ts"].min())
    return Axis("order")


def _x(df: pd.DataFrame, axis: Axis) -> pd.Series:
    if axis.mode == "time":
        return (df["ts"] - axis.origin).dt.total_seconds()
    if axis.mode == "order":
        return df["order"].astype("float64")
    return df["line"].astype("float64")


def _activity_order(act: pd.DataFrame) -> pd.DataFrame:
    """No line has a time: number each rank's lines in its own order (the file it wrote most of, then the line), so
    one rank's lines never mix with another's file positions."""
    act = act.assign(_rk=act["rank"].astype("float64").fillna(-1.0))
    act = act.sort_values(["_rk", "source", "line"], kind="stable")
    return act.assign(order=act.groupby("_rk").cumcount() + 1).drop(columns="_rk")


def _own_order(st: pd.DataFrame) -> pd.DataFrame:
    """Untimed step reports: each rank's reports from the file that has most of them, numbered in that file's
    order (line numbers of different files do not compare, and a rank's steps echoed in two files would zig-zag)."""
    st = st[st["rank"].notna()]
    if not len(st):
        return st.assign(order=pd.Series(dtype="float64"))
    counts = st.groupby(["rank", "source"], sort=True).size().reset_index(name="n")
    best = counts.sort_values(["rank", "n", "source"], ascending=[True, False, True]).drop_duplicates("rank")
    keep = set(zip(best["rank"], best["source"]))
    st = st[[(r, s) in keep for r, s in zip(st["rank"], st["source"])]].sort_values(["rank", "line"], kind="stable")
    return st.assign(order=st.groupby("rank").cumcount() + 1)


@dataclass
class Prepared:
    """The part of a RankModel that the verdict does not change (what every rank did; summaries without roles)."""
    axis: Axis
    summaries: list[RankSummary]
    seen: set
    untimed: int
    last_steps: dict
    step_series: dict
    phase: str | None
    step_axis: Axis


def prepare(tables) -> Prepared:
    """The verdict-independent part of build(): computed beside the rules for an HTML report (view_ahead)."""
    act = _activity(tables)
    axis = _axis(act)
    untimed = 0
    # every rank with a line, timed or not
    seen = set(act["rank"].dropna().astype("int64").unique().tolist()) if len(act) else set()
    if len(act):
        if axis.mode == "time":
            ranked = act["rank"].notna()
            untimed = int((ranked & act["ts"].isna()).sum())
            act = act[act["ts"].notna()]
        else:
            act = _activity_order(act)
        act = act.assign(x=_x(act, axis))
        act = act[act["x"].notna()].sort_values(["x", "source", "line"], kind="stable")
    last_steps, step_series, phase, step_axis = _steps(tables, axis)
    summaries = _summaries(act, axis, last_steps)
    return Prepared(axis, summaries, seen, untimed, last_steps, step_series, phase, step_axis)


def build(analysis, prepared: Prepared | None = None) -> RankModel:
    """Summaries, lanes and step series for an Analysis (`prepared`: prepare() of its tables, done ahead)."""
    tables = analysis.tables
    prep = prepared if prepared is not None else prepare(tables)
    axis, summaries, seen = prep.axis, prep.summaries, prep.seen
    root = analysis.finding_list[0] if analysis.finding_list and analysis.verdict is not None \
        and analysis.verdict.category not in ("no_failure",) else None
    culprits = list(root.culprit_ranks) if root else []
    affected = list(root.affected_ranks) if root else []
    ranks_t = tables.frames.get("ranks")
    if root and not affected and ranks_t is not None and len(ranks_t) and "waiting" in ranks_t:
        # the verdict names no ranks that waited: the rank table knows which did (a timeout, a stack in a wait)
        waited = ranks_t[ranks_t["waiting"].fillna(False).astype(bool)]["rank"]
        affected = [int(r) for r in waited if int(r) not in culprits]
    _roles(summaries, culprits, affected)
    drawn = {s.rank for s in summaries if s.rank is not None}
    ws = tables.meta.get("world_size")
    silent = [r for r in range(int(ws)) if r not in seen] if ws and int(ws) <= MAX_SILENT else []
    lanes, merged = _lanes([s for s in summaries if s.rank is not None])
    # A culprit with no lines of its own (often the silent rank everyone waited for) still gets its lane.
    quiet = [r for r in culprits if r not in drawn]
    if quiet and lanes:
        lanes.insert(0, Lane(quiet, "culprit", lanes[0].first_x, lanes[0].first_x, [], [], None, 0, "", "", "",
                             silent=True, untimed=all(r in seen for r in quiet)))
    unattributed = [s for s in summaries if s.rank is None]
    for s in unattributed:
        lanes.append(Lane([], "unattributed", s.first_x, s.last_x, [s.last_x], s.error_xs[:MAX_MARKS],
                          s.first_error_x, s.n_errors, s.first_where, s.last_where, _how(s), unattributed=True,
                          busy_until=s.busy_until))
    step_last = [{"rank": k, "last_step": v[0], "x": v[1], "where": v[2]} for k, v in prep.last_steps.items()]
    return RankModel(axis, summaries, lanes, merged, silent, culprits, affected, prep.phase, prep.step_axis,
                     prep.step_series, step_last, untimed_left_out=prep.untimed,
                     step_unit="item" if prep.phase == "data" else "step")


def _roles(summaries: list[RankSummary], culprits, affected) -> None:
    """Each summary's role in the verdict: culprit, affected (waited for it) or other."""
    culprits, affected = set(culprits), set(affected)
    for s in summaries:
        s.role = "culprit" if s.rank in culprits else "affected" if s.rank in affected else "other"


def _groups(rank: pd.Series) -> tuple[list, np.ndarray]:
    """Runs of equal ranks in a rank-sorted column: the rank of each run (None for missing) and the run bounds."""
    na = rank.isna().to_numpy()
    vals = rank.fillna(0).to_numpy(dtype="int64")
    n = len(vals)
    change = np.ones(n, dtype=bool)
    change[1:] = (vals[1:] != vals[:-1]) | (na[1:] != na[:-1])
    starts = np.flatnonzero(change)
    keys = [None if na[i] else int(vals[i]) for i in starts]
    return keys, np.append(starts, n)


def _summaries(act: pd.DataFrame, axis: Axis, last_steps) -> list[RankSummary]:
    """One summary per rank (ranks ascending, unattributed rows last), from whole columns, not a frame per rank;
    roles are the verdict's (_roles)."""
    if not len(act):
        return []
    # Stable by rank keeps each rank's rows in the activity order (x, source, line).
    act = act.sort_values("rank", kind="stable", na_position="last")
    keys, bounds = _groups(act["rank"])
    x = act["x"].to_numpy(dtype="float64")
    source = act["source"].tolist()
    line = act["line"].tolist()
    kind = act["kind"].tolist()
    text = act["text"].tolist()
    key = act["key"].tolist()
    err = act["err"].to_numpy(dtype=bool)
    err_pos = np.flatnonzero(err)
    err_cut = np.searchsorted(err_pos, bounds)
    # each group's last row that is no error (its busy-until), in one pass: -1 where there is none
    last_ok = np.maximum.reduceat(np.where(err, -1, np.arange(len(err))), bounds[:-1]) if len(err) else []
    firsts, lasts = bounds[:-1], bounds[1:] - 1
    first_where = _where_all(axis, x, source, line, firsts)
    last_where = _where_all(axis, x, source, line, lasts)
    out = []
    for g, rank in enumerate(keys):
        a, b = int(bounds[g]), int(bounds[g + 1]) - 1
        s = RankSummary(rank=rank, first_x=float(x[a]), last_x=float(x[b]),
                        first_where=first_where[g], last_where=last_where[g],
                        last_kind=str(kind[b]), last_text=str(text[b])[:240], last_key=f"{kind[b]}|{key[b]}")
        errs = err_pos[err_cut[g]:err_cut[g + 1]]
        s.n_errors = int(len(errs))
        s.busy_until = float(x[last_ok[g]]) if last_ok[g] >= 0 else None
        if len(errs):
            xs = x[errs]
            s.error_xs = [float(v) for v in xs[:: max(1, len(xs) // MAX_MARKS)][:MAX_MARKS]]
            s.first_error_x = float(xs[0])
            s.first_error_text = str(text[errs[0]])[:240]
            s.error_kinds = tuple(sorted({str(kind[i]) for i in errs}))
        if rank in last_steps:
            s.last_step = last_steps[rank][0]
        out.append(s)
    return out


def _where_all(axis: Axis, x: np.ndarray, source: list, line: list, at: np.ndarray) -> list[str]:
    """axis.where() of many positions at once (the times formatted as one column: per call it cost ~9 us)."""
    if axis.mode == "time" and axis.origin is not None:
        stamps = axis.origin + pd.to_timedelta(x[at], unit="s")
        return list(pd.DatetimeIndex(stamps).strftime("%Y-%m-%d %H:%M:%S"))
    return [axis.where(x[i], source[i], line[i]) for i in at]


def _how(s: RankSummary) -> str:
    return f"{s.last_kind}: {s.last_text}" if s.last_text else s.last_kind


def _lanes(summaries: list[RankSummary]) -> tuple[list[Lane], int]:
    """Group ranks into lanes (each rank alone for small jobs); returns lanes and how many groups were merged."""
    if len(summaries) <= GROUP_ABOVE:
        groups = [[s] for s in summaries]
    else:
        by_key: dict[tuple, list[RankSummary]] = {}
        for s in summaries:
            key = (s.role, s.last_key, s.error_kinds, s.last_step)
            by_key.setdefault(key, []).append(s)
        groups = list(by_key.values())
    # Culprits first, then the ranks that waited, then the rest; larger groups before smaller ones.
    order = {"culprit": 0, "affected": 1, "other": 2}
    groups.sort(key=lambda g: (order[g[0].role], -len(g) if len(summaries) > GROUP_ABOVE else 0, g[0].rank))
    merged = 0
    if len(groups) > MAX_LANES:
        keep = [g for g in groups if g[0].role == "culprit"][:MAX_LANES - 1]
        rest = [g for g in groups if g[0].role != "culprit"]
        room = MAX_LANES - 1 - len(keep)
        keep += rest[:room]
        tail = [s for g in rest[room:] for s in g] + [s for g in groups if g[0].role == "culprit"][MAX_LANES - 1:]
        merged = len(groups) - len(keep)
        groups = keep + ([sorted(tail, key=lambda s: s.rank)] if tail else [])
    lanes = []
    for g in groups:
        rep = min(g, key=lambda s: s.last_x) if g[0].role == "culprit" else g[0]
        stops = sorted(s.last_x for s in g)
        errs = sorted(x for s in g for x in s.error_xs)
        firsts = [s.first_error_x for s in g if s.first_error_x is not None]
        roles = {s.role for s in g}
        lanes.append(Lane(ranks=sorted(s.rank for s in g), role=g[0].role if len(roles) == 1 else "other",
                          first_x=min(s.first_x for s in g), last_x=max(s.last_x for s in g),
                          stop_xs=_thin(stops), error_xs=_thin(errs),
                          first_error_x=min(firsts) if firsts else None, n_errors=sum(s.n_errors for s in g),
                          busy_until=max((s.busy_until for s in g if s.busy_until is not None), default=None),
                          first_where=min(g, key=lambda s: s.first_x).first_where,
                          last_where=max(g, key=lambda s: s.last_x).last_where, how=_how(rep)))
    return lanes, merged


def _thin(xs: list[float]) -> list[float]:
    if len(xs) <= MAX_MARKS:
        return xs
    step = len(xs) / MAX_MARKS
    return [xs[int(i * step)] for i in range(MAX_MARKS)] + [xs[-1]]


def _progress(st: pd.DataFrame) -> pd.Series:
    """Each report's overall progress: its step, plus the steps of the earlier epochs where the step counter restarts
    every epoch (a per-epoch `batch i/N` would otherwise draw a sawtooth)."""
    step = st["step"].astype("float64")
    if "epoch" not in st or not st["epoch"].notna().any():
        return step
    out = step.copy()
    for _, g in st.groupby("rank", sort=False, dropna=False):
        ep = pd.to_numeric(g["epoch"], errors="coerce")
        if ep.isna().all() or ep.nunique() < 2:
            continue
        # steps restart when they fall while the epoch grows: offset each epoch by the largest step before it
        per_epoch = g.groupby(ep, sort=True)["step"].max().astype("float64")
        if not (g.groupby(ep, sort=True)["step"].min().astype("float64").iloc[1:] <=
                per_epoch.shift(1).iloc[1:]).any():
            continue   # a global counter: nothing to add
        total = pd.to_numeric(g.get("total"), errors="coerce") if "total" in g else None
        size = (per_epoch + 1) if total is None or total.isna().all() else \
            pd.Series(float(total.max()), index=per_epoch.index)
        offset = size.cumsum().shift(1).fillna(0.0)
        out.loc[g.index] = g["step"].astype("float64").to_numpy() + ep.map(offset).fillna(0.0).to_numpy()
    return out


def _steps(tables, axis: Axis) -> tuple[dict, dict, str | None, Axis]:
    """Last step per rank (in the main phase), per-rank series for the chart, the phase, and the steps' axis: time
    when any step line of a rank has one (untimed ones are left off the chart), else each rank's own order."""
    st = tables.steps
    st = st[st["step"].notna()]
    if not len(st):
        return {}, {}, None, axis
    phases = st["phase"].fillna("unknown")
    counts = phases.value_counts()
    phase = "train" if (phases == "train").any() else sorted(counts.index, key=lambda p: (-counts[p], p))[0]
    st = st[phases == phase]
    st = st.assign(progress=_progress(st))
    timed = st[st["rank"].notna() & st["ts"].notna()]
    if len(timed):
        step_axis = axis if axis.mode == "time" else Axis("time", timed["ts"].min())
        own = _own_order(st)   # the last step of a rank counts its untimed reports too
        st = timed
    else:
        step_axis = Axis("order")
        st = own = _own_order(st)
    st = st.assign(x=_x(st, step_axis))
    st = st[st["x"].notna()]
    last: dict = {}
    series: dict = {}
    if not len(own):
        return last, series, phase, step_axis
    # the last step of each rank: its highest progress, in its own reports (timed or not)
    o = own.sort_values(["rank", "line"], kind="stable")
    # each step line's x, by (rank, source, line), the first in the table's order (one pass, not one per rank)
    at: dict = {}
    for r, src, line, x in zip(st["rank"], st["source"], st["line"], st["x"]):
        if r is not pd.NA and line is not pd.NA and r == r and line == line:
            at.setdefault((int(r), src, int(line)), x)
    top = o.groupby("rank", sort=True)["progress"].idxmax()  # each rank's first report of its highest progress
    tops = o.loc[top.to_numpy()]
    for r, step, src, line in zip(top.index, tops["step"], tops["source"], tops["line"]):
        x = float(at.get((int(r), src, int(line)), float("nan"))) if pd.notna(line) else float("nan")
        last[int(r)] = (int(step), x, step_axis.where(x, src, line) if x == x else f"{src}:{int(line)}")
    if not len(st):
        return last, series, phase, step_axis
    # Rank-sorted, x-sorted within a rank (stable: equal x keep table order), so each rank is one slice.
    st = st.sort_values(["rank", "x"], kind="stable", na_position="last")
    keys, bounds = _groups(st["rank"])
    x = st["x"].to_numpy(dtype="float64")
    prog = st["progress"].to_numpy(dtype="float64")
    for g, r in enumerate(keys):
        a, b = int(bounds[g]), int(bounds[g + 1])
        xs, ys = x[a:b], prog[a:b]
        if len(xs) > MAX_STEP_POINTS:
            k = len(xs) // MAX_STEP_POINTS + 1
            xs, ys = np.append(xs[::k], xs[-1]), np.append(ys[::k], ys[-1])
        series[r] = (xs.tolist(), ys.tolist())
    return last, series, phase, step_axis

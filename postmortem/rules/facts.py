"""Derived, read-only views of the tables that several rules share (pure functions; no I/O)."""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pandas as pd

from postmortem.parsers.linear_regex import compile_search
from postmortem.stacks.frames import in_thread  # noqa: F401 - rules call it as facts.in_thread
from postmortem.verdict.findings import Evidence

# Exceptions that are consequences of another rank's failure, not causes.
CASCADE_EXC = re.compile(
    r"(?i)ChildFailedError|SignalException|DistBackendError|ProcessExitedException|KeyboardInterrupt|SystemExit|"
    r"WorkerGroupError|TrainingFailedError|<truncated>")  # (Ray Train's driver re-raising a worker's failure)
# searched in time linear in the message (its `NCCL error.*remote` from every `NCCL error` was not)
CASCADE_MSG = compile_search(
    r"(?i)Connection closed by|Connection reset by peer|Broken pipe|pair closure|Timed out waiting|Read timeout|"
    r"Watchdog caught|watchdog thread terminated|Socket Timeout|store->get|ncclUniqueId|NCCL communicator was aborted|"
    r"timed out|Timeout|driver shutting down|got signal|SIGTERM|recvValue failed|sendBytes failed|"
    r"NCCL error.*remote|ncclRemoteError|Detected mismatch between collectives", 0, re.compile)

LIB_PATH = re.compile(r"site-packages|dist-packages|/lib/python\d|\\lib\\|<frozen|/usr/lib/python")


def ev(tables, kind: str | tuple[str, ...]) -> pd.DataFrame:
    """Events of one or more kinds, in source/line order."""
    df = tables.events
    kinds = (kind,) if isinstance(kind, str) else kind
    at = _kind_positions(tables, df)
    parts = [at[k] for k in dict.fromkeys(kinds) if k in at]
    if not parts:
        return df.iloc[0:0]
    return df.iloc[parts[0] if len(parts) == 1 else np.sort(np.concatenate(parts))]


# Error kinds that a program can meet and go on from (an allocation probe that retries smaller, a bad record it
# skips): where the stream went on training or ended normally afterwards, the line is not a cause.
RECOVERABLE_KINDS = ("oom", "host_oom", "checkpoint_error", "dataloader", "cuda_error", "ddp_error", "error",
                     "enospc")


def fatal(tables, df: pd.DataFrame) -> pd.DataFrame:
    """Rows of `df` (events) after which their stream did not go on (postmortem.ranks.ends: later training steps or an
    end-of-training marker in the same stream, or a zero exit of the rank)."""
    if df.empty:
        return df
    from postmortem.ranks.ends import goes_on
    goes = goes_on(tables)
    keep = [k not in RECOVERABLE_KINDS or not goes.went_on(r, s, ln)
            for k, r, s, ln in zip(df["kind"].tolist(), df["rank"].tolist(), df["source"].tolist(), df["line"].tolist())]
    return df[pd.Series(keep, index=df.index, dtype=bool)]


def _kind_positions(tables, df: pd.DataFrame) -> dict:
    """Row positions of each event kind, computed once per events table (the rules ask ~30 times; an `isin` over
    every event each time was the largest single cost of the rules on a 512-rank job)."""
    cached = getattr(tables, "_kind_positions", None)
    if cached is not None and cached[0] is df:
        return cached[1]
    at = df.groupby("kind", sort=False).indices if len(df) else {}  # kind -> positions, ascending
    try:
        tables._kind_positions = (df, at)
    except AttributeError:  # a read-only stand-in for Tables: no cache
        pass
    return at


def evidence_from(df: pd.DataFrame, limit: int = 6, text_col: str = "message") -> list[Evidence]:
    """Evidence lines from rows of a table (first `limit` rows)."""
    out = []
    for _, row in df.head(limit).iterrows():
        text = row.get(text_col) if text_col in row else _step_text(row) if "step" in row else ""
        out.append(Evidence(source=row["source"], line=_int(row["line"]), rank=_int(row["rank"]),
                            text=str(text if text is not None else "")[:400]))
    return out


def _step_text(row) -> str:
    """A steps-table row as evidence text (the table keeps numbers, not the line): `Steps: step 61/61`."""
    step, total, desc = row.get("step"), row.get("total"), row.get("desc")
    if step is None or pd.isna(step):
        return ""
    # ("custom": the parser's mark for a step line without a bar description)
    head = f"{desc}: " if isinstance(desc, str) and desc.strip() and desc != "custom" else ""
    of = f"/{int(total)}" if total is not None and not pd.isna(total) else ""
    return f"{head}step {int(step)}{of}"


def tb_evidence(row, extra: str = "") -> Evidence:
    """One evidence line for a traceback row (its exception line, with the innermost user frame)."""
    frame = row["last_user_frame"] or {}
    where = f" (in {frame.get('func')} at {frame.get('file', '').rsplit('/', 1)[-1]}:{frame.get('line')})" if frame else ""
    return Evidence(source=row["source"], line=_int(row["end_line"]) or _int(row["line"]), rank=_int(row["rank"]),
                    text=f"{row['exc_type']}: {row['exc_message']}"[:400] + where + extra)


def _int(v):
    try:
        return None if pd.isna(v) else int(v)
    except (TypeError, ValueError):
        return None


def ranks_of(df: pd.DataFrame) -> list[int]:
    """Distinct non-null ranks of a frame."""
    return sorted(int(r) for r in df["rank"].dropna().unique())


def is_cascade_traceback(row) -> bool:
    """True for exceptions that report another rank's failure (timeouts, closed peers, launcher summaries)."""
    return _is_cascade(row["exc_type"], row["exc_message"])


def _is_cascade(exc_type, exc_message) -> bool:
    return bool(CASCADE_EXC.search(str(exc_type)) or CASCADE_MSG.search(str(exc_message)))


def root_tracebacks(tables) -> pd.DataFrame:
    """Tracebacks that are not cascades and not the launcher's own, earliest first per source."""
    tb = tables.tracebacks
    if tb.empty:
        return tb
    from postmortem.ranks.ends import handled_tracebacks
    handled = handled_tracebacks(tables)  # the program went on after it: handled, never a cause
    # read column-wise: a Series per row costs ~50 us, and an error flood keeps thousands of tracebacks
    keep = [not h and not _is_cascade(t, m) and not _catalog_consequence(t, m)
            for t, m, h in zip(tb["exc_type"].tolist(), tb["exc_message"].tolist(), handled)]
    return tb[pd.Series(keep, index=tb.index, dtype=bool)]


@lru_cache(maxsize=4096)
def _catalog_consequence(exc_type, exc_message) -> bool:
    """The message catalog knows the exception as a consequence (a peer-gone or waiting family whose words the
    regexes above do not hold, e.g. `Rank 1 successfully reached monitoredBarrier, but received errors`)."""
    from postmortem import catalog
    info = catalog.classify_exception(str(exc_type or ""), str(exc_message or "")[:600])
    return info.role == "consequence" and info.basis == "family"


def frame_funcs(frames) -> list[str]:
    """Lower-case function names of a frame list (innermost first)."""
    return [str(f.get("func", "")).lower() for f in (frames or [])]


def frames_text(frames) -> str:
    """Frames flattened to one lower-case string (func, file and code) for keyword tests."""
    return " | ".join(f"{f.get('func', '')} {f.get('file', '')} {f.get('code', '')}" for f in (frames or [])).lower()


def world_ranks(tables) -> list[int]:
    """All ranks of the job when the world size is known, else the ranks seen."""
    ws = tables.meta.get("world_size")
    if ws and ws < 100_000:
        return list(range(int(ws)))
    return list(tables.meta.get("ranks_seen", []))


def last_step_per_rank(tables, phase: str | None = "train") -> dict[int, int]:
    """Highest step reported by each rank (only rows with a known rank and step)."""
    st = tables.steps
    st = st[st["rank"].notna() & st["step"].notna()]
    if phase:
        st = st[st["phase"] == phase]
    if st.empty:
        return {}
    return {int(r): int(s) for r, s in st.groupby("rank")["step"].max().items()}


def order_key(row) -> tuple:
    """Sort key for 'earlier': timestamp when present, else position in its file."""
    ts = row.get("ts") if hasattr(row, "get") else None
    if ts is not None and not pd.isna(ts):
        return (0, pd.Timestamp(ts).value)
    line = _int(row.get("line") if hasattr(row, "get") else None)
    return (1, line if line is not None else 1 << 60)


def order_keys(df: pd.DataFrame) -> list[tuple]:
    """order_key of every row, read column-wise (no Series per row: thousands of rows in an error flood)."""
    n = len(df)
    ts = df["ts"].tolist() if "ts" in df.columns else [None] * n
    lines = df["line"].tolist() if "line" in df.columns else [None] * n
    return [order_key({"ts": t, "line": ln}) for t, ln in zip(ts, lines)]


def fr_divergence(tables):
    """The flight recorder's first divergence across ranks (postmortem.ranks.fr_match), or None."""
    coll = tables.collectives
    fr = coll[coll["line"].isna()] if len(coll) else coll
    if not len(fr):
        return None
    try:
        from postmortem.ranks.fr_match import match_collectives
        return match_collectives(fr).first_divergence
    except Exception:  # noqa: BLE001 - a dump the matcher cannot read says nothing here
        return None


def laggards(tables) -> tuple[list[int], str, list[Evidence]]:
    """Ranks behind the others: flight-recorder 'who never issued seq N', else the smallest watchdog 'last
    completed' counter. Returns (ranks, reason, evidence); empty when neither source exists or nobody lags."""
    coll = tables.collectives
    fr = coll[coll["line"].isna()] if len(coll) else coll
    if len(fr):
        div = fr_divergence(tables)
        if div is not None and div.kind == "missing" and div.ranks:
            src = fr[fr["rank"].isin(list(div.ranks))]
            ev = [Evidence(str(src.iloc[0]["source"]) if len(src) else "flight recorder", None,
                           int(div.ranks[0]), f"flight recorder: {div.detail}")]
            return sorted(int(r) for r in div.ranks), f"the flight recorder shows {div.detail}", ev
    wd = coll[coll["line"].notna() & coll["last_completed"].notna() & coll["rank"].notna()] if len(coll) else coll
    if len(wd) and wd["rank"].nunique() >= 2:
        per = wd.groupby("rank")["last_completed"].max()
        low = per.min()
        behind = [int(r) for r, v in per.items() if v == low]
        if per.max() > low and len(behind) * 2 < len(per):
            rows = wd[wd["rank"].isin(behind)]
            return behind, (f"watchdog counters: rank(s) {behind} last completed collective #{int(low)} while others "
                            f"reached #{int(per.max())}"), evidence_from(rows, 2)
    return [], "", []


def rank_value(tables, rank: int, column: str):
    """One cell of the `ranks` table (None when the rank or the value is unknown)."""
    from postmortem.ranks.last_words import rank_row
    row = rank_row(tables, rank)
    if row is None:
        return None
    v = row[column]
    if v is None or (not isinstance(v, (list, str)) and pd.isna(v)):
        return None
    return int(v) if column in ("last_step", "last_enqueued", "last_started", "last_completed") else v


STEP_IN_TEXT = re.compile(r"(?i)\b(?:step|iter(?:ation)?|global_step)[ _=:-]?(\d{1,9})\b|checkpoint-(\d{1,9})\b")


def step_before(tables, source, line) -> int | None:
    """The job's step just before a line of a file: its last progress row there, or a step a later phase marker
    names ('Generating samples at step 2000', 'checkpoint-2000'); None when the file shows none."""
    if source is None or line is None or pd.isna(line):
        return None
    st = tables.steps
    rows = st[(st["source"] == source) & (st["line"] <= line) & st["step"].notna() & (st["phase"] == "train")] \
        if len(st) else st
    best, at = None, -1
    if len(rows):
        last = rows.iloc[-1]
        best, at = int(last["step"]), int(last["line"])
    ev = tables.events
    marks = ev[(ev["source"] == source) & (ev["line"] <= line) & (ev["line"] >= at)
               & ev["kind"].isin(["sample_start", "eval_start", "checkpoint_save"])] if len(ev) else ev
    for msg in marks["message"]:
        m = STEP_IN_TEXT.search(str(msg))
        if m:
            v = int(m.group(1) or m.group(2))
            best = v if best is None else max(best, v)
    return best


WAIT_KINDS = ("watchdog_timeout", "collective_timeout", "watchdog_status", "store_error")


def waits(tables) -> pd.DataFrame:
    """Lines of ranks that were waiting in a collective: timeouts and watchdog reports, less teardown noise and less
    status lines whose own counters show nothing pending (a rank that only dumps because another timed out)."""
    w = ev(tables, WAIT_KINDS)
    if w.empty:
        return w

    def waiting(d) -> bool:
        if "teardown" in d:
            return False
        enq, done = d.get("last_enqueued"), d.get("last_completed")
        try:
            return not (enq is not None and done is not None and int(done) >= int(enq))
        except (TypeError, ValueError):
            return True
    return w[w["details"].map(lambda d: waiting(d or {}))]

"""Stage 4: where every rank was when the job stopped (the `ranks` table), built once from the tables, before rules.

One row per rank of the world (ranks known only from the world size too). Each fact keeps the evidence row it came
from (`*_at`: "source:line"), so a rule or a reader can go back to the line.
"""
from __future__ import annotations

import pandas as pd

from postmortem.ranks import ends as ends_mod
from postmortem import stacks as stacks_mod
from postmortem.rules.facts import WAIT_KINDS
from postmortem.ranks import last_words

COLUMNS = ["rank", "host", "last_step", "last_step_ts", "last_step_at", "last_ts", "last_activity",
           "last_activity_at", "last_enqueued", "last_started", "last_completed", "last_op", "collective_at", "waiting",
           "stack_class", "stack_where", "stack_in_step", "stack_signature", "stack_at", "first_error", "first_error_ts",
           "first_error_at", "exit", "exit_at", "end", "end_detail", "end_cause", "end_category", "end_at", "end_ts", "files",
           "verdict_role"]

# Column -> (dtype, meaning): the reference for docs/tables.md and the notebook API.
COLUMN_DOCS = {
    "rank": ("Int64", "global rank (every rank of the world, also ranks known only from the world size)"),
    "host": ("object", "host the rank ran on, where a line says"),
    "last_step": ("Int64", "highest training step the rank reported"),
    "last_step_ts": ("datetime64[ns, UTC]", "time of that step line"),
    "last_step_at": ("object", "source:line of that step"),
    "last_ts": ("datetime64[ns, UTC]", "time of the rank's last timestamped line"),
    "last_activity": ("object", "what the rank was doing last: train, eval, sample, checkpoint_save, "
                                "checkpoint_load, data_prep, logging, exiting, collective, unknown (its end stack "
                                "decides when there is one)"),
    "last_activity_at": ("object", "source:line that shows it"),
    "last_enqueued": ("Int64", "last collective the rank enqueued (watchdog / flight-recorder counters)"),
    "last_started": ("Int64", "last collective sequence number the rank was seen in (timed out or started)"),
    "last_completed": ("Int64", "last collective the rank completed"),
    "last_op": ("object", "operation of the rank's last collective record (ALLREDUCE, BROADCAST ...), where known"),
    "collective_at": ("object", "source:line of the last collective record"),
    "waiting": ("bool", "the rank reported a collective timeout or its stack waits in a collective"),
    "stack_class": ("object", "class of its last main-thread stack (collective_wait, data_loading, logging, "
                              "checkpoint_io, compute, sleep_lock, idle, unknown); from dumps or from a "
                              "traceback that shows where it was (Ctrl-C, SIGTERM, cut off, timed out)"),
    "stack_where": ("object", "the frame that decided the class, as `func (file:line)`"),
    "stack_in_step": ("object", "True when the end stack is inside the training step (forward, backward, the "
                                "optimizer step), False when it is elsewhere (saving, evaluation, the end of an "
                                "epoch), null without a stack"),
    "stack_signature": ("object", "the stack's signature (equal for equal stacks)"),
    "stack_at": ("object", "source:line of the stack"),
    "first_error": ("object", "earliest error of the rank (event kind or exception type, and its message)"),
    "first_error_ts": ("datetime64[ns, UTC]", "its time"),
    "first_error_at": ("object", "source:line of it"),
    "exit": ("object", "how the rank ended: `code N` or a signal name (launcher summary, error file, shell)"),
    "exit_at": ("object", "source:line of the exit"),
    "end": ("object", "how the rank ended, the most specific source winning: " + ", ".join(
        f"{k} ({v})" for k, v in ends_mod.END_KINDS.items())),
    "end_detail": ("object", "what ended it: the exception, the signal, the exit code, the collective it waited in"),
    "end_cause": ("object", "root (it ended on its own), consequence (of another rank: timeouts, closed peers, the "
                            "launcher's SIGTERM), normal, or null"),
    "end_category": ("object", "for a rank that ended on its own: the failure category its end says, from the "
                               "message catalog (`category:basis`, basis = family, class, frame or default)"),
    "end_at": ("object", "source:line of the end"),
    "end_ts": ("datetime64[ns, UTC]", "time of the end where a line gives it"),
    "files": ("object", "the rank's own log files (list)"),
    "verdict_role": ("object", "culprit (the verdict names it), affected (the verdict says it failed because of the "
                               "culprits) or null: `a.ranks[a.ranks.verdict_role.eq('culprit')]`"),
}

# What a stack class says the rank was doing.
_STACK_ACTIVITY = {"collective_wait": "collective", "data_loading": "data_prep", "logging": "logging",
                   "checkpoint_io": "checkpoint_save", "compute": "train", "sleep_lock": "unknown",
                   "idle": "unknown", "unknown": "unknown"}
# What an event kind says the rank was doing when it printed it.
_EVENT_ACTIVITY = {"checkpoint_save": "checkpoint_save", "checkpoint_load": "checkpoint_load", "eval_start": "eval",
                   "sample_start": "sample", "wandb": "logging", "exit": "exiting",
                   "teardown": "exiting", "end_marker": "exiting", "watchdog_timeout": "collective",
                   "collective_timeout": "collective", "watchdog_status": "collective", "store_error": "collective"}
_STEP_ACTIVITY = {"train": "train", "eval": "eval", "sample": "sample", "data": "data_prep"}
ERROR_KINDS = ("oom", "host_oom", "killed", "dataloader", "checkpoint_error", "enospc", "nccl_error", "nccl_warn",
               "gpu_hw", "cuda_error", "nan", "ddp_error", "collective_mismatch", "error", "fatal_signal",
               "collective_error") + WAIT_KINDS
_SIGNAL_NAMES = {"9": "SIGKILL", "15": "SIGTERM", "6": "SIGABRT", "11": "SIGSEGV", "7": "SIGBUS", "2": "SIGINT"}


def _null(v) -> bool:
    """pd.isna for one scalar of the tables (None, pd.NA, NaT, NaN), without pandas' dispatch per value."""
    return v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and v != v)


def _at(source, line) -> str | None:
    if source is None or (isinstance(source, float) and source != source):
        return None
    return f"{source}:{int(line)}" if not _null(line) else str(source)


def _ts(v):
    if type(v) is pd.Timestamp and v.tzinfo is not None:  # what every ts column holds: already a valid UTC time
        return v
    if v is None or (not isinstance(v, pd.Timestamp) and pd.isna(v)):
        return None
    try:
        t = pd.Timestamp(v)
        if t.tzinfo is None:
            t = t.tz_localize("UTC")
        t.timestamp()
    except (ValueError, TypeError, OverflowError):  # hostile or out-of-range stamps are no time
        return None
    return t


def _position(source, line, ts) -> tuple:
    """Sort key of an evidence row: its time when known, else its place in its file (untimed sorts last)."""
    t = _ts(ts)
    return (0, t.timestamp()) if t is not None else (1, str(source), int(line) if not _null(line) else 0)


def _ranked(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["rank"].notna()] if len(df) else df


def _last_by_position(df: pd.DataFrame) -> pd.DataFrame:
    """The last row of each rank in file order (one sort for all ranks, not one per rank)."""
    return df.sort_values(["source", "line"]).groupby("rank").tail(1)


def world(tables) -> list[int]:
    """Every rank of the job: 0..world_size-1 when the size is known (and sane), plus every rank seen."""
    ws = tables.meta.get("world_size")
    ranks = set(int(r) for r in tables.meta.get("ranks_seen", []))
    if ws and ws <= 65_536:
        ranks |= set(range(int(ws)))
    return sorted(ranks)


def _exit_of(details: dict, kind: str, message: str) -> str | None:
    """An exit as 'code N' / 'SIGNAME' from a launcher summary, error file or shell line."""
    if kind == "killed":
        return "SIGKILL"
    if kind == "fatal_signal":
        return details.get("signame") or "signal"
    sig = details.get("signal")
    if sig:
        return str(sig)
    if str(details.get("mpi_signal") or "").isdigit():  # mpirun: "exited on signal N (name)"
        return _SIGNAL_NAMES.get(str(details["mpi_signal"]), f"signal {details['mpi_signal']}")
    for key in ("exitcode", "code", "code2", "code3", "code4", "code5", "code6"):
        v = details.get(key)
        if v is not None and str(v) not in ("", "None"):
            v = str(v)
            if v.startswith("-") and v[1:] in _SIGNAL_NAMES:
                return _SIGNAL_NAMES[v[1:]]
            return f"code {v}"
    return None


def rank_state(tables) -> pd.DataFrame:
    """The `ranks` table: one row per rank with its last step, last activity, collective counters, end stack,
    first error and exit, each with the evidence it came from."""
    rows = {r: {"rank": r} for r in world(tables)}

    def row(r):
        return rows.setdefault(int(r), {"rank": int(r)})

    # Every step below is a few whole-table pandas calls and a loop over plain values: pandas calls per rank
    # cost milliseconds each, seconds on a job of thousands of ranks.
    _files(tables, row)
    _host_and_last_ts(tables, row)
    st = _ranked(tables.steps)
    st = st[st["step"].notna()] if len(st) else st
    ev = _ranked(tables.events)
    _last_step(st, row)
    _last_activity(st, ev, row)
    _collectives(_ranked(tables.collectives), ev, row)
    _end_stack(_ranked(tables.stacks), row, {r: rr.get("waiting") for r, rr in rows.items()})
    _first_error(ev, _ranked(tables.tracebacks), row)
    _exits(tables.events, row)
    ends_mod.fill_ends(tables, rows, row)
    last_words.apply(tables, rows)  # a rank that logged why it stops and left: its own words are its end

    out = pd.DataFrame([rows[r] for r in sorted(rows)], columns=COLUMNS)
    for col, (dtype, _) in COLUMN_DOCS.items():  # the documented dtypes, whatever pandas would infer
        if dtype == "Int64":
            out[col] = out[col].astype("Int64")
        elif dtype.startswith("datetime64"):
            out[col] = pd.to_datetime(out[col], utc=True)
        elif dtype == "object":
            out[col] = out[col].astype(object).where(out[col].notna(), None)
    out["waiting"] = out["waiting"].map(lambda v: v is True)
    return out


def _files(tables, row) -> None:
    """A rank's own log files."""
    src = tables.sources
    for r, s in zip(src["rank"].tolist(), src["source"].tolist()):
        if not _null(r):
            row(r).setdefault("files", []).append(s)


def _host_and_last_ts(tables, row) -> None:
    """Host and last timestamp from every attributed row."""
    for name in ("events", "steps", "tracebacks", "stacks"):
        df = _ranked(tables[name])
        if df.empty:
            continue
        hosts = df[df["host"].notna()]
        if len(hosts):
            for r, h in hosts.groupby("rank")["host"].first().items():  # the first host a rank's lines name
                row(r).setdefault("host", h)
        if df["ts"].notna().any():
            for r, t in df.groupby("rank")["ts"].max().items():
                t = _ts(t)
                cur = row(r).get("last_ts")
                if t is not None and (cur is None or t > cur):
                    row(r)["last_ts"] = t


def _last_step(st: pd.DataFrame, row) -> None:
    """The highest training step of each rank (its first line when repeated)."""
    train = st[st["phase"] == "train"] if len(st) else st
    if not len(train):
        return
    idx = train.groupby("rank")["step"].idxmax()
    best = train.loc[idx.tolist()]
    for r, step, ts, source, line in zip(idx.index, best["step"].tolist(), best["ts"].tolist(),
                                         best["source"].tolist(), best["line"].tolist()):
        row(r).update(last_step=int(step), last_step_ts=_ts(ts), last_step_at=_at(source, line))


def _last_activity(st: pd.DataFrame, ev: pd.DataFrame, row) -> None:
    """The latest of progress rows and activity events, by file position (time when known)."""
    acts: list[tuple] = []
    if len(st):
        for rec in _last_by_position(st).itertuples(index=False):
            acts.append((int(rec.rank), rec.source, rec.line, rec.ts, _STEP_ACTIVITY.get(rec.phase, "train")))
    if len(ev):
        act_ev = ev[ev["kind"].isin(list(_EVENT_ACTIVITY))]
        for rec in _last_by_position(act_ev).itertuples(index=False):
            acts.append((int(rec.rank), rec.source, rec.line, rec.ts, _EVENT_ACTIVITY[rec.kind]))
    best: dict[int, tuple] = {}
    for r, source, line, ts, act in acts:
        key = _position(source, line, ts)
        if r not in best or key > best[r][0]:
            best[r] = (key, act, _at(source, line))
    for r, (_, act, at) in best.items():
        row(r).update(last_activity=act, last_activity_at=at)


def _collectives(coll: pd.DataFrame, ev: pd.DataFrame, row) -> None:
    """Collective counters per rank (watchdog/FR), and whether the rank reported waiting."""
    if len(coll):
        highest = coll.groupby("rank")[["last_enqueued", "last_completed", "seq"]].max()
        for col, name in (("last_enqueued", "last_enqueued"), ("last_completed", "last_completed"),
                          ("seq", "last_started")):
            for r, v in highest[col].dropna().items():
                row(r)[name] = int(v)
        last = _last_by_position(coll)
        for r, source, line, op in zip(last["rank"].tolist(), last["source"].tolist(), last["line"].tolist(),
                                       last["op"].tolist()):
            row(r)["collective_at"] = _at(source, line)
            if not _null(op):
                row(r)["last_op"] = str(op)
    if len(ev):
        for r in ev[ev["kind"].isin(WAIT_KINDS)]["rank"].unique():
            row(r)["waiting"] = True


def _end_stack(stk: pd.DataFrame, row, rows_waiting: dict | None = None) -> None:
    """The latest main-thread stack per rank (dumps, or a traceback that shows where the rank was)."""
    if not len(stk):
        return
    stk = stk[~stk["frames"].map(stacks_mod.is_launcher)]
    main = stk[(stk["thread_name"] == "MainThread") | stk["thread_name"].isna()]
    main = main if len(main) else stk
    waited = {int(r) for r, w in (rows_waiting or {}).items() if w}
    last = _last_by_position(main)
    others_wait = any(stacks_mod.classify_frames(fr) == "collective_wait" for fr in last["frames"])
    for rec in last.itertuples(index=False):
        cls = stacks_mod.classify_thread(rec.frames, rec.active)
        if cls == "compute" and (others_wait or int(rec.rank) in waited) and \
                stacks_mod.waits_inside_backward(rec.frames):
            # DDP's gradient all-reduce waits inside backward: a rank there while others wait in collectives, or
            # that reported the timeout itself, is waiting too (py-spy shows no frame below backward)
            cls = "collective_wait"
        uf = stacks_mod.blocking_frame(rec.frames) or stacks_mod.last_user_frame(rec.frames) or {}
        rr = row(rec.rank)
        rr.update(stack_class=cls, stack_signature=rec.signature, stack_at=_at(rec.source, rec.line),
                  stack_where=_where(uf) if uf else None, stack_in_step=stacks_mod.in_training_step(rec.frames))
        if cls == "collective_wait":
            rr["waiting"] = True
        act = _STACK_ACTIVITY.get(cls, "unknown")
        if act != "unknown" or "last_activity" not in rr:
            rr.update(last_activity=act, last_activity_at=_at(rec.source, rec.line))


def _first_error(ev: pd.DataFrame, tb: pd.DataFrame, row) -> None:
    """The earliest error event or exception of each rank."""
    errs = []
    if len(ev):
        e = ev[ev["kind"].isin(ERROR_KINDS)]
        for rec in e.itertuples(index=False):
            errs.append((int(rec.rank), rec.source, rec.line, rec.ts, f"{rec.kind}: {str(rec.message)[:200]}"))
    for rec in tb.itertuples(index=False):
        errs.append((int(rec.rank), rec.source, rec.line, rec.ts, f"{rec.exc_type}: {str(rec.exc_message)[:200]}"))
    first: dict[int, tuple] = {}
    for r, source, line, ts, text in errs:
        key = _position(source, line, ts)
        if r not in first or key < first[r][0]:
            first[r] = (key, text, _ts(ts), source, line)
    for r, (_, text, t, source, line) in first.items():
        row(r).update(first_error=text, first_error_ts=t, first_error_at=_at(source, line))


def _exits(allev: pd.DataFrame, row) -> None:
    """Exits from launcher summaries, error files, shell lines."""
    if not len(allev):
        return
    ex = allev[allev["kind"].isin(["torchrun_failure", "exit", "killed", "fatal_signal"])]
    for rec in ex.itertuples(index=False):
        code = _exit_of(rec.details or {}, rec.kind, str(rec.message))
        r = rec.rank if not _null(rec.rank) else (rec.details or {}).get("task")  # srun names the task
        if r is None or (not isinstance(r, (int, str)) and pd.isna(r)) or not str(r).isdigit():
            continue
        rr = row(int(r))
        if code and ("exit" not in rr or rr["exit"] == "code 0"):
            rr.update(exit=code, exit_at=_at(rec.source, rec.line))


def _where(frame: dict) -> str:
    """`func (file:line)` of a Python frame; a native frame (or one without a line) by its name alone."""
    if frame.get("native") or frame.get("line") is None:
        return str(frame.get("func"))
    return f"{frame.get('func')} ({stacks_mod.short_file(frame.get('file'))}:{frame.get('line')})"

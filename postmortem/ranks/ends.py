"""How every rank ended (the `end*` columns of the `ranks` table), and which ends are another rank's consequence.

A rank's end is read from every source that speaks of it and the most specific one wins: an exception it raised,
a fatal signal (faulthandler, the shell, the launcher's exit code), a kill from outside, an exit code, an
end-of-training marker, a collective it was waiting in (timeouts, closed peers, stacks), work it was busy with.
Whether an end is a *consequence* is decided by its class (timeouts, closed/reset by peer, the launcher's SIGTERM,
launcher summaries), never by one job's wording: that is what lets the culprit stage compare ends across ranks.
"""
from __future__ import annotations

import re

import pandas as pd

from postmortem.parsers.linear_regex import compile_search

# The ends, from the rank's own point of view.
END_KINDS = {
    "exception": "raised an exception",
    "fatal_signal": "died of a fatal signal",
    "killed": "was killed (SIGKILL)",
    "left": "exited with an error code and no message",
    "exited": "exited normally",
    "lost_peer": "lost a peer (connection closed or reset) in a collective",
    "waiting": "was waiting in a collective",
    "terminated": "was stopped by the launcher or the user",
    "busy": "was busy outside collectives",
    "running": "was still running (no end recorded)",
}
# Ends a rank comes to on its own (a cause) versus ends it comes to because of another rank (a consequence).
ROOT_ENDS = ("exception", "fatal_signal", "killed", "left")
CONSEQUENCE_ENDS = ("lost_peer", "waiting", "terminated")
IN_COLLECTIVE_ENDS = ("lost_peer", "waiting")

# Exception classes that report another rank's failure or an outside stop, not a cause of their own.
_STOP_EXC = re.compile(r"(?i)KeyboardInterrupt|SignalException|SystemExit|ChildFailedError|ProcessExitedException")
# searched in time linear in the message (its `ProcessGroup.*aborted` from every `ProcessGroup` was not)
_PEER_GONE = compile_search(
    r"(?i)Connection closed by|Connection reset by peer|Broken pipe|pair closure|remote process exited|"
    r"ncclRemoteError|recvValue failed|sendBytes failed|Connection refused|peer(?: process)? (?:has )?(?:exited|closed)|"
    r"NCCL communicator was aborted|ProcessGroup.*aborted", 0, re.compile)
_WAIT_MSG = re.compile(
    r"(?i)timed? ?out|timeout|Watchdog caught|store->get|wait timeout|Socket Timeout|didn't join collective|"
    r"failed to pass monitoredBarrier|Detected mismatch between collectives")
_WAIT_EXC = re.compile(r"(?i)Timeout|DistBackendError|DistStoreError")
_FATAL_NAMES = {"11": "SIGSEGV", "6": "SIGABRT", "7": "SIGBUS", "4": "SIGILL", "8": "SIGFPE",
                "SIGSEGV": "SIGSEGV", "SIGABRT": "SIGABRT", "SIGBUS": "SIGBUS", "SIGILL": "SIGILL", "SIGFPE": "SIGFPE"}
_FATAL_WORDS = {"segmentation fault": "SIGSEGV", "bus error": "SIGBUS", "aborted": "SIGABRT",
                "floating point exception": "SIGFPE", "illegal instruction": "SIGILL"}
# Event kinds that are a rank's own failure when it printed them (not a report about a peer).
ROOT_EVENT_KINDS = ("oom", "host_oom", "dataloader", "checkpoint_error", "enospc", "gpu_hw", "cuda_error", "nan",
                    "ddp_error", "error", "nccl_error")
WAIT_EVENT_KINDS = ("watchdog_timeout", "collective_timeout", "watchdog_status", "store_error")


_CONSEQUENCE_END = {"peer_gone": "lost_peer", "waiting_in_collective": "waiting", "store_wait": "waiting",
                    "launcher_terminated": "terminated", "launcher_summary": "terminated"}


def exception_role(exc_type, exc_message, frames=None) -> str:
    """`lost_peer`, `waiting`, `terminated` (consequences), `handled` (benign) or `root` for one exception, by its
    class and message family in the catalog (postmortem.catalog); wording the catalog does not know falls back to
    the classes of words here."""
    return classify(exc_type, exc_message, frames)[0]


def classify(exc_type, exc_message, frames=None) -> tuple[str, str, str]:
    """(role as in exception_role, category, basis) of one exception; basis: family, class, frame or default."""
    from postmortem import catalog
    t, m = str(exc_type or ""), str(exc_message or "")[:600]
    if t == "<truncated>":
        return "terminated", "rank_crash", "class"
    info = catalog.classify_exception(t, m, frames)
    if info.role == "consequence":
        end = next((_CONSEQUENCE_END[i] for i in info.implies if i in _CONSEQUENCE_END), "waiting")
        return end, info.category, info.basis
    if info.role == "benign":
        return "handled", info.category, info.basis
    if info.basis == "default":  # an ordinary exception: words of a consequence the catalog has no family for
        if _PEER_GONE.search(m):
            return "lost_peer", "nccl_error", "default"
        if _WAIT_EXC.search(t) or _WAIT_MSG.search(m):
            return "waiting", "collective_timeout", "default"
        if _STOP_EXC.search(t) or re.search(r"(?i)got signal|SIGTERM|Terminated", m):
            return "terminated", "rank_crash", "default"
    return "root", info.category, info.basis


def fatal_signal_name(details: dict | None, message: str = "") -> str | None:
    """SIGSEGV/SIGABRT/SIGBUS/SIGILL/SIGFPE named by an exit code, a signal field or the message."""
    d = details or {}
    for key in ("signal", "sig", "sig2", "signame", "fatal", "ucxname", "ucx"):
        v = str(d.get(key) or "").strip()
        if v in _FATAL_NAMES:
            return _FATAL_NAMES[v]
        low = v.lower()
        for word, name in _FATAL_WORDS.items():
            if word in low:
                return name
    for key in ("exitcode", "code", "code2", "code3", "code4", "code5"):
        v = str(d.get(key) if d.get(key) is not None else "")
        if v.startswith("-") and v[1:] in _FATAL_NAMES:
            return _FATAL_NAMES[v[1:]]
        if v in _FATAL_NAMES and not v.isdigit():  # `terminated with signal SIGABRT`
            return _FATAL_NAMES[v]
    low = message.lower()
    for word, name in _FATAL_WORDS.items():
        if word in low and "fatal python error" in low:
            return name
    return None


def exit_code(details: dict | None) -> int | None:
    """The numeric exit code an exit/launcher event states (negative: killed by that signal)."""
    d = details or {}
    if str(d.get("mpi_signal") or "").isdigit():  # mpirun: "exited on signal N"
        return -int(d["mpi_signal"])
    for key in ("exitcode", "code", "code2", "code3", "code4", "code5", "code6"):
        v = d.get(key)
        if v is None:
            continue
        try:
            return int(str(v).strip())
        except ValueError:
            continue
    sig = str(d.get("signal") or d.get("code4") or "")
    if sig in ("SIGKILL",):
        return -9
    if sig in ("SIGTERM",):
        return -15
    return None


# Priority of the ends when a rank shows several: the most specific wins (an exception over the exit code it caused,
# a stack over the launcher's SIGTERM that followed it).
_PRIORITY = ("exception", "fatal_signal", "killed", "lost_peer", "waiting", "left", "exited", "busy", "terminated",
             "running")
_BUSY_STACKS = ("compute", "data_loading", "logging", "checkpoint_io", "sleep_lock")


def _null(v) -> bool:
    return v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and v != v)


def _at(source, line) -> str | None:
    if _null(source):
        return None
    return f"{source}:{int(line)}" if not _null(line) else str(source)


def _time(v):
    if _null(v):
        return None
    try:
        t = pd.Timestamp(v)
        return t if t.tzinfo is not None else t.tz_localize("UTC")
    except (ValueError, TypeError, OverflowError):
        return None


class _Ends:
    """Candidate ends per rank; the one of highest priority (earliest among equals) becomes the rank's end."""

    def __init__(self):
        self.cands: dict[int, list[tuple]] = {}

    def add(self, rank, end: str, detail: str, source, line, ts, category: str | None = None) -> None:
        if _null(rank):
            return
        when = _time(ts)
        pos = (0, when.value) if when is not None else (1, int(line) if not _null(line) else 0)
        self.cands.setdefault(int(rank), []).append((_PRIORITY.index(end), pos, end, detail[:300],
                                                     _at(source, line), when, category))

    def best(self, rank: int):
        c = self.cands.get(rank)
        return min(c) if c else None


def fill_ends(tables, rows: dict, row) -> None:
    """Add `end`, `end_detail`, `end_cause`, `end_at`, `end_ts` to every rank's row (rank_state's dict of rows)."""
    ends = _Ends()
    goes = goes_on(tables)
    tb = tables.tracebacks
    if len(tb):
        from postmortem.stacks.frames import in_thread
        handled = handled_tracebacks(tables)
        tb = tb[tb["rank"].notna()]
        handled = [h for h, r in zip(handled, tables.tracebacks["rank"].tolist()) if not _null(r)]
        for rec, was_handled in zip(tb.itertuples(index=False), handled):
            if str(rec.exc_type).endswith("Warning") or in_thread(rec.frames):
                continue  # (an exception in a thread other than the main one ends that thread, not the process)
            role, category, basis = classify(rec.exc_type, rec.exc_message, rec.frames)
            if role == "handled" or was_handled:
                continue  # (the rank went on training after it: whatever it reported, it was not its end)
            end = "exception" if role == "root" else role
            ends.add(rec.rank, end, f"{rec.exc_type}: {str(rec.exc_message)[:200]}", rec.source,
                     rec.end_line if not _null(rec.end_line) else rec.line, rec.ts,
                     f"{category}:{basis}" if role == "root" else None)
    _event_ends(tables, ends, goes)
    for r, rr in rows.items():
        cls = rr.get("stack_class")
        if cls == "collective_wait":
            ends.add(r, "waiting", f"stack in a collective: {rr.get('stack_where') or ''}".rstrip(": "),
                     *_split_at(rr.get("stack_at")), None)
        elif cls in _BUSY_STACKS:
            ends.add(r, "busy", f"{cls.replace('_', ' ')}: {rr.get('stack_where') or ''}".rstrip(": "),
                     *_split_at(rr.get("stack_at")), None)
    _inferred_exits(tables, rows, ends)
    ll = tables.frames.get("last_lines")
    printed = set(int(r) for r in ll["rank"].dropna().unique()) if ll is not None and len(ll) else set()
    for r, rr in rows.items():
        b = ends.best(r)
        if b is None:
            if rr.get("files") or rr.get("last_activity") or rr.get("last_step") is not None or r in printed:
                rr.update(end="running", end_cause=None)  # it printed something, and nothing says how it ended
            continue
        if b[2] == "fatal_signal" and "SIGABRT" in b[3]:
            # ProcessGroupNCCL's watchdog takes the process down with std::abort after a timeout or a peer's
            # failure ('To avoid data inconsistency, we are taking the entire process down'): that SIGABRT is
            # the wait's end, not a crash of its own.
            waited = [c for c in ends.cands[r] if c[2] in ("waiting", "lost_peer")]
            b = min(waited) if waited else b
        _, _, end, detail, at, ts, category = b
        cause = "root" if end in ROOT_ENDS else "normal" if end == "exited" else \
            "consequence" if end in CONSEQUENCE_ENDS else None
        if category is None and end == "exception":
            category = _event_category(detail)
        rr.update(end=end, end_detail=detail, end_cause=cause, end_at=at, end_ts=ts, end_category=category)


def _event_category(detail: str) -> str | None:
    """The catalog's category of an error line that ended a rank (no traceback: a bare OOM, a C++ abort)."""
    from postmortem import catalog
    fam = catalog.family_of(detail.split(": ", 1)[-1])
    if fam is None:  # a library's own message, labelled from where it is raised (catalog/derive.py)
        der = catalog.derived_label(detail.split(": ", 1)[-1])
        return f"{der.category}:derived" if der is not None and der.role == "root" else None
    return f"{fam.category}:family" if fam.role == "root" else None


def _split_at(at) -> tuple:
    if not at:
        return None, None
    src, _, line = str(at).rpartition(":")
    return (src, int(line)) if line.isdigit() else (str(at), None)


def _event_ends(tables, ends: _Ends, goes: "_GoesOn") -> None:
    """Ends stated by event lines: signals, kills, exits, launcher summaries, timeouts, closed peers, own errors."""
    ev = tables.events
    if not len(ev):
        return
    pid_rank, one_launcher = _launcher_ranks(ev)
    wanted = ev[ev["kind"].isin(("fatal_signal", "killed", "exit", "torchrun_failure", "end_marker", "collective_error",
                                 "signal", "host_oom") + WAIT_EVENT_KINDS + ROOT_EVENT_KINDS)]
    for rec in wanted.itertuples(index=False):
        d = rec.details or {}
        msg = str(rec.message)
        rank = rec.rank
        if _null(rank):
            rank = d.get("rank") if isinstance(d.get("rank"), int) else None
        if _null(rank) and rec.kind == "exit":
            rank = _exit_rank(d, pid_rank, one_launcher)
        if _null(rank):
            continue
        k = rec.kind
        if k == "fatal_signal":
            ends.add(rank, "fatal_signal", fatal_signal_name(d, msg) or msg, rec.source, rec.line, rec.ts)
        elif k == "killed":
            ends.add(rank, "killed", msg, rec.source, rec.line, rec.ts)
        elif k == "host_oom":
            if d.get("pid") or d.get("kpid") or d.get("scope"):
                continue  # a kernel line about some pid: joined to a rank through the launcher's exit codes
            if not goes.went_on(rank, rec.source, rec.line):  # an allocation refused and retried smaller: handled
                ends.add(rank, "exception", f"memory refused: {msg}", rec.source, rec.line, rec.ts)
        elif k in ("exit", "torchrun_failure"):
            _exit_end(ends, rank, d, msg, rec)
        elif k == "end_marker":
            ends.add(rank, "exited", f"end of training: {msg}", rec.source, rec.line, rec.ts)
        elif k == "collective_error":
            ends.add(rank, "lost_peer", msg, rec.source, rec.line, rec.ts)
        elif k in WAIT_EVENT_KINDS:
            if "teardown" in d:
                continue
            ends.add(rank, "waiting", msg, rec.source, rec.line, rec.ts)
        elif k == "signal":
            if d.get("recv") or d.get("got") or d.get("recv_name") or d.get("victim"):
                ends.add(rank, "terminated", msg, rec.source, rec.line, rec.ts)
        elif k in ROOT_EVENT_KINDS:
            if k == "nccl_error" and _PEER_GONE.search(msg):
                ends.add(rank, "lost_peer", msg, rec.source, rec.line, rec.ts)
            elif k != "error" or d.get("cpp_type") or d.get("check"):
                if exception_role("", msg) == "root" and not goes.went_on(rank, rec.source, rec.line):
                    ends.add(rank, "exception", f"{k}: {msg}", rec.source, rec.line, rec.ts)


def _launcher_ranks(ev: pd.DataFrame) -> tuple[dict, bool]:
    """pid -> global rank from torchrun's failure summaries, and whether one launcher (one node's agent) wrote every
    launcher line (then a local rank is the global rank)."""
    summ = ev[ev["kind"] == "torchrun_failure"]
    pid_rank = {}
    for d in summ["details"].tolist():
        d = d or {}
        if d.get("pid") is not None and isinstance(d.get("rank"), int):
            pid_rank[int(d["pid"])] = d["rank"]
    agents = ev[ev["kind"].isin(["torchrun_failure", "exit", "torchrun_summary"])]
    return pid_rank, agents["source"].nunique() <= 1


def _exit_rank(d: dict, pid_rank: dict, one_launcher: bool):
    """The global rank of an exit line: srun's task, the pid a summary names, or (one launcher) the local rank."""
    task = d.get("task")
    if task is not None and str(task).isdigit():
        return int(task)
    for key in ("pid", "pid2"):
        try:
            pid = int(d.get(key)) if d.get(key) is not None else None
        except (TypeError, ValueError):
            pid = None
        if pid is not None and pid in pid_rank:
            return pid_rank[pid]
    # torchrun's agent names the local rank, mp.spawn the process index: with one launcher, the global rank
    local = d.get("local_rank", d.get("proc"))
    if local is not None and str(local).isdigit() and one_launcher:
        return int(local)
    return None


def _exit_end(ends: _Ends, rank, d: dict, msg: str, rec) -> None:
    fatal = fatal_signal_name(d, msg)
    code = exit_code(d)
    sig = str(d.get("signal") or "")
    if fatal:
        ends.add(rank, "fatal_signal", f"exit: {fatal}", rec.source, rec.line, rec.ts)
    elif code == -9 or sig == "SIGKILL":
        ends.add(rank, "killed", "exit: SIGKILL", rec.source, rec.line, rec.ts)
    elif code in (-15, -2, -1) or sig in ("SIGTERM", "SIGINT", "SIGHUP"):
        ends.add(rank, "terminated", f"exit: {sig or code}", rec.source, rec.line, rec.ts)
    elif code == 0:
        ends.add(rank, "exited", "exit code 0", rec.source, rec.line, rec.ts)
    elif code is not None:
        ends.add(rank, "left", f"exit code {code}", rec.source, rec.line, rec.ts)
    elif d.get("format") == "mpirun-first-nonzero":  # mpirun names the first process to exit non-zero
        ends.add(rank, "left", "exit code non-zero (mpirun: the first process to do so)", rec.source, rec.line,
                 rec.ts)
    elif d.get("format") == "ray-worker-died":  # Ray Train: this rank's worker process died (health check failed)
        ends.add(rank, "left", "the worker process died (Ray Train: worker health check failed)", rec.source,
                 rec.line, rec.ts)


def _inferred_exits(tables, rows: dict, ends: _Ends) -> None:
    """torchrun lists the ranks that failed and no others: with one launcher for the whole job, a rank it does not
    list exited normally."""
    ev = tables.events
    if not len(ev):
        return
    listed = ev[ev["kind"] == "torchrun_failure"]
    if listed.empty or not _launcher_ranks(ev)[1]:
        return
    named = set()
    for rank, d in zip(listed["rank"].tolist(), listed["details"].tolist()):
        r = rank if not _null(rank) else (d or {}).get("rank")
        if r is not None and not _null(r):
            named.add(int(r))
    first = listed.iloc[0]
    for r, rr in rows.items():
        if r in named:
            continue
        if rr.get("files") or rr.get("last_activity") or rr.get("last_step") is not None:
            ends.add(r, "exited", "not in the launcher's list of failed ranks (exited normally)", first["source"],
                     first["line"], None)


UNRANKED_GOES_ON = 3  # later step reports a rank-less stream needs after an exception to have gone on


# reports of a rank that torchrun's tee can show after its traceback though written before it (one tail batch)
TEE_HELD_BEHIND = 3


def goes_on(tables) -> "_GoesOn":
    """_GoesOn(tables), built once per steps and events tables (the rank state and three rules ask it)."""
    cached = getattr(tables, "_goes_on_for", None)
    if cached is not None and cached[0] is tables.steps and cached[1] is tables.events:
        return cached[2]
    goes = _GoesOn(tables)
    try:
        tables._goes_on_for = (tables.steps, tables.events, goes)
    except AttributeError:
        pass
    return goes


class _GoesOn:
    """Where each output stream (a file, and the rank of its lines) went on after a line: later training steps or
    an end-of-training marker in the same stream, or a zero exit of its rank."""

    def __init__(self, tables):
        import bisect
        self._bisect = bisect.bisect_right
        self.after: dict = {}
        st = tables.steps
        if len(st):
            s = st[st["step"].notna() & (st["phase"] == "train")]
            for r, src, ln in zip(s["rank"].tolist(), s["source"].tolist(), s["line"].tolist()):
                self.after.setdefault((_rank_key(r), src), []).append(int(ln))
        ev = tables.events
        self.exited_ok: set = set()
        if len(ev):
            ends = ev[ev["kind"] == "end_marker"]
            for r, src, ln in zip(ends["rank"].tolist(), ends["source"].tolist(), ends["line"].tolist()):
                if not _null(ln):
                    self.after.setdefault((_rank_key(r), src), []).append(int(ln))
            pid_rank, one = _launcher_ranks(ev)
            ex = ev[ev["kind"].isin(["exit", "torchrun_failure"])]
            for r, d in zip(ex["rank"].tolist(), ex["details"].tolist()):
                d = d or {}
                rank = r if not _null(r) else (d.get("rank") if isinstance(d.get("rank"), int) else
                                               _exit_rank(d, pid_rank, one))
                if rank is not None and not _null(rank) and exit_code(d) == 0:
                    self.exited_ok.add(int(rank))
        self.ranked_by_source: dict = {}  # source -> the sorted line lists of its ranked streams
        for (r, src), v in self.after.items():
            v.sort()
            if r is not None:
                self.ranked_by_source.setdefault(src, []).append(v)
        self.all_normal = _all_normal(tables, self.exited_ok)
        # sources whose lines of one process are not in time order (two pipes merged apart): later lines there do
        # not show that a process went on after a traceback
        self.unordered = dict((getattr(tables, "meta", None) or {}).get("unordered_streams") or {})

    def went_on(self, rank, source, line) -> bool:
        """True when the stream of (rank, source) went on training or ended normally after `line`."""
        if self.all_normal or not _null(rank) and int(rank) in self.exited_ok:
            return True
        if _null(rank) and not _null(line) and self._every_rank_went_on(source, int(line)):
            return True
        lines = self.after.get((_rank_key(rank), source))
        if not lines or _null(line):
            return False
        if source in self.unordered and lines[0] > int(line):
            # every report of the rank came after the traceback: one pipe's batch forwarded behind the other's
            # (Ray's log monitor), not progress after it; progress on both sides of it is. torchrun's tee tails
            # each file every fraction of a second: only a few reports can be held behind a traceback that way,
            # a run that trained on after a handled error prints more
            if not self.unordered[source].startswith("torchrun --tee") or len(lines) < TEE_HELD_BEHIND:
                return False
        # A stream without a rank mixes processes: another rank's last few reports can follow a crash, so it went
        # on only when several more came (one process printing on).
        need = 1 if not _null(rank) else UNRANKED_GOES_ON
        return self._bisect(lines, int(line)) <= len(lines) - need


    def _every_rank_went_on(self, source, line: int) -> bool:
        """A line without a rank in a file where ranks report progress: whichever of them printed it, every rank
        of that file trained on (or ended normally) after it, with several reports in all."""
        ranked = self.ranked_by_source.get(source)
        if not ranked or any(v[-1] <= line for v in ranked):
            return False
        return sum(len(v) - self._bisect(v, line) for v in ranked) >= UNRANKED_GOES_ON


def _all_normal(tables, exited_ok: set) -> bool:
    """The job exited 0 (the collector's manifest, a launcher's job-level exit) or every rank that reported
    progress exited 0, and nothing says a process failed (a non-zero exit, a kill, a fatal signal, a launcher
    failure): then every exception the job printed was handled. End-of-training markers alone do not say it (a
    rank can print one and crash in its final save)."""
    ev = tables.events
    if ev.empty:
        return False
    if ev["kind"].isin(["torchrun_failure", "killed", "fatal_signal", "torchrun_summary"]).any():
        return False
    ex = ev[ev["kind"] == "exit"]
    codes = [exit_code(d) for d in ex["details"].tolist()]
    if not codes or any(c not in (0, None) for c in codes):
        return False
    job_level = any(c == 0 and _null(r) and (d or {}).get("local_rank") is None and (d or {}).get("task") is None
                    for c, r, d in zip(codes, ex["rank"].tolist(), ex["details"].tolist()))
    if job_level:
        return True
    st = tables.steps
    progressed = {int(r) for r in st["rank"].dropna().unique().tolist()} if len(st) else set()
    return bool(progressed) and progressed <= exited_ok


def _rank_key(r):
    return None if _null(r) else int(r)


def handled_tracebacks(tables) -> list[bool]:
    """For each row of `tables.tracebacks`: whether the program went on after it (more training steps or an
    end-of-training marker in the same stream, or a zero exit of its rank): a handled exception, never a cause."""
    tb = tables.tracebacks
    if tb.empty:
        return []
    ranks = (getattr(tables, "frames", None) or {}).get("ranks")  # (the rank states, once they are known)
    cached = getattr(tables, "_handled", None)
    if cached is not None and cached[0] is tb and cached[2] is ranks:
        return cached[1]
    goes = goes_on(tables)
    out = [goes.went_on(r, s, e if not _null(e) else ln) for r, s, ln, e in
           zip(tb["rank"].tolist(), tb["source"].tolist(), tb["line"].tolist(), tb["end_line"].tolist())]
    if not all(out) and _every_rank_finished_alike(tables):
        # a library's own exception in a log of its own (wandb's debug.log: a background thread's callback failing
        # at shutdown) that no rank felt: every rank trained to the same last step and none ended badly
        st = tables.steps
        stepped = set(st.loc[st["phase"] == "train", "source"].unique()) if len(st) else set()  # (not a loading bar)
        out = [h or (_null(r) and s not in stepped and _library_only(fr))
               for h, r, s, fr in zip(out, tb["rank"].tolist(), tb["source"].tolist(), tb["frames"].tolist())]
    try:
        tables._handled = (tb, out, ranks)
    except AttributeError:
        pass
    return out


_LIBRARY_FILE = compile_search(r"site-packages/|dist-packages/|/lib/python3\.\d+/|<frozen ")


def _library_only(frames) -> bool:
    """Every frame of a traceback is in an installed package or the standard library: no code of the job's own."""
    files = [str(f.get("file") or "") for f in frames or [] if not f.get("native")]
    return bool(files) and all(_LIBRARY_FILE.search(f) for f in files)


def _every_rank_finished_alike(tables) -> bool:
    """Every rank of the ranks table reported training steps, all to the same last step, and none ended badly (an
    exception, a signal, a kill, an error exit, a timeout, a lost peer, the launcher's stop)."""
    ranks = (getattr(tables, "frames", None) or {}).get("ranks")  # (none yet while the tables are assembled)
    if ranks is None or ranks.empty or "last_step" not in ranks.columns or "end" not in ranks.columns:
        return False
    last = ranks["last_step"]
    if last.isna().any() or last.nunique() != 1:
        return False
    return bool(ranks["end"].isin(["running", "exited"]).all())

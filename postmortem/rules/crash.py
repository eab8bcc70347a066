"""Rules for ordinary crashes and bare timeouts: the earliest non-cascade exception; timeouts nothing explains."""
from __future__ import annotations

import bisect
import re

import pandas as pd

from postmortem.verdict.findings import Finding
from postmortem.verdict.sentences import clip, ranks_phrase
from postmortem.rules import facts, rule


@rule(id="first-exception", title="A rank raised an exception first", category="rank_crash", severity="error",
      description="The earliest Python exception that is not a consequence of another rank (timeouts, closed "
                  "peers and launcher summaries are cascades) is the root candidate for its rank.",
      remediation="Fix the exception shown on the culprit rank; the errors on the other ranks follow from it.",
      false_positives=("An exception printed and handled by the program (the job went on).",))
def first_exception(tables):
    tb = facts.root_tracebacks(tables)
    if tb.empty:
        return []
    tb = tb[tb["exc_type"] != "<truncated>"]
    tb = tb[[not owned for owned in _explained(tables, tb)]]
    if tb.empty:
        return []
    tb = tb.assign(_k=facts.order_keys(tb)).sort_values("_k")
    first = tb.iloc[0]
    ranks = facts.ranks_of(tb[tb["exc_type"] == first["exc_type"]])
    culprit = [int(first["rank"])] if not _na(first["rank"]) else []
    others = [r for r in facts.world_ranks(tables) if r not in culprit]
    conf = 0.55 if culprit else 0.45
    thread = facts.in_thread(first["frames"])
    if thread:  # it ended a thread, not the rank: what the rank did without it is the likelier story
        conf = 0.45
    # What the exception says, from the message catalog and the exception taxonomy (its class, the library frame
    # that raised it): a checkpoint path that is missing, host memory refused, a DataLoader worker, DDP misuse ...
    from postmortem import catalog
    info = catalog.classify_exception(str(first["exc_type"]), str(first["exc_message"]), first["frames"])
    category = info.category if info.role == "root" and info.category in _CATALOG_CATEGORIES else "rank_crash"
    if category == "logging_blocking" and not _IO_EXC.search(str(first["exc_type"])):
        category = "rank_crash"  # a logger that raised on bad input crashed the rank; only its I/O failing blocks
    known = f" It is {info.reason[:1].lower()}{info.reason[1:].rstrip('.')}." if category != "rank_crash" else ""
    return [Finding(
        rule="first-exception", category=category, confidence=conf,
        title=f"{first['exc_type']}{' in a thread' if thread else ''} on {ranks_phrase(culprit[:1], none='an unknown rank')}",
        explanation=(f"The earliest exception that is not a timeout or a closed connection is "
                     f"{first['exc_type']}: {clip(str(first['exc_message']), 200)}"
                     + (f" on rank {culprit[0]}" if culprit else "") + "." + known
                     + " Errors on other ranks follow from it."),
        remediation="Fix this exception; rerun with the same seed to confirm.",
        culprit_ranks=culprit, affected_ranks=others if ranks else [], evidence=[facts.tb_evidence(first)],
        order=facts.order_key(first), explains=("collective_timeout", "nccl_error"))]


_IO_EXC = re.compile(r"Connection|Timeout|Comm|HTTP|URL|Socket|Network|SSL|OSError|IOError|Broken|Refused|Reset")
# Categories the catalog can give the first exception (the rest stay a plain crash).
_CATALOG_CATEGORIES = ("host_oom", "gpu_oom", "checkpoint_corruption", "dataloader_failure", "ddp_usage_error",
                       "nan_inf", "logging_blocking", "nccl_error", "gpu_hardware")

SPECIALISED = ("oom", "checkpoint_error", "dataloader", "nccl_error", "nccl_warn", "gpu_hw", "collective_mismatch",
               "ddp_error", "nan", "host_oom", "enospc", "kernel_xid", "kernel_gpu_error")


def _explained(tables, tb) -> list[bool]:
    """For each traceback: whether a specialised rule owns it (an event of its kind sits on the exception's lines,
    or up to 3 lines after). One sorted list of event lines per source, searched by bisection."""
    ev = tables.events
    ev = ev[ev["kind"].isin(SPECIALISED) & ev["line"].notna()]
    at: dict = {}
    for source, line in zip(ev["source"].tolist(), ev["line"].tolist()):
        at.setdefault(source, []).append(int(line))
    for lines in at.values():
        lines.sort()
    out = []
    for source, line, end_line in zip(tb["source"].tolist(), tb["line"].tolist(), tb["end_line"].tolist()):
        lines = at.get(source)
        lo = int(line)
        hi = lo if _na(end_line) else int(end_line)
        i = bisect.bisect_left(lines, lo) if lines else 0
        out.append(bool(lines) and i < len(lines) and lines[i] <= hi + 3)
    return out


def _na(v) -> bool:
    try:
        return v is None or bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


@rule(id="bare-collective-timeout", title="A collective timed out", category="collective_timeout",
      severity="error",
      description="Watchdog or gloo timeouts with nothing else that explains them.",
      remediation="Find what the missing rank was doing: take py-spy dumps of every rank when it hangs and enable "
                  "the flight recorder (TORCH_FR_BUFFER_SIZE) so the next timeout names the lagging rank.")
def bare_timeout(tables):
    t = facts.waits(tables)
    if t.empty:
        return []
    waiting = facts.ranks_of(t)
    lag, lag_why, lag_ev = facts.laggards(tables)
    return [Finding(rule="bare-collective-timeout", category="collective_timeout", confidence=0.35,
                    title="A collective timed out" + (f"; rank {', '.join(map(str, lag))} lagged" if lag else ""),
                    severity="error", culprit_ranks=lag,
                    explanation="Ranks timed out waiting in a collective. "
                                + (f"The lagging rank is known ({lag_why}), but " if lag else "")
                                + ("nothing" if lag else "Nothing") + " in the logs shows what the rank they "
                                  "waited for was doing.",
                    remediation="Collect py-spy dumps and flight-recorder traces on the next hang.",
                    affected_ranks=waiting, evidence=lag_ev + facts.evidence_from(t, 4), order=(1, float("inf")))]


# How far below a fatal-signal line its backtrace may run (UCX prints ~10-30 frames; c10/glibc similar).
_BACKTRACE_LINES = 80


@rule(id="fatal-signal-in-nccl", title="A process died of a fatal signal inside NCCL", category="nccl_error",
      severity="critical",
      description="A fatal signal (SIGBUS, SIGSEGV, SIGABRT) was caught and the native backtrace printed under it "
                  "(UCX's handler, c10, glibc, gdb) runs through NCCL's library: the crash happened inside NCCL, "
                  "not in the training code. SIGBUS there is almost always NCCL's shared-memory transport touching "
                  "a /dev/shm page beyond the tmpfs limit (Docker's default --shm-size is 64 MB); SIGSEGV points at "
                  "an NCCL/driver/library mismatch or a corrupted communicator.",
      remediation="SIGBUS: give the container more shared memory (`docker run --shm-size=8g` or `--ipc=host`; "
                  "Kubernetes: an emptyDir of medium Memory on /dev/shm), or confirm with NCCL_SHM_DISABLE=1. "
                  "Otherwise: run nccl-tests on the same nodes and check that the NCCL, CUDA driver and PyTorch "
                  "builds match.",
      references=("NCCL troubleshooting, 'Docker': shared memory and --shm-size",
                  "UCX ucs/debug/debug.c: 'Caught signal %d (%s)'"),
      false_positives=("A signal that struck elsewhere while another thread sat in NCCL: only the crashing "
                       "thread's backtrace is printed by these handlers, so its frames are where it struck.",))
def fatal_signal_in_nccl(tables):
    sigs, frames = facts.ev(tables, "fatal_signal"), facts.ev(tables, "native_frame")
    if sigs.empty or frames.empty:
        return []
    for s in sigs.itertuples(index=False):
        same = frames[(frames["source"] == s.source) & (frames["line"] > s.line)
                      & (frames["line"] <= s.line + _BACKTRACE_LINES)]
        if same.empty:
            continue
        from postmortem.ranks.ends import fatal_signal_name
        name = fatal_signal_name(s.details, str(s.message)) or "a fatal signal"
        culprit = [] if _na(s.rank) else [int(s.rank)]
        shm = (" SIGBUS inside NCCL is the shared-memory transport touching a /dev/shm page beyond the tmpfs "
               "limit: the container's /dev/shm is too small for NCCL's buffers.") if name == "SIGBUS" else ""
        return [Finding(
            rule="fatal-signal-in-nccl", category="nccl_error", confidence=0.6, severity="critical",
            title=f"{name} inside NCCL" + (f" on rank {culprit[0]}" if culprit else ""),
            explanation=(f"The process {'of rank ' + str(culprit[0]) + ' ' if culprit else ''}caught {name} and the "
                         f"backtrace under it runs through NCCL ({_frame_names(same)}): it crashed inside the "
                         f"communication library, not in the training code.{shm}"),
            remediation=("Give the container more shared memory (docker --shm-size=8g or --ipc=host) or confirm "
                         "with NCCL_SHM_DISABLE=1." if name == "SIGBUS" else
                         "Run nccl-tests on the same nodes; check that NCCL, the CUDA driver and PyTorch match."),
            culprit_ranks=culprit, affected_ranks=[r for r in facts.world_ranks(tables) if r not in culprit],
            evidence=facts.evidence_from(pd.DataFrame([s]), 1) + facts.evidence_from(same, 2),
            order=facts.order_key(pd.Series(s._asdict())), explains=("rank_crash", "collective_timeout", "unknown"))]
    return []


def _frame_names(frames: pd.DataFrame) -> str:
    """The distinct NCCL functions (or the library) the backtrace names, in order."""
    names = []
    for d in frames["details"]:
        n = (d or {}).get("fn") or "libnccl.so"
        if n not in names:
            names.append(n)
    return ", ".join(names[:4])

"""Time arithmetic: a rank's progress bar that had run for as long as its peers' collective timeout, unfinished.

tqdm prints how long a bar has run (`[30:09<33:25, 967 examples/s]`). A bar of work outside training (tokenizing,
preprocessing, evaluation, sampling) that had been running for about the process-group timeout when the job failed,
with work still to do, is the rank its peers waited for: they entered the next collective when it started that
work, and gave up after the timeout while it was still busy. The timeout is the one the waits state (gloo's
`Timed out waiting 1800000ms`, the watchdog's `Timeout(ms)=`, a store socket's `timed out after`), else torch's
default of 30 minutes."""
from __future__ import annotations

import re

import pandas as pd

from postmortem.verdict.findings import Evidence, Finding
from postmortem.rules import facts, rule

DEFAULT_TIMEOUT_S = 1800.0   # torch.distributed's default process-group timeout (gloo, NCCL since 2.x)
NEAR = 0.9                   # a bar within this share of the timeout had run about as long
_TIMEOUT_IN_TEXT = re.compile(r"Timeout\(ms\)=(\d{3,10})|timed out after (\d{3,10}) ?ms|Timed out waiting (\d{3,10})ms")
_PHASES = ("data", "eval", "sample")


def stated_timeout_s(tables) -> float | None:
    """The collective timeout the waits state (the most common one), in seconds, or None."""
    w = facts.waits(tables)
    seen: dict = {}
    for d, msg in zip(w["details"].tolist(), w["message"].tolist()) if len(w) else ():
        ms = (d or {}).get("timeout_ms")
        if ms is None:
            m = _TIMEOUT_IN_TEXT.search(str(msg))
            ms = next((g for g in m.groups() if g), None) if m else None
        try:
            v = int(ms) / 1000.0
        except (TypeError, ValueError):
            continue
        if v > 0:
            seen[v] = seen.get(v, 0) + 1
    return max(seen.items(), key=lambda kv: kv[1])[0] if seen else None


def busy_bars(tables, timeout_s: float) -> pd.DataFrame:
    """The last row of each unfinished non-training bar that had run for at least NEAR x timeout_s."""
    st = tables.steps
    if st.empty or "elapsed_s" not in st.columns:
        return st.iloc[0:0]
    bars = st[st["phase"].isin(_PHASES) & st["elapsed_s"].notna()]
    if bars.empty:
        return bars
    last = bars.sort_values(["source", "line"]).groupby(["source", "desc"], sort=False, dropna=False).tail(1)
    unfinished = last["total"].isna() | (last["step"] < last["total"])
    return last[unfinished & (last["elapsed_s"] >= NEAR * timeout_s)]


def _clock(secs: float) -> str:
    secs = int(secs)
    if secs >= 3600:
        return f"{secs // 3600}:{secs % 3600 // 60:02d}:{secs % 60:02d}"
    return f"{secs // 60}:{secs % 60:02d}"


@rule(id="busy-past-timeout", title="A rank's work outside training ran as long as the collective timeout",
      category="straggler", severity="critical",
      description="A progress bar of data preparation, evaluation or sampling had been running for about the "
                  "process-group timeout (the waits' stated timeout, else torch's 30-minute default) and was not "
                  "finished when the job failed: its rank was busy while the others waited in a collective and gave "
                  "up at the timeout.",
      remediation="Do the long work before init_process_group or offline (pre-tokenize and cache), split it across "
                  "ranks, make it faster, or raise the process-group timeout to cover it (init_process_group("
                  "timeout=...); with DeepSpeed, deepspeed.init_distributed(timeout=...)).",
      false_positives=("A bar whose elapsed time restarts per chunk (only the last value is read).",))
def busy_past_timeout(tables):
    stated = stated_timeout_s(tables)
    timeout = stated or DEFAULT_TIMEOUT_S
    bars = busy_bars(tables, timeout)
    if bars.empty:
        return []
    waits = facts.waits(tables)
    if waits.empty and tables.tracebacks.empty:
        return []  # nothing failed: a long bar is only a long bar
    waiting = set(facts.ranks_of(waits))
    bar = bars.sort_values("elapsed_s").iloc[-1]
    rank = None if pd.isna(bar["rank"]) else int(bar["rank"])
    culprit = [rank] if rank is not None and rank not in waiting else []
    left = ""
    if pd.notna(bar["total"]) and bar["total"] > 0:
        left = f" at {int(bar['step'])}/{int(bar['total'])} ({100 * int(bar['step']) / int(bar['total']):.0f}%)"
    said = (f"the waits state a timeout of {_clock(timeout)}" if stated else
            f"no wait states its timeout, and torch's default is {_clock(timeout)}")
    name = f"The progress bar `{bar['desc']}`" if isinstance(bar["desc"], str) and bar["desc"] else "A progress bar"
    why = (f"{name}{' on rank ' + str(rank) if rank is not None else ''} had been "
           f"running for {_clock(bar['elapsed_s'])}{left} when the job failed, and {said}: the "
           f"{'rank' if rank is not None else 'process'} running it was busy for the whole window its peers waited "
           "in a collective, and they gave up at the timeout.")
    # the timeout the waits stated, a bar on a rank that did not wait: the arithmetic names the straggler outright
    conf = (0.86 if culprit else 0.75) if stated else 0.6
    evidence = [Evidence(bar["source"], facts._int(bar["line"]), rank,
                         f"{bar['desc']}: {int(bar['step'])}"
                         + (f"/{int(bar['total'])}" if pd.notna(bar["total"]) else "")
                         + f" after {_clock(bar['elapsed_s'])}")] + facts.evidence_from(waits, 2)
    return [Finding(rule="busy-past-timeout", category="straggler", confidence=conf, severity="critical",
                    title=f"{bar['desc'] or 'Work outside training'} ran past the {_clock(timeout)} timeout",
                    explanation=why[:1].upper() + why[1:],
                    remediation="Move this work out of the collective's window: run it before init_process_group "
                                "or offline and cache the result, split it across ranks or speed it up; raising the "
                                "process-group timeout to cover it also works (with DeepSpeed, pass the timeout to "
                                "deepspeed.init_distributed, not only to the trainer's arguments).",
                    culprit_ranks=culprit, affected_ranks=sorted(waiting - set(culprit)), evidence=evidence,
                    order=facts.order_key(bar), explains=("collective_timeout", "rank_crash", "unknown"))]

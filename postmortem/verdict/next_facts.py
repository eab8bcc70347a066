"""The facts postmortem.verdict.next_action decides on, read from a verdict, its findings and the tables (hosts of the
culprit ranks, hosts a kernel or driver line names, the root's exception, job_stopped's reason)."""
from __future__ import annotations

import re

import pandas as pd

from postmortem.verdict.next_action import REASON_NEXT, NextAction, NextFacts, decide

# Event kinds that name a faulty machine (the host of the line is the one at fault).
HOST_FAULT_KINDS = ("kernel_xid", "gpu_hw", "kernel_gpu_error")
# Inputs whose lines describe a machine (a cited line of one places an infrastructure fault on that machine).
HOST_SOURCE_KINDS = ("nvidia_smi", "dmesg")
_SIGNAL_RE = re.compile(r"\b(SIG[A-Z]{2,6})\b")


def facts_of(verdict, findings: list, tables, recurrence=None) -> NextFacts:
    """NextFacts for a decided verdict (findings[0] is its root finding, when any)."""
    root = findings[0] if findings else None
    ranks = tables.frames.get("ranks")
    host_of = _rank_hosts(ranks)
    all_hosts = sorted(set(host_of.values()))
    cited = [_with_host(e, tables) for e in (verdict.evidence or (root.evidence if root is not None else []))]
    fault_hosts = sorted({e["host"] for e in cited if e.get("host") and e.get("kind") in HOST_FAULT_KINDS})
    host_files = _host_files(tables)
    fault_lines = [f"{e['source']}:{e['line']}" if e.get("line") is not None else str(e["source"]) for e in cited
                   if e.get("kind") in HOST_FAULT_KINDS or e.get("source") in host_files][:3]
    reason = _reason(verdict, root)
    exception = ""
    if root is not None:
        exception = " ".join([root.title or "", (root.explanation or "")[:600]] + [e.text for e in root.evidence[:3]])
    return NextFacts(
        category=verdict.category, rule=verdict.rule, confidence=float(verdict.confidence),
        culprit_ranks=list(verdict.culprit_ranks),
        culprit_hosts={r: host_of[r] for r in verdict.culprit_ranks if r in host_of},
        fault_hosts=fault_hosts, fault_lines=fault_lines, all_hosts=all_hosts, reason=reason, exception=exception,
        evidence=[{k: e.get(k) for k in ("source", "line", "rank", "text", "host")} for e in cited],
        hedged_no_failure=verdict.category == "no_failure" and verdict.confidence < 0.8, recurrence=recurrence)


def next_for(verdict, findings: list, tables, recurrence=None) -> NextAction | None:
    """The verdict's next action (None without a verdict)."""
    if verdict is None:
        return None
    return decide(facts_of(verdict, findings, tables, recurrence))


def _host_files(tables) -> set[str]:
    """Inputs that describe a machine rather than a rank (nvidia-smi output, the kernel log)."""
    src = tables.frames.get("sources")
    if src is None or not len(src):
        return set()
    return set(src[src["kind"].isin(list(HOST_SOURCE_KINDS))]["source"].tolist())


def _rank_hosts(ranks) -> dict[int, str]:
    """rank -> host from the ranks table (ranks without a known host are left out)."""
    if ranks is None or not len(ranks) or "host" not in ranks:
        return {}
    out = {}
    for r, h in zip(ranks["rank"].tolist(), ranks["host"].tolist()):
        if h is not None and not pd.isna(h) and str(h).strip() and r is not None and not pd.isna(r):
            out[int(r)] = str(h)
    return out


def _with_host(e, tables) -> dict:
    """A cited line as a dict with the host and event kind of its row in the events table, where it has one."""
    d = {"source": e.source, "line": e.line, "rank": e.rank, "text": e.text, "host": None, "kind": None}
    ev = tables.frames.get("events")
    if ev is None or not len(ev) or e.line is None:
        return d
    rows = ev[(ev["source"] == e.source) & (ev["line"] == e.line)]
    for h, k in zip(rows["host"].tolist(), rows["kind"].tolist()):
        if d["kind"] is None or k in HOST_FAULT_KINDS:
            d["kind"] = k
        if h is not None and not pd.isna(h) and str(h).strip():
            d["host"] = str(h)
    return d


def _reason(verdict, root) -> str | None:
    """job_stopped's reason (a field of the verdict or finding, or its phase), or a fatal signal's name."""
    for obj in (verdict, root):
        value = getattr(obj, "reason", None) if obj is not None else None
        if isinstance(value, str) and value:
            return value
    if verdict.category == "job_stopped" and verdict.phase in REASON_NEXT:
        return verdict.phase
    if root is not None and root.rule == "fatal-signal-in-nccl":
        m = _SIGNAL_RE.search(root.title or "")
        return m.group(1) if m else None
    return None

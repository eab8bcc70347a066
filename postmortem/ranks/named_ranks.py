"""Ranks a library's own message names as the ones that never arrived: `Ranks 3 failed to pass monitoredBarrier`
(torch's monitored_barrier on rank 0), the NCCL desync report's lagging ranks and the rank that `finished collective
#N, but didn't join collective #N+1`. The library watched the ranks arrive, so its word outweighs any guess made from
how the ranks ended."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from postmortem.verdict.findings import Evidence

_NUM = re.compile(r"\d{1,7}")


@dataclass
class Named:
    """The ranks the library named, the lines that name them, and which message said it."""
    ranks: list[int]
    evidence: list[Evidence] = field(default_factory=list)
    what: str = ""
    timeout_s: float | None = None


def _ranks_in(details: dict) -> list[int]:
    for key in ("named", "lagging", "culprit"):
        v = details.get(key)
        if v is not None and str(v).strip():
            return sorted({int(x) for x in _NUM.findall(str(v))})
    return []


def named_absent(tables) -> Named | None:
    """The ranks most of the naming lines agree on (the printing rank is never among them), or None."""
    ev = tables.events
    if ev is None or ev.empty:
        return None
    rows = ev[ev["kind"].isin(("named_ranks", "desync_report"))]
    if rows.empty:
        return None
    votes: Counter = Counter()
    lines: dict = {}
    timeout = None
    for rank, d, src, line, msg, kind in zip(rows["rank"].tolist(), rows["details"].tolist(), rows["source"].tolist(),
                                             rows["line"].tolist(), rows["message"].tolist(), rows["kind"].tolist()):
        d = d or {}
        named = [r for r in _ranks_in(d) if pd.isna(rank) or r != int(rank)]
        if not named:
            continue
        key = tuple(named)
        votes[key] += 1
        lines.setdefault(key, []).append(Evidence(src, None if pd.isna(line) else int(line),
                                                  None if pd.isna(rank) else int(rank), str(msg)[:300]))
        if d.get("timeout_ms") and timeout is None:
            timeout = int(d["timeout_ms"]) / 1000.0
        what = "torch's monitored_barrier" if kind == "named_ranks" and d.get("named") else "the NCCL desync report"
        lines.setdefault(("what", key), what)
    if not votes:
        return None
    best = max(votes.items(), key=lambda kv: (kv[1], -len(kv[0])))[0]
    return Named(list(best), lines[best][:3], lines[("what", best)], timeout)

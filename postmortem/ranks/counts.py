"""The one rank whose data is a different size: lines every rank prints alike (`[rank 2] loaded 513 validation
examples`, `epoch 0: 16 batches in this rank's shard`) where all ranks but one state the same count. A collective
over tensors sized from that data (an all_gather of per-example scores) or a loop over its batches (one more step
on one rank) diverges on that rank: it is the culprit of a size mismatch the receiving rank reports."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pandas as pd

from postmortem.verdict.findings import Evidence

MIN_RANKS = 3  # with two ranks neither count is the odd one


@dataclass
class OddCount:
    """The rank whose count differs, its count, everyone else's, and the lines (its own first)."""
    rank: int
    count: int
    usual: int
    unit: str
    evidence: list[Evidence]


def odd_count(tables) -> OddCount | None:
    """The rank whose stated count differs from the one count every other rank states, or None."""
    ev = tables.events
    if ev is None or ev.empty:
        return None
    rows = ev[(ev["kind"] == "data_count") & ev["rank"].notna()]
    if rows.empty:
        return None
    groups: dict = {}
    for rank, d, tpl, src, line, msg in zip(rows["rank"].tolist(), rows["details"].tolist(),
                                            rows["template"].tolist(), rows["source"].tolist(),
                                            rows["line"].tolist(), rows["message"].tolist()):
        d = d or {}
        try:
            count = int(d.get("count"))
        except (TypeError, ValueError):
            continue
        key = (str(tpl), str(d.get("unit")))
        # the first statement per rank and template (a per-epoch line restates it; the first shard decides)
        groups.setdefault(key, {}).setdefault(int(rank), (count, Evidence(src, None if pd.isna(line) else int(line),
                                                                          int(rank), str(msg)[:300])))
    found = []
    for (tpl, unit), per in groups.items():
        if len(per) < MIN_RANKS:
            continue
        tally = Counter(c for c, _ in per.values())
        if len(tally) != 2:
            continue
        (usual, n_usual), (odd, n_odd) = tally.most_common()
        if n_odd != 1 or n_usual < 2:
            continue
        r = next(r for r, (c, _) in per.items() if c == odd)
        other = next(e for rr, (c, e) in sorted(per.items()) if c == usual)
        found.append(OddCount(r, odd, usual, unit, [per[r][1], other]))
    if len({f.rank for f in found}) != 1:
        return None  # no count, or counts that point at different ranks
    return found[0]

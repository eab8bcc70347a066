"""Where non-finite numbers came from: per rank, the first training step whose own loss was NaN/Inf.

A rank's loss is computed from its own batch before any collective; gradients and their norm are averaged across
ranks by DDP's all-reduce. So one rank's bad batch shows as a NaN loss on that rank at step N while the others log a
finite loss (and already a NaN gradient norm) at N and a NaN loss from N+1: the rank whose loss turned first, by
step, is the origin. Ranks whose losses turn at the same step name no one (the data or the model went bad for all)."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from postmortem.verdict.findings import Evidence


@dataclass
class Origin:
    """The ranks whose own loss turned non-finite first, at which step, and the lines that show it."""
    ranks: list[int]
    step: int | None
    evidence: list[Evidence] = field(default_factory=list)
    later: dict = field(default_factory=dict)   # other rank -> its first non-finite step


def _step_of(tables, source, line, message: str) -> int | None:
    from postmortem.rules import facts
    m = facts.STEP_IN_TEXT.search(message)
    if m:
        return int(m.group(1) or m.group(2))
    return facts.step_before(tables, source, line)


def first_steps(tables, nan: pd.DataFrame) -> dict[int, tuple[int, Evidence]]:
    """rank -> (first step of a non-finite loss line, its evidence), for ranked `nan` events with a step."""
    out: dict = {}
    for rank, src, line, msg in zip(nan["rank"].tolist(), nan["source"].tolist(), nan["line"].tolist(),
                                    nan["message"].tolist()):
        if pd.isna(rank):
            continue
        step = _step_of(tables, src, line, str(msg))
        if step is None:
            continue
        r = int(rank)
        if r not in out or step < out[r][0]:
            out[r] = (step, Evidence(src, None if pd.isna(line) else int(line), r, str(msg)[:300]))
    return out


def origin(tables, nan: pd.DataFrame, world: list[int]) -> Origin | None:
    """The rank(s) whose loss turned non-finite at an earlier step than every other rank's, when they are fewer
    than the ranks whose losses turned later; None when the steps do not tell (one rank only, all alike)."""
    firsts = first_steps(tables, nan)
    if len(firsts) < 2 and len(set(world)) < 2:
        return None
    low = min(s for s, _ in firsts.values()) if firsts else None
    if low is None:
        return None
    lead = sorted(r for r, (s, _) in firsts.items() if s == low)
    rest = [r for r in world if r not in lead]
    if not rest or len(lead) * 2 > len(set(world) | set(firsts)):
        return None
    # every other rank either turned later or never reported a non-finite loss while it logged steps after `low`
    later = {r: firsts[r][0] for r in rest if r in firsts}
    if not later:
        return None
    return Origin(lead, low, [firsts[r][1] for r in lead[:2]] + [firsts[r][1] for r in sorted(later)[:1]], later)

"""Numeric rules: the loss (or inputs) became NaN/Inf."""
from __future__ import annotations

import numpy as np

from postmortem.sentences import clip
from postmortem.findings import Finding
from postmortem.rules import facts, rule


@rule(id="nan-loss", title="Loss became NaN/Inf", category="nan_inf", severity="error",
      description="Loss values (or anomaly-detection checks) turned NaN/Inf; warnings such as 'divide by zero "
                  "encountered in log' before it point at the operation that produced it.",
      remediation="Find the first non-finite value: torch.autograd.set_detect_anomaly(True) for one step, check "
                  "inputs/targets for zeros/inf (log(0), division by a zero-size box), lower the learning rate or "
                  "shorten warmup, enable gradient clipping, use bf16 instead of fp16.",
      false_positives=("fp16 loss-scaler overflow steps that the scaler skips (transient, training continues).",))
def nan_loss(tables):
    nan = facts.ev(tables, "nan")
    st = tables.steps
    # NaN in the loss column also means "no loss on this line": only an infinite value is a reading here; NaN
    # readings arrive as `nan` events from the line formats.
    st_nan = st[np.isinf(st["loss"].to_numpy(dtype=float, na_value=np.nan))] if len(st) else st
    if nan.empty and st_nan.empty:
        return []
    warn = facts.ev(tables, "numeric_warning")
    n_lines = len(set(zip(nan["source"], nan["line"])))
    conf = 0.85 if n_lines >= 2 or len(st_nan) >= 2 else 0.65
    if len(warn):
        conf = min(0.9, conf + 0.05)
    first = nan.iloc[0] if len(nan) else st_nan.iloc[0]
    step = None
    if len(st_nan) and st_nan.iloc[0]["step"] == st_nan.iloc[0]["step"]:
        step = int(st_nan.iloc[0]["step"])
    culprit = _first_nan_ranks(tables, nan, st_nan)
    if step is None and len(nan):  # the step the first NaN line names ('non-finite loss nan at step 37')
        own = nan[nan["rank"].isin(culprit)] if culprit else nan
        for msg in (own if len(own) else nan)["message"]:
            m = facts.STEP_IN_TEXT.search(str(msg))
            if m:
                step = int(m.group(1) or m.group(2))
                break
    if step is None and len(culprit) == 1:
        step = facts.rank_value(tables, culprit[0], "last_step")
    why = "The loss turned non-finite" + (f" on rank {culprit[0]}" if len(culprit) == 1 else "") + (
        f" at step {step}" if step is not None else "")
    if len(warn):
        w = warn.iloc[0]
        why += f", after the warning '{clip(str(w['message']), 120)}' (line {w['line']}), which names the operation"
    why += ". Once a loss is NaN every update spreads it; the job then diverges, stops, or a NaN check aborts it."
    return [Finding(rule="nan-loss", category="nan_inf", confidence=conf, title="Loss became NaN/Inf",
                    explanation=why,
                    remediation="Guard the operation named by the first warning (add eps to log/division inputs, "
                                "filter degenerate samples), lower the learning rate or fix the warmup schedule, "
                                "clip gradients; torch.autograd.set_detect_anomaly(True) finds the first NaN.",
                    culprit_ranks=culprit, step=step,
                    evidence=facts.evidence_from(warn, 2) + facts.evidence_from(nan, 4),
                    order=facts.order_key(first), explains=("rank_crash", "collective_timeout"))]


def _first_nan_ranks(tables, nan, st_nan) -> list[int]:
    """The rank(s) where NaN/Inf shows first: the only ranks that report it while others do not, else the earliest
    by time; none when every rank turns NaN together (DDP averages one rank's NaN into every rank at once)."""
    import pandas as pd
    both = pd.concat([nan[["rank", "ts"]], st_nan[["rank", "ts"]]]) if len(st_nan) else nan[["rank", "ts"]]
    both = both[both["rank"].notna()]
    if both.empty:
        return []
    bad = sorted(int(r) for r in both["rank"].unique())
    seen = set(tables.meta.get("ranks_seen", [])) | set(facts.world_ranks(tables))
    if len(bad) == 1:
        return bad
    if len(bad) < len(seen):
        return bad if len(bad) * 2 <= len(seen) else []
    timed = both[both["ts"].notna()]
    if timed["rank"].nunique() == len(bad):
        first = timed.assign(t=pd.to_datetime(timed["ts"], utc=True, errors="coerce")).groupby("rank")["t"].min()
        earliest = first.min()
        lead = [int(r) for r, t in first.items() if t == earliest]
        if len(lead) == 1 and (first.sort_values().iloc[1] - earliest).total_seconds() >= 1:
            return lead
    return []

"""Numeric rules: the loss (or inputs) became NaN/Inf."""
from __future__ import annotations

import numpy as np

from postmortem.verdict.sentences import clip
from postmortem.verdict.findings import Finding
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
    st_nan = st[np.isinf(st["loss"].to_numpy(dtype=float, na_value=np.nan)) | nonfinite_at_end(st)] if len(st) \
        else st
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
    from postmortem.ranks.nonfinite import origin
    came_from = origin(tables, nan, facts.world_ranks(tables)) if len(nan) else None
    if came_from is not None:  # the rank whose own loss turned first, by step (the others got it by all-reduce)
        culprit, step = came_from.ranks, came_from.step
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
    why += "."
    if len(warn):
        w = warn.iloc[0]
        why += f" The warning '{clip(str(w['message']), 120)}' (line {w['line']}) came before it and names the operation."
    if came_from is not None:
        firsts = ", ".join(f"rank {r} at step {s}" for r, s in sorted(came_from.later.items())[:4])
        why += (f" The other ranks' own losses were still finite then ({firsts} turned later): its batch made the "
                "first non-finite value, and DDP's gradient all-reduce carried it to every rank.")
    from postmortem.ranks import divergence
    grew = divergence.divergence(tables.steps, culprit)
    if grew is not None:
        why += f" {divergence.sentence(grew)}."
    why += " Once a loss is NaN every update spreads it; the job then diverges, stops, or a NaN check aborts it."
    # the fix follows what the lines show: a warning naming an operation, a loss that blew up, or neither
    if len(warn):
        fix = ("Guard the operation named by that warning (add eps to log/division inputs, filter degenerate "
               "samples), lower the learning rate or fix the warmup schedule, clip gradients; "
               "torch.autograd.set_detect_anomaly(True) finds the first NaN.")
    elif grew is not None:
        fix = divergence.fix(grew)
    else:
        fix = ("Find the first non-finite value with torch.autograd.set_detect_anomaly(True) for one step; check "
               "inputs and targets for NaN/Inf and zeros fed to log or division, lower the learning rate or fix the "
               "warmup schedule, clip gradients.")
    return [Finding(rule="nan-loss", category="nan_inf", confidence=conf, title="Loss became NaN/Inf",
                    explanation=why,
                    remediation=fix,
                    culprit_ranks=culprit, step=step,
                    evidence=facts.evidence_from(warn, 2) + (came_from.evidence if came_from is not None else [])
                    + facts.evidence_from(nan, 4),
                    order=facts.order_key(first), explains=("rank_crash", "collective_timeout"))]


def nonfinite_at_end(st):
    """Rows reporting non-finite iterations (a framework's NaN counter, a nan/inf loss or gradient norm: the steps
    table's `nan_iters`) from which their progress series never came back to a finite report: a stream that went on
    training finitely afterwards (fp16's skipped overflow step, HF's `grad_norm: nan` on a skipped step) recovered."""
    import pandas as pd
    if "nan_iters" not in st or not st["nan_iters"].fillna(0).gt(0).any():
        return pd.Series(False, index=st.index, dtype=bool)
    bad = st["nan_iters"].fillna(0).gt(0)
    out = pd.Series(False, index=st.index, dtype=bool)
    train = st[st["phase"] == "train"]
    for _, series in train.groupby([train["source"], train["rank"].fillna(-1), train["desc"].fillna("")],
                                   sort=False):
        series = series.sort_values("line")
        flags = bad.loc[series.index].to_numpy()
        if flags[-1]:  # the series ends non-finite: mark its trailing run
            k = len(flags)
            while k and flags[k - 1]:
                k -= 1
            out.loc[series.index[k:]] = True
    return out


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


def loss_scale_trajectories(tables) -> dict:
    """Per output stream (rank, else file), the loss-scale events in line order, with the training steps the stream
    reported after its last one: {(rank, source): (events, rows, steps_after)}."""
    from postmortem.parsers import loss_scale
    ls = facts.ev(tables, "loss_scale")
    out: dict = {}
    for rank, source, line, msg in zip(ls["rank"].tolist(), ls["source"].tolist(), ls["line"].tolist(),
                                       ls["message"].tolist()):
        e = loss_scale.read(str(msg))
        if e is None:
            continue
        key = (None if facts._int(rank) is None else int(rank), source if facts._int(rank) is None else None)
        out.setdefault(key, ([], []))[0].append(e)
        out[key][1].append((source, facts._int(line), facts._int(rank), str(msg)))
    st = tables.steps
    result = {}
    for key, (events, rows) in out.items():
        after = None
        if len(st):
            last_src, last_line = rows[-1][0], rows[-1][1] or 0
            s = st[(st["source"] == last_src) & (st["line"] > last_line) & (st["phase"] == "train")]
            s = s[s["rank"] == key[0]] if key[0] is not None else s[s["rank"].isna()]
            after = int(s["step"].nunique())
        result[key] = (events, rows, after)
    return result


@rule(id="loss-scale-collapse", title="The fp16 loss scale collapsed towards its minimum", category="nan_inf",
      severity="error",
      description="Dynamic loss scaling (DeepSpeed, apex, fairseq, Megatron) halves the scale on every overflow "
                  "and skips the step; a scale that keeps halving at the end of the log, down to the floor, or a "
                  "scaler that says it cannot decrease any more, means every step overflows: the gradients are "
                  "Inf/NaN, not just large. A few skips at the start that recover are calibration, not a failure.",
      remediation="Train in bf16 (no loss scaling), lower the learning rate or warm it up longer, clip gradients, "
                  "raise the scaler's minimum/hysteresis only to see more steps; find the layer that overflows "
                  "(torch.autograd.set_detect_anomaly on one step, check attention/softmax in fp16).",
      false_positives=("Skips while the scaler calibrates at the start of training (the scale then grows back).",))
def loss_scale_collapse(tables):
    from postmortem.parsers import loss_scale
    from postmortem.ranks.ends import goes_on
    goes = goes_on(tables)
    bad = []
    for (rank, _), (events, rows, after) in loss_scale_trajectories(tables).items():
        c = loss_scale.collapse(events, steps_after=after)
        last_src, last_line = rows[-1][0], rows[-1][1]
        if c.verdict == "numeric_failure" and not goes.went_on(rank, last_src, last_line):
            bad.append((rank, c, rows))  # (a stream that ended normally after it recovered, however low it went)
    if not bad:
        return []
    floor = any(any(e.at_minimum for e in ev) for ev, _, _ in loss_scale_trajectories(tables).values())
    ranks = sorted({r for r, _, _ in bad if r is not None})
    world = facts.world_ranks(tables)
    culprit = ranks if ranks and len(ranks) * 2 < max(len(world), 1) else []
    rank, c, rows = bad[0]
    evidence = [facts.Evidence(s, ln, r, m[:400]) for s, ln, r, m in rows[-3:]]
    return [Finding(rule="loss-scale-collapse", category="nan_inf", confidence=0.85 if floor else 0.75,
                    title="The fp16 loss scale collapsed" + (" to its minimum" if floor else ""),
                    explanation=f"{c.reason[:1].upper()}{c.reason[1:]}"
                                + (f" (rank {rank})" if rank is not None else "")
                                + ": every step overflows, so the scaler skips them all and training makes no "
                                  "progress; the gradients are Inf/NaN.",
                    remediation="Switch to bf16, lower the learning rate or lengthen warmup, clip gradients, and "
                                "find the operation that overflows in fp16 (set_detect_anomaly on one step).",
                    culprit_ranks=culprit, affected_ranks=[r for r in world if r not in culprit],
                    evidence=evidence, order=(1, float("inf")),
                    explains=("rank_crash", "collective_timeout", "unknown"))]

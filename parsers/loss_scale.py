"""Loss-scale messages (fp16 dynamic loss scaling) read into events, and a trajectory judged as a numeric failure or
as calibration. Pure: no I/O, `re` only.

The wordings are the ones the sources print (postmortem/catalog extract): DeepSpeed's loss_scaler.py and fused /
unfused fp16 optimizers and ZeRO stages (v0.5-0.19), apex amp and fp16_utils, fairseq's dynamic loss scaler and
trainer notes, Megatron's training log line, DeepSpeed's step report (`step=N, skipped=M`). torch's GradScaler and
Lightning's precision plugins print nothing when they skip a step; where a user logs `loss_scale=…`/`'loss_scale':
…` the generic key/value reading picks it up.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

_NUM = r"(-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|inf|nan)"


@dataclass(frozen=True)
class ScaleEvent:
    """One loss-scale message: the scale in effect, whether the step was skipped, the new scale after a reduction,
    whether the scaler reports its floor, and what kind of message it was."""
    kind: str                       # skip, reduce, grow, set, minimum, report, static
    scale: float | None = None      # the (attempted) scale when the message was printed
    skipped: bool = False           # this step was skipped (overflow)
    reduced_to: float | None = None
    at_minimum: bool = False
    grown_to: float | None = None
    iteration: int | None = None    # an iteration / step number the message names
    skipped_total: int | None = None  # a running count of skipped steps (DeepSpeed step report, Megatron interval)
    line: int | None = None         # where the caller found it (set by the caller, for ordering)


def _f(s: str | None) -> float | None:
    if s is None:
        return None
    try:
        return float(s)
    except ValueError:
        return None


# (regex, builder) in the order tried; every message the sources print is matched by exactly one of the first group.
_RULES: list[tuple[re.Pattern, str]] = [
    # the floor: DeepSpeed (loss_scaler.py), fairseq (dynamic_loss_scaler.py, amp_optimizer.py)
    (re.compile(r"loss scale already at minimum|cannot decrease scale anymore"), "minimum"),
    (re.compile(r"[Mm]inimum loss scale reached \(" + _NUM + r"\)"), "minimum_value"),
    # DeepSpeed hysteresis: skipped, scale unchanged
    (re.compile(r"OVERFLOW! Rank \d+ Skipping step\. Attempted loss scale: " + _NUM +
                r", but hysteresis is \d+\. Reducing hysteresis to \d+"), "skip_hold"),
    # DeepSpeed loss_scaler / ZeRO / fused+unfused optimizers (also the old "[deepscale]" tag)
    (re.compile(r"(?:OVERFLOW! Rank \d+ Skipping step|fp16 dynamic loss scale overflow! Skipping step|"
                r"Overflow detected\. Skipping step)\. Attempted loss scale: " + _NUM + r", reducing to " + _NUM),
     "skip_reduce"),
    # apex amp (handle.py), apex fp16_utils
    (re.compile(r"Gradient overflow\.\s+Skipping step, (?:loss scaler \d+ )?reducing loss scale to " + _NUM),
     "skip_to"),
    (re.compile(r"OVERFLOW within closure! Skipping step, reducing loss scale to " + _NUM), "skip_to"),
    # fairseq trainer (NOTE: ... setting loss scale to: X) and amp_optimizer
    (re.compile(r"overflow detected, (?:ignoring gradient, )?setting (?:loss )?scale to:? (?:to )?" + _NUM),
     "skip_to"),
    (re.compile(r"^(?:\S*OverflowError: )?setting loss scale to: " + _NUM), "skip_to"),  # fairseq's OverflowError
    (re.compile(r"Gradient overflow, skipping update|NOTE: (?:gradient )?overflow detected"), "skip"),
    (re.compile(r"Grad overflow on iteration(?::? (\d+))?"), "skip_iter"),
    # scale moves (DeepSpeed fused/unfused optimizers)
    (re.compile(r"Reducing dynamic loss scale from " + _NUM + r" to " + _NUM), "reduce"),
    (re.compile(r"Increasing dynamic loss scale from " + _NUM + r" to " + _NUM), "grow"),
    (re.compile(r"No Grad overflow for (\d+) iterations"), "clean_window"),
    (re.compile(r"setting loss scale from " + _NUM + r" -> " + _NUM), "set"),
    (re.compile(r"(?:Using (?:static|dynamic) loss scale of:?|with static loss scale:)(?: " + _NUM + ")?"),
     "static"),
    # progress reports: Megatron's interval line, DeepSpeed's step report
    (re.compile(r"loss scale: " + _NUM + r" \|(?:.*?number of skipped iterations:\s*(\d+))?"), "megatron"),
    (re.compile(r"\bstep=(\d+), skipped=(\d+),"), "ds_report"),
    # user logging of GradScaler's scale (`loss_scale=1024`, `'loss_scale': 512.0`, `scaler scale: 8192`)
    (re.compile(r"['\"]?\b(?:loss_scale|loss scale|grad_scale|scaler(?:\.get)?_?scale(?:\(\))?)['\"]?\s*[:=]\s*"
                + _NUM), "value"),
]
_TRIGGERS = ("scale", "overflow", "OVERFLOW", "skipped")


def read(message: str) -> ScaleEvent | None:
    """The loss-scale event a message reports, or None."""
    if not message or not any(t in message for t in _TRIGGERS):
        return None
    for rx, kind in _RULES:
        m = rx.search(message)
        if not m:
            continue
        g = m.groups()
        if kind == "minimum":
            return ScaleEvent("minimum", at_minimum=True, skipped=True)
        if kind == "minimum_value":
            return ScaleEvent("minimum", scale=_f(g[0]), at_minimum=True, skipped=True)
        if kind == "skip_hold":
            return ScaleEvent("skip", scale=_f(g[0]), skipped=True)
        if kind == "skip_reduce":
            return ScaleEvent("skip", scale=_f(g[0]), skipped=True, reduced_to=_f(g[1]))
        if kind == "skip_to":
            to = _f(g[0])
            return ScaleEvent("skip", scale=None if to is None else to * 2, skipped=True, reduced_to=to)
        if kind == "skip":
            return ScaleEvent("skip", skipped=True)
        if kind == "skip_iter":
            return ScaleEvent("skip", skipped=True, iteration=int(g[0]) if g[0] else None)
        if kind == "reduce":
            return ScaleEvent("reduce", scale=_f(g[0]), reduced_to=_f(g[1]))
        if kind == "grow":
            return ScaleEvent("grow", scale=_f(g[0]), grown_to=_f(g[1]))
        if kind == "clean_window":
            return ScaleEvent("grow")
        if kind == "set":
            return ScaleEvent("set", scale=_f(g[1]))
        if kind == "static":
            return ScaleEvent("static", scale=_f(g[0]))
        if kind == "megatron":
            n = int(g[1]) if g[1] else None
            return ScaleEvent("report", scale=_f(g[0]), skipped=bool(n), skipped_total=n)
        if kind == "ds_report":
            return ScaleEvent("report", iteration=int(g[0]), skipped_total=int(g[1]))
        if kind == "value":
            return ScaleEvent("report", scale=_f(g[0]))
    return None


@dataclass(frozen=True)
class Collapse:
    """The judgement of a loss-scale trajectory."""
    verdict: str            # numeric_failure | calibration | sporadic | none
    reason: str
    final_scale: float | None
    trailing_skips: int     # skipped steps in a row at the end of the trajectory (no growth between them)
    first_failure: int | None = None   # index (into the trajectory) of the first event of the failing run


LOW_SCALE = 2.0 ** 4        # DeepSpeed's min_loss_scale default is 1, apex's 1, fairseq's 1e-4: a scale this low
                            # after consecutive halvings is at (or a few halvings from) the floor
MIN_TRAILING = 3            # halvings in a row at the end that, ending low, read as "keeps halving"
LONG_TRAILING = 12          # halvings in a row at the end that are a failure whatever the scale (2^12 smaller)
CALIBRATION_HEAD = 0.5      # skips all within this leading share of the trajectory read as calibration


def _scale_after(e: ScaleEvent) -> float | None:
    if e.reduced_to is not None:
        return e.reduced_to
    if e.grown_to is not None:
        return e.grown_to
    return e.scale


def collapse(trajectory: list[ScaleEvent], steps_after: int | None = None) -> Collapse:
    """Numeric failure (the scaler reports its floor, or the scale keeps halving at the end of the log down to a low
    value or for many steps in a row) versus calibration (skips at the start, then growth or steady training).
    `steps_after`: training steps the log shows after the last event, when the caller knows (many means the run
    recovered whatever the trajectory looks like)."""
    events = [e for e in trajectory if e is not None]
    if not events:
        return Collapse("none", "no loss-scale messages", None, 0)
    final = next((s for s in (_scale_after(e) for e in reversed(events)) if s is not None), None)
    for i, e in enumerate(events):
        if e.at_minimum:
            return Collapse("numeric_failure", "the loss scaler reports it is at its minimum and cannot go lower",
                            e.scale if e.scale is not None else final, _trailing(events)[0], i)
    trailing, start = _trailing(events)
    recovered = steps_after is not None and steps_after >= 2 * max(trailing, 1) + 10
    unit = _overflow_at_unit_scale(events)
    if unit is not None and not recovered:
        e = events[unit]
        return Collapse("numeric_failure", f"a step overflowed at a loss scale of {e.scale:g}, where the loss is not "
                        "scaled up at all", _scale_after(e), trailing, unit)
    if trailing and not recovered:
        if final is not None and (final <= LOW_SCALE or math.isnan(final) or final == 0) and trailing >= MIN_TRAILING:
            return Collapse("numeric_failure",
                            f"the loss scale halved {trailing} times in a row at the end of the log, down to "
                            f"{final:g}", final, trailing, start)
        if trailing >= LONG_TRAILING:
            return Collapse("numeric_failure", f"the loss scale halved {trailing} times in a row at the end of the "
                            "log", final, trailing, start)
    skips = [i for i, e in enumerate(events) if e.skipped]
    if not skips:
        return Collapse("none", "no skipped steps", final, 0)
    grew_after = any(e.kind == "grow" for e in events[skips[-1]:])
    if grew_after or recovered or skips[-1] < max(1, int(len(events) * CALIBRATION_HEAD)) or \
            (final is not None and final > LOW_SCALE and skips[0] == 0 and trailing == len(skips)):
        return Collapse("calibration", f"{len(skips)} skipped step(s) while the scaler found its range; the scale "
                        f"stays at {final:g}" if final is not None else
                        f"{len(skips)} skipped step(s) while the scaler found its range", final, trailing)
    return Collapse("sporadic", f"{len(skips)} occasional overflow skip(s), the scale stays "
                    f"{'at ' + format(final, 'g') if final is not None else 'usable'}", final, trailing)


UNIT_SCALE = 1.0  # a step that overflows at this scale or below overflows with the loss not scaled up at all


def _overflow_at_unit_scale(events: list[ScaleEvent]) -> int | None:
    """Index of the last skipped step whose attempted scale was at most UNIT_SCALE, when the scale never grew after
    it (else None). Scaling multiplies the loss to keep small gradients representable; a step that overflows at a
    scale of 1 or less has gradients beyond fp16's range before any scaling: they are Inf/NaN. DeepSpeed prints
    the scale as an int, so a scale below 1 reads `Attempted loss scale: 0`."""
    last = None
    for i, e in enumerate(events):
        if e.kind == "grow" and last is not None:
            last = None
        elif e.skipped and e.scale is not None and not math.isnan(e.scale) and e.scale <= UNIT_SCALE:
            last = i
    return last


def _trailing(events: list[ScaleEvent]) -> tuple[int, int | None]:
    """(skipped steps in a row at the end with a non-increasing scale, index where that run starts). One overflow
    can print several messages (DeepSpeed: `Grad overflow on iteration N`, `Reducing dynamic loss scale ...`, `fp16
    dynamic loss scale overflow! ...`): a step is counted once, by its scale, else by its iteration."""
    start, prev = None, None
    run: list[ScaleEvent] = []
    for i in range(len(events) - 1, -1, -1):
        e = events[i]
        if e.kind in ("grow", "set", "static") or (e.kind == "report" and not e.skipped):
            break
        if not e.skipped and e.kind != "reduce":
            continue
        s = e.scale
        if prev is not None and s is not None and s < prev:  # walking backwards the scale must not decrease
            break
        if s is not None:
            prev = s
        run.append(e)
        start = i
    scaled = {e.scale if e.scale is not None else e.reduced_to * 2 for e in run
              if e.scale is not None or e.reduced_to is not None}
    if scaled:
        return len(scaled), start
    iters = {e.iteration for e in run if e.iteration is not None}
    return (len(iters) if iters else len(run)), start

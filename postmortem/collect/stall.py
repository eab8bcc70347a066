"""When a quiet job counts as stalled (`collect --stall-after auto`, the default): soon enough that its stacks are
taken before the job's own collective timeout ends the hang, late enough not to dump a healthy job at every pause.

The delay follows the job: at most half its collective timeout (from its command line or environment where it
states one, else DEFAULT_CAP, below NCCL's 600 s default), and, within that, ten times its usual silence between
output lines (a job that prints every step is stalled after ten seconds of silence, one
that prints every five minutes only at the cap). A dump taken before the cap is *early*: if the job then goes on
printing for a while, the pause was no hang and the dump is removed (the analyzer reads the latest stacks as where
the ranks ended), and the least silence that counts as a stall doubles past that pause.
"""
from __future__ import annotations

import re
from collections import deque

DEFAULT_CAP = 300.0     # below NCCL's default 600 s timeout
FLOOR = 10.0            # never call less than this a stall
FACTOR = 10.0           # this many times the usual silence (the median gap between output chunks)
GAPS_KEPT = 512         # the latest gaps looked at
MIN_GAPS = 8            # fewer gaps than this: the rhythm is not known yet (the cap holds)
RECOVERED_AFTER = 60.0  # an early dump is no hang's when the job printed again and ran on this long after it
NCCL_DEFAULT_S = 600.0  # torch's default collective timeout for NCCL process groups
AUTO = "auto"

# A collective timeout the job states: (pattern over the command line or an environment value, seconds per unit).
# HF Trainer --ddp_timeout (s), Megatron --distributed-timeout-minutes, DeepSpeed's DEEPSPEED_TIMEOUT (min).
_ARG_TIMEOUTS = ((re.compile(r"^--ddp[_-]timeout(?:=(\d{1,7}))?$"), 1.0),
                 (re.compile(r"^--distributed[_-]timeout[_-]minutes(?:=(\d{1,6}))?$"), 60.0))
_ENV_TIMEOUTS = (("DEEPSPEED_TIMEOUT", 60.0),)


def stated_timeout(command: list[str], environ: dict[str, str]) -> tuple[float | None, str]:
    """(seconds, where it was read) of the collective timeout the job's command line or environment states."""
    for i, arg in enumerate(command):
        for pattern, unit in _ARG_TIMEOUTS:
            m = pattern.match(arg)
            if not m:
                continue
            value = m.group(1) if m.group(1) else (command[i + 1] if i + 1 < len(command) else "")
            if value.isdigit() and int(value) > 0:
                return int(value) * unit, f"{arg.split('=')[0]} on the command line"
    for var, unit in _ENV_TIMEOUTS:
        value = environ.get(var, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value) * unit, f"{var} in the environment"
    return None, ""


def cap_for(timeout_s: float | None) -> float:
    """The longest silence before a dump: half the stated timeout (at least FLOOR), else DEFAULT_CAP."""
    if timeout_s is None:
        return DEFAULT_CAP
    return max(FLOOR, min(DEFAULT_CAP, timeout_s / 2))


class Rhythm:
    """The gaps between the job's output chunks (written by the tee threads, read by the watchdog)."""

    def __init__(self) -> None:
        self.gaps: deque = deque(maxlen=GAPS_KEPT)

    def add(self, gap: float) -> None:
        """Record the silence before an output chunk."""
        self.gaps.append(gap)

    def usual(self) -> float | None:
        """The median of the recent gaps (a job's start-up and its rare long pauses do not move it), or None before
        MIN_GAPS of them."""
        gaps = sorted(self.gaps)
        if len(gaps) < MIN_GAPS:
            return None
        return gaps[len(gaps) // 2]


def threshold(usual: float | None, cap: float, floor: float = FLOOR) -> float:
    """The silence that counts as a stall now: FACTOR times the usual silence, within [floor, cap]. `floor` rises
    above FLOOR after a pause the job came out of (see StallWatchdog): it has shown it can be that quiet."""
    if usual is None:
        return cap
    return min(cap, max(floor, FACTOR * usual))

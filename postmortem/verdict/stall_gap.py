"""Say why a job run under `postmortem collect` has no stacks although it hung: the collector waits for a silence
(--stall-after) before it dumps, and the job's own collective timeout ended the hang first."""
from __future__ import annotations

import re

_TIMEOUT_RE = re.compile(r"Timed out waiting (\d{1,9}) ?ms|Timeout\(ms\)=(\d{1,9})")
TIMEOUT_KINDS = ("collective_timeout", "watchdog_timeout")
DUMP_KINDS = ("pyspy", "pyspy_json", "stack_dump")


def hang_timeout_s(tables) -> float | None:
    """The collective timeout that ended the hang, in seconds (flight-recorder or watchdog records, else the
    timeout lines' own words), or None."""
    coll = tables.frames.get("collectives")
    if coll is not None and len(coll) and coll["timeout_ms"].notna().any():
        return float(coll["timeout_ms"].dropna().max()) / 1000
    ev = tables.frames.get("events")
    if ev is None or not len(ev):
        return None
    found = []
    for msg in ev[ev["kind"].isin(list(TIMEOUT_KINDS))]["message"].astype(str).head(200):
        m = _TIMEOUT_RE.search(msg[:2000])
        if m:
            found.append(int(m.group(1) or m.group(2)))
    return max(found) / 1000 if found else None


def stall_limit(stall: dict) -> tuple[float | None, str]:
    """(the silence the collector waited for, as --stall-after says it) from the manifests' stall settings."""
    limits = []
    for rec in stall.values():
        after = rec.get("stall_after")
        if isinstance(after, (int, float)) and not isinstance(after, bool):
            limits.append((float(after), f"{after:g}"))
        elif rec.get("threshold_s") is not None:
            limits.append((float(rec["threshold_s"]), "auto"))
    if not limits:
        return None, ""
    return min(limits)


def stall_gap(tables) -> dict | None:
    """The gap to report when the job ran under the collector, hung until its timeout, and no stack was dumped
    because the timeout came before the collector's stall delay; None otherwise."""
    stall = tables.meta.get("collect_stall") or {}
    src = tables.frames.get("sources")
    dumped = src is not None and len(src) and src["kind"].isin(list(DUMP_KINDS)).any()
    if not stall or any(rec.get("dumps") for rec in stall.values()) or dumped:
        return None
    timeout = hang_timeout_s(tables)
    limit, said = stall_limit(stall)
    if timeout is None or limit is None:
        return None
    if limit == 0:
        why = "stack dumps on a stall were turned off (--stall-after 0)"
    elif limit >= timeout:
        why = (f"the job hung until its {timeout:g} s collective timeout ended it, and the collector waits "
               f"{limit:g} s without output (--stall-after {said}) before it dumps stacks, so none was taken")
    else:
        return None
    return {"missing": "py-spy dumps of every rank",
            "why": f"The job ran under postmortem collect, but {why}. Stacks show where the rank everyone waited "
                   "for was stuck.",
            "how": f"postmortem collect --stall-after {max(1.0, timeout / 2):g} --out DIR -- COMMAND (half the "
                   "timeout); or, while the job hangs, kill -USR1 <collector pid> to dump at once"}

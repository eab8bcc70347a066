"""Restarts: torchrun `--max-restarts` runs the workers again after a failure, and every attempt leaves its lines
(per-rank files under `attempt_K/`, one console with all of them). The verdict is about the first failure; this
module cuts the tables down to the first attempt and says what the later ones did.

An attempt ends, in a launcher's console, at the agent's `failed (exitcode: N) local_rank: R (pid: P)` line; the
summary block torchrun prints at the very end is the last attempt's. Restarts are only assumed when the inputs show
them (per-rank folders of a second attempt, or the agent reporting two failures in one console): a single failure
is never cut, however its console lines are ordered.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import pandas as pd

from postmortem.ingest.discover import path_hints


@dataclass
class Attempts:
    """How many attempts the inputs show, and what each later one ended with (one line each)."""
    count: int = 1
    later: list[str] = field(default_factory=list)

    @property
    def restarted(self) -> bool:
        return self.count > 1

    def sentence(self) -> str:
        """What the later attempts did, for the verdict's explanation."""
        if not self.restarted:
            return ""
        n = self.count - 1
        what = "; ".join(self.later[:3]) if self.later else "their ends are not in the inputs"
        return (f"torchrun restarted the workers {n} time{'s' if n > 1 else ''}; this verdict is about the first "
                f"attempt. Later: {what}.")


def _boundaries(tables) -> dict[str, list[int]]:
    """Console -> line numbers of the agent's failure lines (each ends an attempt)."""
    ev = tables.events
    if ev.empty:
        return {}
    agent = ev[(ev["kind"] == "exit") & ev["details"].map(lambda d: (d or {}).get("local_rank") is not None)]
    out: dict[str, list[int]] = {}
    for src, line in zip(agent["source"].tolist(), agent["line"].tolist()):
        if line is not None and not pd.isna(line):
            out.setdefault(src, []).append(int(line))
    return {s: sorted(v) for s, v in out.items()}


def first_attempt(tables):
    """(tables of the first attempt, Attempts). Without restarts: the tables themselves."""
    bounds = _boundaries(tables)
    src_attempt = {}
    for s in tables.sources["source"].tolist():
        a = path_hints(s).get("attempt")
        if a is not None:
            src_attempt[s] = a
    dirs = sorted(set(src_attempt.values()))
    consoles = {s: b for s, b in bounds.items() if len(b) >= 2}
    count = max(len(dirs), max((len(b) for b in consoles.values()), default=1))
    if count < 2:
        return tables, Attempts()
    first = dirs[0] if dirs else 0
    later = _later_ends(tables, consoles)

    def keep_mask(df: pd.DataFrame) -> pd.Series:
        keep = []
        for s, line in zip(df["source"].tolist(), df["line"].tolist()):
            if s in src_attempt:
                keep.append(src_attempt[s] == first)
            elif s in consoles and line is not None and not pd.isna(line):
                keep.append(bisect.bisect_left(consoles[s], int(line)) == 0)  # up to the first failure line
            else:
                keep.append(True)
        return pd.Series(keep, index=df.index, dtype=bool)

    from postmortem.tables.build import Tables
    frames = {}
    for name, df in tables.frames.items():
        if name == "sources" or "source" not in df.columns or "line" not in df.columns or df.empty:
            frames[name] = df
        else:
            frames[name] = df[keep_mask(df)]
    view = Tables(frames, dict(tables.meta))
    return view, Attempts(count, later)


def _later_ends(tables, consoles: dict[str, list[int]]) -> list[str]:
    """One phrase per later attempt's failure line (`attempt 2: local rank 0 exit code 1`)."""
    out = []
    ev = tables.events
    for src, lines in consoles.items():
        rows = ev[(ev["source"] == src) & ev["line"].isin(lines[1:])]
        for i, d in enumerate(rows["details"].tolist(), start=2):
            d = d or {}
            out.append(f"attempt {i}: local rank {d.get('local_rank')} exit code {d.get('code')}")
    return out

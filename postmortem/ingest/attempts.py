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
    split = _split(tables)
    if split is None:
        return tables, Attempts()
    count, _, _, later = split
    return attempt_view(tables, 0, split), Attempts(count, later)


def attempt_views(tables, limit: int = 4) -> list:
    """The tables of each attempt, first to last (at most `limit`: the first ones and the last); [tables] without
    restarts."""
    split = _split(tables)
    if split is None:
        return [tables]
    count = split[0]
    wanted = sorted(set(list(range(min(count, limit - 1))) + [count - 1]))
    return [attempt_view(tables, k, split) for k in wanted]


def _split(tables):
    """(attempt count, source -> attempt index, console -> failure lines, later ends) or None without restarts."""
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
        return None
    index = {a: i for i, a in enumerate(dirs)}
    return count, {s: index[a] for s, a in src_attempt.items()}, consoles, _later_ends(tables, consoles)


def attempt_view(tables, k: int, split=None):
    """The tables of attempt `k` (0-based): per-attempt files of that attempt, a console's lines after its k-th
    failure line up to its (k+1)-th (the last attempt keeps what follows), and every row of other files."""
    split = split or _split(tables)
    if split is None:
        return tables
    count, src_attempt, consoles, _ = split

    def keep_mask(df: pd.DataFrame) -> pd.Series:
        keep = []
        for s, line in zip(df["source"].tolist(), df["line"].tolist()):
            if s in src_attempt:
                keep.append(src_attempt[s] == k)
            elif k > 0 and src_attempt:
                # a later attempt from its own folders only: a console interleaves (and may reorder) every attempt
                keep.append(False)
            elif s in consoles and line is not None and not pd.isna(line):
                # up to and including the attempt's own failure line
                keep.append(min(bisect.bisect_left(consoles[s], int(line)), count - 1) == k)
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
    return Tables(frames, dict(tables.meta))


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

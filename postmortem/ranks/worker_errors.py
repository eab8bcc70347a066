"""The exception a DataLoader worker raised in the user's own code (`Caught KeyError in DataLoader worker process 1`
and the `Original Traceback` under it): a record the dataset or collate code could not handle, not a worker that
died of memory or a signal. Its innermost user frame says where."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from postmortem.verdict.findings import Evidence

_NEAR = 4  # the worker's original traceback starts within a few lines of the `Caught ...` line


@dataclass
class WorkerError:
    """The worker's own exception, its innermost user frame, and the evidence line."""
    exc_type: str
    exc_message: str
    where: str        # `__getitem__ (train.py:28): y = int(fields[-1])`
    evidence: Evidence


def _in_worker(frames) -> bool:
    return any(str(f.get("func") or "") in ("_worker_loop", "fetch") and "torch/utils/data" in
               str(f.get("file") or "").replace("\\", "/") for f in frames or [])


_ANONYMOUS = ("<listcomp>", "<genexpr>", "<dictcomp>", "<setcomp>", "<lambda>")


def _named(frames, user: dict) -> str:
    """The user frame's function, or for a comprehension or lambda the named function of the user's code around it."""
    func = str(user.get("func") or "")
    if func not in _ANONYMOUS:
        return func
    frames = list(frames or [])
    at = next((i for i, f in enumerate(frames) if f is user or f == user), None)
    if at is None:
        return func
    # the enclosing frame is the nearest named frame of the same file, on either side (whichever way they are listed)
    for i in sorted(range(len(frames)), key=lambda i: abs(i - at)):
        f = frames[i]
        if i != at and f.get("file") == user.get("file") and str(f.get("func") or "") not in _ANONYMOUS:
            return f"{f.get('func')}'s {func}"
    return func


def worker_error(tables, event) -> WorkerError | None:
    """The original exception under a `Caught X in DataLoader worker process N` event row, or None."""
    d = event.get("details") or {}
    if not d.get("exc"):
        return None
    tb = tables.tracebacks
    if tb is None or tb.empty:
        return None
    line = event.get("line")
    if line is None or pd.isna(line):
        return None
    near = tb[(tb["source"] == event.get("source")) & (tb["line"] > int(line)) & (tb["line"] <= int(line) + _NEAR)]
    for rec in near.itertuples(index=False):
        if not _in_worker(rec.frames):
            continue
        user = rec.last_user_frame or {}
        file = str(user.get("file") or "").replace("\\", "/").rsplit("/", 1)[-1]
        code = f": {str(user.get('code')).strip()[:100]}" if user.get("code") else ""
        where = f"{_named(rec.frames, user)} ({file}:{user.get('line')}){code}" if user else "the dataset code"
        rank = None if pd.isna(rec.rank) else int(rec.rank)
        end = rec.end_line if not pd.isna(rec.end_line) else rec.line
        text = f"{rec.exc_type}: {str(rec.exc_message)[:200]} in {where}"
        return WorkerError(str(rec.exc_type), str(rec.exc_message), where,
                           Evidence(rec.source, int(end), rank, text[:400]))
    return None

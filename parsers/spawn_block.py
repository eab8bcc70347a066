"""torch.multiprocessing's ProcessRaisedException carries the child's own traceback in its message, introduced by
`-- Process N terminated with the following error:` (torch/multiprocessing/spawn.py, ProcessContext.join): N is
the process index, the rank's local rank. Printed by the parent (a console, a notebook cell), that traceback has no
rank prefix; this gives its lines the index until the traceback's exception line closes it."""
from __future__ import annotations

import re

HEADER_RE = re.compile(r"^-- Process (?P<index>\d{1,6}) terminated with the following error:\s*$")
# lines that belong to the child's traceback: its header, frames and code lines (indented), carets
_INSIDE_RE = re.compile(r"^(?:Traceback \(most recent call last\):|\s+\S|\s*$)")


class SpawnBlock:
    """Per file: the process index of the child traceback being read, if any."""

    def __init__(self) -> None:
        self.index: int | None = None
        self.started = False

    def rank_for(self, message: str, rank):
        """The line's rank: its own when it has one, the child's index inside a child traceback, else None."""
        if message.startswith("-- Process"):
            m = HEADER_RE.match(message)
            if m:
                self.index, self.started = int(m.group("index")), False
                return rank
        if self.index is None:
            return rank
        index = self.index
        if message.startswith("Traceback ("):
            self.started = True
        elif self.started and not _INSIDE_RE.match(message):
            self.index = None  # the exception line (unindented) closes the child's traceback
        elif not self.started and message.strip():
            self.index = None  # something else came first: not the block torch writes
            return rank
        return rank if rank is not None else index

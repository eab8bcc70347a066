"""The parts of the HTML report that the verdict does not change, computed by a child forked once the tables are
built, while this process runs the rank state and the rules (seconds at thousands of ranks).

What every rank did (its activity, the time axis, its last step: postmortem.reports.ranks.prepare), NCCL's account
of its setup, the stack classes and the collectives' rows take ~1.5 s of one CPU at 16,384 ranks; the rules take
~6 s on the other. The child is a copy of this process and runs the very functions the report would run here, on
the same tables, so the report is the same either way (tests/test_view_ahead.py); when the child fails, dies or
was given other tables, the report computes them itself.
"""
from __future__ import annotations

import os

from postmortem.ingest import beside

WAIT_S = 60.0     # a child that sends nothing in this long is given up (the report computes the parts itself)
LANG = "en"       # the labels the child uses; a report in another language computes the labelled parts itself

_started: "Ahead | None" = None


def parts(tables, main_label: str, default_pg: str) -> dict:
    """Every verdict-independent part, as the report computes it (`main_label`, `default_pg`: its words)."""
    from postmortem.reports import ranks as ranks_mod, sections
    return {"ranks": ranks_mod.prepare(tables), "nccl": sections.nccl_view(tables.nccl),
            "stacks": sections.stack_classes(tables.stacks, main_label),
            "collectives": sections.collective_rows(tables.collectives, default_pg),
            "labels": (main_label, default_pg)}


def start(tables) -> None:
    """Fork the child for these tables (where fork is safe and there is a second CPU); take() hands its parts over."""
    global _started
    discard()
    if (os.cpu_count() or 1) < 2 or not beside.can_fork():
        return
    from postmortem.reports import i18n
    t = i18n.catalogue(LANG)
    forked = beside.fork(lambda conn: conn.send(parts(tables, t["stacks_main_thread"], t["coll_default_pg"])))
    if forked is not None:
        _started = Ahead(*forked, tables)


def take(tables) -> dict | None:
    """The parts computed ahead for these very tables, once; None when there are none (compute them here)."""
    global _started
    ahead, _started = _started, None
    if ahead is None:
        return None
    if ahead.tables is not tables:
        ahead.close()
        return None
    return ahead.result()


def discard() -> None:
    """Stop a child whose parts no report will take."""
    global _started
    ahead, _started = _started, None
    if ahead is not None:
        ahead.close()


class Ahead(beside.Child):
    """The parent's handle on the forked child, and the tables it was given."""

    def __init__(self, pid: int, conn, tables):
        super().__init__(pid, conn)
        self.tables = tables

    def result(self) -> dict | None:
        """The child's parts, or None (failed, gone, or nothing within WAIT_S)."""
        try:
            if self._conn is None or not self._conn.poll(WAIT_S):
                return None
            got = self._conn.recv()
            return got if isinstance(got, dict) else None
        except (EOFError, OSError, ValueError):
            return None
        except Exception:  # noqa: BLE001 - a value that would not load: computed here instead
            return None
        finally:
            self.close()

    def close(self) -> None:
        """Stop the child and reap it; the tables are let go."""
        super().close()
        self.tables = None

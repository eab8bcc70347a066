"""The HTML report's charts, drawn by a process forked when the parse is over, while this one runs the rules.

matplotlib takes ~0.2 s of CPU to import and ~0.1 s per chart to draw. Imported by the report's own process while
the files are parsed, it takes that CPU from the parser processes (and loaded there at the lowest priority, nice 19,
it still took ~0.15 s from them: a nice-19 spinner slows a 512-rank parse by 5-10 %). Here a child is forked once
the parser processes are done, when this process has pandas loaded and no other thread: it imports matplotlib on
the CPU they left while this process builds the tables and runs the rules on the other. Once the verdict is known
the charts' models are sent over, and the child draws them while this process builds the rest of the report. When
the child is not loaded in time, fails or dies, the charts are drawn in the report's process: the same bytes
either way, as the child is a copy of it and both run postmortem.reports.figures.chart_uris.
"""
from __future__ import annotations

import os
import threading

from postmortem.ingest import beside

LOAD_WAIT_S = 5.0    # how long a report waits for a child still loading matplotlib (a cold disk: seconds)
DRAW_WAIT_S = 60.0   # a loaded child that sends no charts in this long is given up (drawn here instead)
PARENT_CHECK_S = 1.0

_started: "ChartProcess | None" = None


def start() -> "ChartProcess | None":
    """Fork the chart process now (once the parser processes are done, with no other thread running); None where
    fork is unsafe or there is a single CPU (no CPU to load it on beside the rules). `take()` hands it to the report."""
    global _started
    if _started is not None:
        return _started
    if (os.cpu_count() or 1) < 2 or not beside.can_fork():
        return None
    forked = beside.fork(_serve, duplex=True)
    if forked is None:
        return None
    _started = ChartProcess(*forked)
    return _started


def take() -> "ChartProcess | None":
    """The process start() forked, once (the next report draws its own charts, or start()s another)."""
    global _started
    proc, _started = _started, None
    return proc


def request(proc: "ChartProcess | None", model, gm, culprits: dict, lang: str) -> "PendingCharts":
    """Ask for the report's charts: sent to `proc` at once when there is one, else drawn here on result()."""
    if proc is not None and not proc.send((model, gm, culprits, lang)):
        proc = None
    return PendingCharts(proc, (model, gm, culprits, lang))


class PendingCharts:
    """Charts being drawn: result() gives name -> data URI (or None) for timeline, steps and gpu_memory."""

    def __init__(self, proc: "ChartProcess | None", args: tuple):
        self._proc = proc
        self._args = args

    def result(self) -> dict:
        uris = self._proc.receive() if self._proc is not None else None
        if uris is None:
            from postmortem.reports.figures import chart_uris
            uris = chart_uris(*self._args)
        return uris


class ChartProcess(beside.Child):
    """The parent's handle on a forked chart process."""

    def __init__(self, pid: int, conn):
        super().__init__(pid, conn)
        self._ready: bool | None = None

    def send(self, args: tuple) -> bool:
        """Send the charts' models; False when the child is gone."""
        if self._conn is None:
            return False
        try:
            self._conn.send(args)
            return True
        except (OSError, ValueError):  # the child is gone
            self.close()
            return False

    def receive(self) -> dict | None:
        """The child's charts, or None (not loaded within LOAD_WAIT_S, failed, or gone): the caller draws them."""
        try:
            if self._ready is None:
                if not self._conn.poll(LOAD_WAIT_S):
                    return None
                self._ready = self._conn.recv()
            if not self._ready or not self._conn.poll(DRAW_WAIT_S):
                return None
            uris = self._conn.recv()
            return uris if isinstance(uris, dict) else None
        except (EOFError, OSError, ValueError):
            return None
        finally:
            self.close()


def _serve(conn) -> None:
    """The child: load matplotlib and say whether that worked, then draw the one request it gets. The request is
    read by a thread meanwhile (so that the parent's send of ~0.3 MB of models does not wait for the load). Leaves
    when the parent goes."""
    got: list = []
    reader = threading.Thread(target=_read_request, args=(conn, got), name="postmortem-charts-read", daemon=True)
    reader.start()
    loaded = _load()
    conn.send(loaded)
    reader.join()  # no other thread when the timeline is drawn in a fork of this process
    if not loaded or not got:
        return
    from postmortem.reports.figures import chart_uris
    try:
        uris = chart_uris(*got[0])
    except Exception:  # noqa: BLE001 - the report draws them itself and raises what it raises
        return
    conn.send(uris)


def _read_request(conn, got: list) -> None:
    """The parent's one request into `got` (nothing when the parent goes first)."""
    parent = os.getppid()
    while not conn.poll(PARENT_CHECK_S):
        if os.getppid() != parent:
            return
    try:
        got.append(conn.recv())
    except (EOFError, OSError):
        pass


def _load() -> bool:
    """Import matplotlib and what the charts use, and draw a few letters (the Agg canvas, the font faces)."""
    try:
        from postmortem.reports import figures
        figures.warm_up()
        return True
    except Exception:  # noqa: BLE001 - the report draws its charts itself then
        return False

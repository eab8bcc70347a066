"""The HTML report's charts drawn by a process forked once the parse is over (postmortem.reports.chart_process)."""
from __future__ import annotations

import os
import signal
import threading

import pytest

from postmortem import api
from postmortem.ingest import beside
from postmortem.reports import chart_process, figures, ranks, sections
from test_beside import _tree
from test_report_render import synthetic

needs_fork = pytest.mark.skipif(
    not beside.can_fork() or (os.cpu_count() or 1) < 2 or threading.active_count() > 1,
    reason="needs fork, two CPUs and no other thread in the test process")


def _chart_args(world: int = 80):
    a = synthetic(world=world, culprit=37)
    gm = sections.gpu_model(a.tables.gpu, a.tables.events)
    return ranks.build(a), gm, sections.gpu_culprits(a, gm), "en"


@pytest.fixture(autouse=True)
def _no_process_left():
    yield
    left = chart_process.take()
    if left is not None:
        left.close()


def _reaped(pid: int) -> bool:
    """Whether the child `pid` was already waited for (not running, not a zombie)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


@needs_fork
def test_the_chart_process_draws_the_same_bytes_as_this_process():
    args = _chart_args()
    proc = chart_process.start()
    assert proc is not None and chart_process.start() is proc  # one at a time
    assert chart_process.take() is proc and chart_process.take() is None
    calls = []
    real = figures.chart_uris
    try:
        figures.chart_uris = lambda *a: calls.append(1) or real(*a)  # counts draws in *this* process only
        uris = chart_process.request(proc, *args).result()
    finally:
        figures.chart_uris = real
    assert calls == []  # drawn by the child
    local = real(*args)
    assert uris == local
    assert uris["timeline"].startswith("data:image/png;base64,") and uris["steps"] and uris["gpu_memory"]
    assert _reaped(proc.pid)


@needs_fork
def test_a_child_that_cannot_load_matplotlib_leaves_the_drawing_here(monkeypatch):
    args = _chart_args()

    def broken():
        raise ImportError("no matplotlib here")
    monkeypatch.setattr(figures, "warm_up", broken)  # the fork inherits it
    proc = chart_process.start()
    assert proc is not None
    calls = []
    real = figures.chart_uris
    monkeypatch.setattr(figures, "chart_uris", lambda *a: calls.append(1) or real(*a))
    uris = chart_process.request(chart_process.take(), *args).result()
    assert calls == [1]
    monkeypatch.undo()
    assert uris == figures.chart_uris(*args)
    assert _reaped(proc.pid)


@needs_fork
def test_a_dead_child_or_a_slow_load_leaves_the_drawing_here(monkeypatch):
    args = _chart_args(world=8)
    local = figures.chart_uris(*args)
    proc = chart_process.start()
    os.kill(proc.pid, signal.SIGKILL)
    assert chart_process.request(chart_process.take(), *args).result() == local
    monkeypatch.setattr(chart_process, "LOAD_WAIT_S", 0.0)
    monkeypatch.setattr(figures, "warm_up", lambda: threading.Event().wait(30))  # never loaded in time
    proc = chart_process.start()
    pending = chart_process.request(chart_process.take(), *args)
    assert pending.result() == local
    assert _reaped(proc.pid)  # killed and reaped, not left loading


def test_no_chart_process_with_another_thread_running():
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert chart_process.start() is None
    finally:
        stop.set()
        other.join()
    args = _chart_args(world=8)
    assert chart_process.request(None, *args).result() == figures.chart_uris(*args)


@needs_fork
def test_a_parallel_html_analysis_draws_its_charts_in_the_chart_process(tmp_path, monkeypatch):
    root = _tree(tmp_path, 2000)
    started = []
    real_start = chart_process.start
    monkeypatch.setattr(chart_process, "start", lambda: started.append(1) or real_start())
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    forked = api.analyze(root, jobs=2, quiet=True, html=True)
    assert started == [1]
    html = forked.to_html()
    assert chart_process.take() is None  # the report took it
    plain = api.analyze(root, jobs=1, quiet=True, html=True)
    assert started == [1]  # no parser processes, no chart process
    assert plain.to_html() == html

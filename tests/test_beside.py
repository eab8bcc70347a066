"""Discovery beside the parser load: postmortem.ingest.beside runs one call in a forked child while the parent works."""
import os

import pytest

from postmortem import api
from postmortem.ingest import beside
from postmortem.ingest import discover as discover_mod

needs_fork = pytest.mark.skipif(not beside.can_fork(), reason="no fork start method on this platform")


@needs_fork
def test_value_comes_from_a_child_while_the_parent_works():
    done = []
    pid = beside.call_beside(lambda _: os.getpid(), None, lambda: done.append(os.getpid()))
    assert done == [os.getpid()]  # the work ran here
    assert pid != os.getpid()     # the call ran in another process


def _fails(arg):
    raise FileNotFoundError(f"no such file or directory: {arg}")


@needs_fork
def test_an_error_in_the_child_is_raised_here_as_a_plain_call_would():
    with pytest.raises(FileNotFoundError, match="nowhere"):
        beside.call_beside(_fails, "nowhere", lambda: None)


class _Unpicklable:
    def __reduce__(self):
        raise TypeError("not picklable")


@needs_fork
def test_an_unpicklable_value_is_computed_again_here():
    value = beside.call_beside(lambda _: (os.getpid(), _Unpicklable()), None, lambda: None)
    assert value[0] == os.getpid()


@needs_fork
def test_a_failing_work_still_reaps_the_child():
    with pytest.raises(RuntimeError):
        beside.call_beside(lambda _: b"x" * (1 << 20), None, lambda: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # no child left behind


def _tree(tmp_path, size):
    for r in range(4):
        d = tmp_path / f"node{r // 2}"
        d.mkdir(exist_ok=True)
        (d / f"rank{r}.log").write_text(f"[rank{r}]: step 1 loss 0.5\n" * (size // 26 + 1))
    return str(tmp_path)


def test_no_fork_while_another_thread_runs():
    import threading
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not beside.can_fork()
        assert not api._parallel_likely(".", 2, "local")
    finally:
        stop.set()
        other.join()


def test_holds_at_least_counts_nested_files_and_stops_at_the_limit(tmp_path):
    root = _tree(tmp_path, 1000)
    assert discover_mod.holds_at_least(root, 3000)
    assert not discover_mod.holds_at_least(root, 10_000)
    assert not discover_mod.holds_at_least(str(tmp_path / "missing"), 1)


@needs_fork
def test_analyze_with_forked_discovery_lists_the_same_sources(tmp_path, monkeypatch):
    root = _tree(tmp_path, 2000)
    assert api._parallel_likely(root, 2, "local")
    assert not api._parallel_likely(root, None, "local")  # a small tree is parsed in this process: no fork
    assert not api._parallel_likely(root, 1, "local")
    assert not api._parallel_likely(root, 2, "dask")
    calls = []
    real = beside.call_beside
    monkeypatch.setattr(beside, "call_beside", lambda fn, arg, work: calls.append(arg) or real(fn, arg, work))
    forked = api.analyze(root, jobs=2, quiet=True)
    assert calls == [root]
    plain = api.analyze(root, jobs=1, quiet=True)
    assert [s.to_dict() for s in forked.sources] == [s.to_dict() for s in plain.sources]
    assert forked.to_json() == plain.to_json()

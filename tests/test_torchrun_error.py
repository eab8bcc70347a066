"""torchrun error.json parser: child and parent shapes, string messages, chained call stacks, hostile files."""
from __future__ import annotations

import glob
import os

from postmortem.parsers.base import parse_source
from postmortem.parsers.torchrun_error import epoch_to_iso, parse_callstack, parse_torchrun_error
from postmortem.ingest.discover import Source, discover

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "torchrun_error")


def parse(rel: str):
    path = os.path.join(FIX, rel)
    src = next(s for s in discover(FIX) if s.path == os.path.abspath(path))  # display paths relative to FIX
    assert src.kind == "torchrun_error", rel
    return parse_source(src)


def test_parent_copy_with_error_code():
    result = parse("parent_error_errorcode1.json")
    (tb,) = result.rows["tracebacks"]
    assert tb["exc_type"] == "ValueError" and tb["exc_message"] == "corrupt sample at step 3"
    assert tb["frames"][0] == {"file": "/home/user/job/tr/raise_record.py", "line": 6, "func": "load_batch"}
    assert [f["func"] for f in tb["frames"]] == ["load_batch", "main", "wrapper"]  # innermost first
    assert tb["last_user_frame"]["func"] == "load_batch"
    assert tb["ts"] == "2026-11-21T13:18:46" and tb["rank"] is None
    (ev,) = result.rows["events"]
    assert ev["kind"] == "exit" and ev["details"]["code"] == 1 and ev["details"]["parent_copy"] is True
    assert "corrupt sample at step 3" in ev["message"]


def test_child_files_take_rank_and_attempt_from_the_log_dir_path():
    paths = sorted(glob.glob(os.path.join(FIX, "logdir_max_restarts1", "*", "attempt_*", "*", "error.json")))
    got = []
    for p in paths:
        result = parse(os.path.relpath(p, FIX))
        (ev,) = result.rows["events"]
        (tb,) = result.rows["tracebacks"]
        got.append((ev["details"]["attempt"], ev["rank"], tb["exc_type"], "code" in ev["details"]))
    assert got == [(0, 1, "ValueError", False), (1, 1, "RuntimeError", False)]


def test_chained_exceptions_and_error_code_inside_message():
    result = parse("nested/attempt_0/0/error.json")
    first, second = result.rows["tracebacks"]
    assert first["exc_type"] == "RuntimeError" and first["chained_from"] is None
    assert second["exc_type"] == "ValueError" and second["chained_from"] == 0
    assert second["exc_message"] == "bad checkpoint /ckpt/last.pt" and second["rank"] == 0
    (ev,) = result.rows["events"]
    assert ev["details"]["code"] == 1 and ev["ts"] == "2026-11-21T13:18:46"


def test_plain_string_message():
    result = parse("plain_string_message.json")
    assert not result.rows.get("tracebacks")
    (ev,) = result.rows["events"]
    assert ev["details"]["exc_type"] == "RuntimeError" and "exited with code 3" in ev["message"]


def test_truncated_json_is_a_problem():
    result = parse("truncated.json")
    assert not result.rows and any("not understood" in p for p in result.problems)


def test_deeply_nested_json_is_refused_before_parsing():
    path = os.path.join(FIX, "hostile_deep_nesting.json")
    result = parse_torchrun_error(Source(path=path, source="deep.json", kind="torchrun_error"))
    assert not result.rows and any("nested" in p and "levels deep" in p for p in result.problems)


def test_oversized_file_not_loaded(tmp_path, monkeypatch):
    import postmortem.parsers.torchrun_error as te
    monkeypatch.setattr(te, "MAX_ERROR_FILE", 100)
    p = tmp_path / "error.json"
    p.write_text('{"message": "' + "x" * 500 + '"}')
    result = te.parse_torchrun_error(Source(path=str(p), source="error.json", kind="torchrun_error"))
    assert not result.rows and any("larger than 100 bytes" in pr for pr in result.problems)


def test_random_bytes_and_wrong_shapes(tmp_path):
    for name, content in [("a", bytes(range(256)) * 10), ("b", b"[1, 2, 3]"), ("c", b'{"nomessage": 1}'),
                          ("d", b'{"message": 42}')]:
        p = tmp_path / name
        p.write_bytes(content)
        result = parse_torchrun_error(Source(path=str(p), source=name, kind="torchrun_error"))
        assert not result.rows and result.problems, name


def test_callstack_without_exception_line_is_marked_truncated():
    (tb,) = parse_callstack('Traceback (most recent call last):\n  File "/a.py", line 3, in f\n    g()\n')
    assert tb["exc_type"] == "<truncated>" and tb["frames"][0]["func"] == "f"


def test_epoch_strings_and_nonsense():
    assert epoch_to_iso("1795267126") == "2026-11-21T13:18:46"
    assert epoch_to_iso(1795267126.5) == "2026-11-21T13:18:46.500000"
    assert epoch_to_iso("soon") is None and epoch_to_iso("1e300") is None and epoch_to_iso(None) is None

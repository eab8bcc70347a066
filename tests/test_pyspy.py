"""py-spy text and --json dumps -> stacks rows (real captured dumps in tests/fixtures/stacks)."""
from __future__ import annotations

import json
import os

import pytest

from postmortem.parsers.pyspy import MAX_ROWS, cmdline_rank, parse_pyspy_json, parse_pyspy_text
from postmortem import stacks as st
from postmortem.ingest.discover import Source, discover

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "stacks")


def _src(name: str) -> Source:
    return discover(os.path.join(FIX, name))[0]


def _parse(name: str):
    src = _src(name)
    fn = parse_pyspy_json if src.kind == "pyspy_json" else parse_pyspy_text
    return src, fn(src)


def _rows(name: str) -> list[dict]:
    return _parse(name)[1].rows.get("stacks", [])


def _tmp_source(tmp_path, name: str, data: bytes | str, **kw) -> Source:
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    src = discover(str(path))[0]
    for k, v in kw.items():
        setattr(src, k, v)
    return src


@pytest.mark.parametrize("name,kind", [
    ("pyspy_dump.txt", "pyspy"), ("pyspy_dump.json", "pyspy_json"), ("pyspy_dump_locals.json", "pyspy_json"),
    ("pyspy_error_not_python.txt", "pyspy"), ("wandb_gql_retry_pyspy_main.txt", "pyspy"),
    ("gpu_lost_pyspy_torchrun_agent.txt", "pyspy"), ("pyspy_dump_torchrun_subprocesses.txt", "pyspy"),
])
def test_discovery_kinds(name, kind):
    assert _src(name).kind == kind


def test_two_threads_one_row_each_innermost_first():
    rows = _rows("pyspy_dump.txt")
    assert [(r["thread"], r["thread_name"], r["pid"], r["line"]) for r in rows] == [
        ("5496", "MainThread", 5496, 4), ("5497", "background-worker", 5496, 9)]
    main = rows[0]
    assert main["frames"][0] == {"func": "leaf_sleep", "file": "sleeper.py", "line": 6}
    assert main["frames"][-1]["func"] == "<module>"
    assert main["active"] is False and main["owns_gil"] is False
    assert main["signature"] == "<module> (sleeper.py);outer (sleeper.py);middle (sleeper.py);leaf_sleep (sleeper.py)"
    assert rows[0]["dump"] == rows[1]["dump"] == "pyspy_dump.txt:5496@1"
    assert main["rank"] is None


def test_text_json_and_native_dumps_of_one_process_have_equal_signatures():
    by_name = {}
    for name in ("pyspy_dump.txt", "pyspy_dump.json", "pyspy_dump_native.txt", "pyspy_dump_locals.txt",
                 "pyspy_dump_locals.json"):
        by_name[name] = {r["thread_name"]: r["signature"] for r in _rows(name)}
    assert len({json.dumps(v, sort_keys=True) for v in by_name.values()}) == 1


def test_bare_names_of_python310_match_qualified_names_of_python311():
    old = {r["thread_name"]: r["signature"] for r in _rows("pyspy_dump_py3.10.13.txt")}
    new = {r["thread_name"]: r["signature"] for r in _rows("pyspy_dump.txt")}
    assert old == new
    assert _rows("pyspy_dump.txt")[1]["frames"][3]["func"] == "Thread.run"  # names are kept as printed


def test_json_thread_ids_and_status():
    rows = _rows("pyspy_dump_subprocesses.json")
    assert rows[0]["thread_name"] == "MainThread"  # main thread first, like the text dump
    assert rows[0]["active"] is True and rows[0]["owns_gil"] is True
    assert {r["thread"] for r in rows} == {"6044", "6045"}


def test_locals_text_and_json():
    want = {"seconds": "60", "tag": '"main"', "counter": "42", "label": '"inner-main"'}
    assert _rows("pyspy_dump_locals.txt")[0]["frames"][0]["locals"] == want
    assert _rows("pyspy_dump_locals.json")[0]["frames"][0]["locals"] == want
    assert _rows("pyspy_dump_locals.txt")[0]["frames"][1]["locals"]["data"] == '{"a": 1, "b": [1, 2, 3]}'
    assert "locals" not in _rows("pyspy_dump_locals.txt")[0]["frames"][3]  # <module>: none printed


def test_native_frames_are_marked_and_kept():
    frames = _rows("pyspy_dump_native.txt")[0]["frames"]
    assert frames[0] == {"func": "clock_nanosleep", "file": "libc.so.6", "line": None, "native": True}
    assert frames[-1]["func"] == "0x7f4d1164524a" and frames[-1]["native"]
    assert st.classify_frames(frames) == "sleep_lock"


def test_subprocesses_are_separate_dumps():
    rows = _rows("pyspy_dump_subprocesses.txt")
    assert [(r["pid"], r["thread"]) for r in rows] == [(6044, "6044"), (6044, "6045"), (6046, "6046")]
    assert rows[2]["dump"] != rows[0]["dump"]


def test_torchrun_agent_and_workers():
    rows = _rows("pyspy_dump_torchrun_subprocesses.txt")
    assert [r["pid"] for r in rows] == [9590, 9590, 9614, 9615]
    assert all(r["rank"] is None for r in rows)  # nothing states a rank; never guessed from pid order
    assert st.is_launcher(rows[0]["frames"])
    assert st.classify_frames(rows[2]["frames"]) == "collective_wait"


def test_path_rank_is_not_spread_over_a_launchers_workers(tmp_path):
    data = open(os.path.join(FIX, "pyspy_dump_torchrun_subprocesses.txt"), "rb").read()
    src = _tmp_source(tmp_path, "rank_0.txt", data)
    assert src.rank == 0
    assert all(r["rank"] is None for r in parse_pyspy_text(src).rows["stacks"])


def test_rank_from_local_rank_in_command_line_and_launcher_unranked():
    rows = _rows("pyspy_launcher_4ranks_subprocesses.txt")
    by_pid = {}
    for r in rows:
        by_pid.setdefault(r["pid"], set()).add(r["rank"])
    assert by_pid[29843] == {None}  # the launcher itself
    assert sorted(next(iter(v)) for p, v in by_pid.items() if p != 29843) == [0, 1, 2, 3]


def test_rank_from_locals_when_the_command_line_says_nothing(tmp_path):
    text = open(os.path.join(FIX, "pyspy_4ranks_concat_locals.txt")).read()
    for i in range(4):
        text = text.replace(f" --local_rank={i}", "")
    rows = parse_pyspy_text(_tmp_source(tmp_path, "concat.txt", text)).rows["stacks"]
    assert {(r["pid"], r["rank"]) for r in rows} == {(29886, 0), (29887, 1), (29888, 2), (29889, 3)}


def test_rank_from_path_for_json():
    rows = _rows("pyspy_rank2.json")
    assert {r["rank"] for r in rows} == {2}


def test_cmdline_rank_forms():
    assert cmdline_rank("python train.py --local_rank=3") == (None, 3)
    assert cmdline_rank("python train.py --local-rank 5 --node_rank=1") == (None, 5)
    assert cmdline_rank("RANK=7 LOCAL_RANK=3 python train.py") == (7, 3)
    assert cmdline_rank("python train.py --rank 2") == (2, None)
    assert cmdline_rank("python train.py --node_rank=1 --nnodes 2") == (None, None)


def test_banner_line_names_the_rank_of_the_next_dump(tmp_path):
    one = open(os.path.join(FIX, "pyspy_dump.txt")).read()
    text = "=== rank 5 ===\n" + one + "\n==> logs/rank_6/pyspy.txt <==\n" + one.replace("5496", "6001")
    rows = parse_pyspy_text(_tmp_source(tmp_path, "all.txt", text)).rows["stacks"]
    assert [r["rank"] for r in rows] == [5, 5, 6, 6]


def test_hex_thread_ids_and_statuses(tmp_path):
    text = ('Process 12: python x.py\nPython v3.8.5 (/usr/bin/python3)\n\n'
            'Thread 0x7f4d1142fe10 (active+gil): "MainThread"\n    main (x.py:3)\n    <module> (x.py:5)\n'
            'Thread 0x7F4D1142FE11 (active)\n    run (threading.py:870)\n'
            'Thread 0x7F4D1142FE12 (gil)\n    run (threading.py:870)\n')
    rows = parse_pyspy_text(_tmp_source(tmp_path, "x.txt", text)).rows["stacks"]
    assert [(r["thread"], r["thread_name"], r["active"], r["owns_gil"]) for r in rows] == [
        ("0x7F4D1142FE10", "MainThread", True, True), ("0x7F4D1142FE11", None, True, False),
        ("0x7F4D1142FE12", None, True, True)]


def test_headless_excerpt_from_an_issue():
    rows = _rows("wandb_gql_retry_pyspy_main.txt")
    assert len(rows) == 1
    r = rows[0]
    assert (r["pid"], r["thread"], r["thread_name"], len(r["frames"])) == (531102, "531102", "MainThread", 13)
    assert st.classify_frames(r["frames"]) == "logging"
    assert st.blocking_frame(r["frames"])["func"] == "_sleep_check_cancelled"


def test_wrapped_command_line_and_thread_without_frames():
    src, res = _parse("gpu_lost_pyspy_torchrun_agent.txt")
    rows = res.rows["stacks"]
    assert len(rows) == 1 and rows[0]["frames"] == [] and rows[0]["signature"] == ""
    assert rows[0]["pid"] == 2816 and rows[0]["rank"] is None


def test_pyspy_error_text_is_a_problem_not_a_crash():
    src, res = _parse("pyspy_error_not_python.txt")
    assert not res.rows.get("stacks")
    assert any("Failed to find python version" in p for p in res.problems)


def test_wandb_031_blocked_log():
    rows = _rows("pyspy_wandb_0.31.0_blocked_log.txt")
    assert [r["thread_name"] for r in rows] == ["MainThread", "wandb-AsyncioManager-main", "wandb-ServiceFinalizer",
                                                "OtelPeriodicExportingMetricReader", "OtelBatchLogRecordProcessor"]
    main = rows[0]
    assert main["frames"][0] == {"func": "Condition.wait", "file": "threading.py", "line": 327}
    assert st.classify_frames(main["frames"]) == "logging"
    assert st.blocking_frame(main["frames"])["func"] == "AsyncioManager.run"
    assert st.last_user_frame(main["frames"])["func"] == "log_metrics"


def test_same_process_dumped_twice_gives_two_dumps(tmp_path):
    one = open(os.path.join(FIX, "pyspy_dump.txt")).read()
    headless = one.split("\n\n", 1)[1]
    for text in (one + one, headless + headless):
        rows = parse_pyspy_text(_tmp_source(tmp_path, "twice.txt", text)).rows["stacks"]
        assert len(rows) == 4 and len({r["dump"] for r in rows}) == 2


def test_concatenated_json_dumps_and_truncated_json(tmp_path):
    data = open(os.path.join(FIX, "pyspy_dump.json")).read()
    rows = parse_pyspy_json(_tmp_source(tmp_path, "two.json", data + "\n" + data)).rows["stacks"]
    assert len(rows) == 4 and len({r["dump"] for r in rows}) == 2
    cut = data[: data.index('"thread_name": "MainThread"')]  # second thread object cut off
    res = parse_pyspy_json(_tmp_source(tmp_path, "cut.json", cut))
    assert len(res.rows["stacks"]) == 1 and any("truncated" in p for p in res.problems)


@pytest.mark.parametrize("data", [
    b"\x00\xff" * 5000, "[1, 2, {\"frames\": 3}]", "[{\"pid\": \"x\", \"frames\": [{\"name\": null, \"line\": -1}]}]",
    "[{", "{\"thread_id\": 1, \"frames\": []}", "[[[[[[[[[[[[[[]]]]]]]]]]]]]]",
], ids=["binary", "not-threads", "wrong-types", "cut", "object", "nested"])
def test_hostile_json_never_raises(tmp_path, data):
    src = _tmp_source(tmp_path, "bad.json", data, kind="pyspy_json")
    res = parse_pyspy_json(src)
    for row in res.rows.get("stacks", []):
        assert isinstance(row["frames"], list)


@pytest.mark.parametrize("data", [
    b"\x00garbage\xff\xfe" * 1000,
    "    frame_without_thread (x.py:1)\n" * 100,
    "Thread 1 (idle)\n" + "    f (x.py:1)\n" * 20000,
    "Process 1: x\nThread 1 (idle)\n" + "            a: b\n" * 1000,
    "Thread (idle)\nThread 1 (busy)\nProcess x: y\nParent Process: z\n",
], ids=["binary", "frames-without-thread", "deep-stack", "many-locals", "broken-headers"])
def test_hostile_text_never_raises(tmp_path, data):
    res = parse_pyspy_text(_tmp_source(tmp_path, "bad.txt", data, kind="pyspy"))
    for row in res.rows.get("stacks", []):
        assert len(row["frames"]) <= st.MAX_FRAMES


def test_ten_megabytes_of_thread_lines_are_capped(tmp_path):
    line = "Thread 123 (idle): \"MainThread\"\n"
    src = _tmp_source(tmp_path, "threads.txt", line * (10 * 1024 * 1024 // len(line)), kind="pyspy")
    res = parse_pyspy_text(src)
    assert len(res.rows["stacks"]) == MAX_ROWS
    assert any("not kept" in p for p in res.problems)


@pytest.mark.parametrize("loc,want", [
    ("train.py:12", ("train.py", 12)), ("C:/x/a.py:7", ("C:/x/a.py", 7)), ("a:b:3", ("a:b", 3)),
    ("libc.so.6", ("libc.so.6", None)), ("f.py:", ("f.py:", None)), ("x.py:1\u00b2", ("x.py:1\u00b2", None)),
    ("x.py:\u0661\u0662", ("x.py", 12)), ("x.py:12\n", ("x.py", 12)), ("<frozen runpy>:88", ("<frozen runpy>", 88)),
])
def test_parse_frame_location(loc, want):
    from postmortem.parsers.pyspy import LOC_LINE_RE, parse_frame
    frame = parse_frame("f", loc)
    assert (frame["file"], frame["line"]) == want
    m = LOC_LINE_RE.match(loc)  # the regex the split stands in for
    assert (m.group("file"), int(m.group("line"))) == want if m else frame["line"] is None

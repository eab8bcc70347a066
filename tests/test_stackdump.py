"""gdb bt/py-bt, hanging_threads and faulthandler dumps -> stacks rows (real dumps in tests/fixtures/stacks)."""
from __future__ import annotations

import os

import pytest

from postmortem.parsers import base, embedded, stackdump, textlog
from postmortem.parsers.pyspy import MAX_ROWS
from postmortem.parsers.stackdump import parse_rank_log_faulthandler, parse_stack_dump
from postmortem import stacks as st
from postmortem.ingest.discover import Source, discover, sniff_kind

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "stacks")


def _src(name: str) -> Source:
    return discover(os.path.join(FIX, name))[0]


def _rows(name: str) -> list[dict]:
    src = _src(name)
    fn = parse_rank_log_faulthandler if src.kind == "rank_log" else parse_stack_dump
    return fn(src).rows.get("stacks", [])


def _tmp(tmp_path, name: str, data, kind: str | None = None) -> Source:
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    src = discover(str(path))[0]
    if kind:
        src.kind = kind
    return src


@pytest.mark.parametrize("name,kind", [
    ("pin_memory_deadlock_gdb_pybt.txt", "stack_dump"), ("tqdm_monitor_lock_hanging_threads.txt", "stack_dump"),
    ("gpu_lost_gdb_bt_hung_worker.txt", "stack_dump"), ("gdb_py311_thread_apply_all_pybt_and_bt.txt", "stack_dump"),
    ("gdb_py311_thread_apply_all_bt_nosymbols.txt", "stack_dump"), ("faulthandler_py311_dump_later.txt", "stack_dump"),
    # a faulthandler dump at the end of an ordinary log stays a rank log (its own parser extracts the dump)
    ("rank1_faulthandler_segv.log", "rank_log"), ("rank1_faulthandler_segv_py313.log", "rank_log"),
])
def test_discovery_kinds(name, kind):
    assert _src(name).kind == kind


def test_kinds_and_registration():
    from postmortem.ingest.discover import KINDS
    assert "stack_dump" in KINDS
    assert textlog.parse_textlog in base._REGISTRY["stack_dump"]  # the line parser still runs on dumps
    assert stackdump.parse_stack_dump in base._REGISTRY["stack_dump"]
    assert stackdump.parse_rank_log_faulthandler in base._REGISTRY["rank_log"]
    assert sniff_kind(b"step 1 loss 2.0\nstep 2 loss 1.9\n", "x.log") == "rank_log"


def test_gdb_pybt_pin_memory_deadlock():
    rows = _rows("pin_memory_deadlock_gdb_pybt.txt")
    assert len(rows) == 1
    r = rows[0]
    assert r["thread"] == "30756"  # LWP from `[Switching to thread 12 (Thread 0x... (LWP 30756))]`
    assert r["frames"] == [
        {"func": "poll", "file": "../sysdeps/unix/syscall-template.S", "line": 81, "native": True},
        {"func": "get", "file": "/av/lib/third_party/python2.7/multiprocessing/queues.py", "line": 131}]
    assert r["signature"] == "get (multiprocessing/queues.py)"
    assert st.classify_frames(r["frames"]) == "data_loading"


def test_hanging_threads_tqdm_monitor():
    rows = _rows("tqdm_monitor_lock_hanging_threads.txt")
    assert len(rows) == 1
    r = rows[0]
    assert r["thread"] == "7592"
    assert [f["func"] for f in r["frames"]] == ["acquire", "__enter__", "run", "_bootstrap_inner", "_bootstrap"]
    assert r["frames"][0]["line"] == 83
    assert r["signature"].endswith("run (tqdm/_monitor.py);__enter__ (tqdm/_tqdm.py);acquire (tqdm/_tqdm.py)")
    assert st.classify_frames(r["frames"]) == "logging"


def test_gdb_native_bt_cut_at_frame_11():
    rows = _rows("gpu_lost_gdb_bt_hung_worker.txt")
    assert len(rows) == 1
    frames = rows[0]["frames"]
    assert len(frames) == 11  # `#11 0x00007f87` (cut off) is dropped
    assert frames[0]["func"] == "sched_yield" and frames[1]["file"] == "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
    assert frames[-1]["func"] == "cudaLaunchKernel" and frames[-1]["file"].endswith("libcudart.so.12")
    assert all(f["native"] for f in frames)
    assert st.classify_frames(frames) == "compute"
    assert st.blocking_frame(frames)["func"] == "cudaLaunchKernel"
    assert rows[0]["signature"] == "cudaLaunchKernel (libcudart.so.12);sched_yield (syscall-template.S)"


def test_gdb_thread_apply_all_pybt_and_bt_merge_per_thread():
    rows = _rows("gdb_py311_thread_apply_all_pybt_and_bt.txt")
    assert [(r["pid"], r["thread"]) for r in rows] == [(27028, "27031"), (27028, "27028")]
    assert len({r["dump"] for r in rows}) == 1
    loader, main = rows
    funcs = [f["func"] for f in loader["frames"]]
    # native frames above the interpreter, then py-bt's Python frames
    assert funcs[0] == "__futex_abstimed_wait_common64" and "lock_PyThread_acquire_lock" in funcs
    assert funcs[-6:] == ["wait", "get", "data_worker", "run", "_bootstrap_inner", "_bootstrap"]
    assert [f["func"] for f in main["frames"]][-3:] == ["train_step", "main", "<module>"]
    assert st.blocking_frame(loader["frames"])["func"] == "wait"


def test_one_stack_has_one_signature_in_pyspy_gdb_and_faulthandler():
    from postmortem.parsers.pyspy import parse_pyspy_text
    pyspy = parse_pyspy_text(_src("pyspy_py311_hang_threads.txt")).rows["stacks"]
    gdb = _rows("gdb_py311_thread_apply_all_pybt_and_bt.txt")
    fh = _rows("faulthandler_py311_dump_later.txt")
    want = {r["signature"] for r in pyspy}
    assert {r["signature"] for r in gdb} == want
    assert {r["signature"] for r in fh} == want


def test_gdb_without_python_symbols_still_gives_threads():
    rows = _rows("gdb_py311_thread_apply_all_bt_nosymbols.txt")
    assert [(r["pid"], r["thread"], r["thread_name"]) for r in rows] == [(26090, "26092", "python3.11"),
                                                                          (26090, "26090", "python3.11")]
    assert rows[1]["frames"][0]["func"] == "__GI___clock_nanosleep"
    assert st.classify_frames(rows[1]["frames"]) == "sleep_lock"
    assert st.main_thread_rows(rows) == [1]  # tid == pid


def test_faulthandler_dump_later():
    rows = _rows("faulthandler_py311_dump_later.txt")
    assert [(r["thread"], r["line"], len(r["frames"])) for r in rows] == [
        ("0x00007f71021d06c0", 2, 6), ("0x00007f7103018b80", 10, 3)]
    assert rows[1]["frames"][0] == {"func": "train_step", "file": "/tmp/cap/hang_threads.py", "line": 9}
    assert st.main_thread_rows(rows) == [1]  # unnamed: the one with <module> outermost


@pytest.mark.parametrize("name", ["rank1_faulthandler_segv.log", "rank1_faulthandler_segv_py313.log"])
def test_faulthandler_inside_a_rank_log(name):
    rows = _rows(name)
    assert [r["rank"] for r in rows] == [1, 1]  # from the path
    assert rows[0]["active"] is None and rows[1]["active"] is True  # `Current thread` crashed
    assert [f["func"] for f in rows[1]["frames"]] == ["forward", "main", "<module>"]
    assert rows[0]["dump"] == rows[1]["dump"]


def test_rank_log_without_a_dump_costs_nothing(tmp_path):
    src = _tmp(tmp_path, "rank0.log", "step 1 loss 2.0\n" * 1000 + '  File "x.py", line 3 in f\n')
    res = parse_rank_log_faulthandler(src)
    assert res.rows == {} and res.lines == 0  # the byte prefilter found no header: no line was read


def test_interleaved_prefixed_dumps_of_two_ranks(tmp_path):
    # derived from the real dump: torchrun --tee prefixes, two ranks' lines interleaved
    dump = open(os.path.join(FIX, "rank1_faulthandler_segv.log")).read().splitlines()[4:]
    lines = []
    for a in dump:
        lines += [f"[default0]:{a}", f"[default1]:{a.replace('line 8 in forward', 'line 8 in backward')}"]
    src = _tmp(tmp_path, "console.txt", "\n".join(["[default0]:step 1"] * 50 + lines) + "\n")
    assert src.kind == "rank_log"
    rows = parse_rank_log_faulthandler(src).rows["stacks"]
    assert sorted((r["rank"], r["frames"][0]["func"]) for r in rows) == [
        (0, "forward"), (0, "pin_memory_loop"), (1, "backward"), (1, "pin_memory_loop")]


def test_repeated_dump_later_gives_separate_dumps(tmp_path):
    one = open(os.path.join(FIX, "faulthandler_py311_dump_later.txt")).read()
    rows = parse_stack_dump(_tmp(tmp_path, "fh.txt", one + one)).rows["stacks"]
    assert len(rows) == 4 and len({r["dump"] for r in rows}) == 2


def test_native_frame_text_forms():
    p = stackdump.parse_native
    assert p("?? () from /usr/lib/libcuda.so.1") == {"func": "??", "file": "/usr/lib/libcuda.so.1", "line": None,
                                                     "native": True}
    assert p("c10d::ProcessGroupNCCL::WorkNCCL::wait (this=0x1, timeout=...) at ProcessGroupNCCL.cpp:530")["func"] == \
        "c10d::ProcessGroupNCCL::WorkNCCL::wait"
    assert p("0x00007f87") is None and p("") is None


@pytest.mark.parametrize("data", [
    b"\x00\x01garbage\xff" * 2000,
    "#0  \n#1 0x in\n#2 Frame 0x1, for file\n(gdb) py-bt\n#3 Frame 0x1, for file x.py, line 1, in f (\n",
    "---------  Thread 1 hangs  ----------\n" * 5000,
    "Thread 0x1 (most recent call first):\n" + '  File "x.py", line 1 in f\n' * 10000,
    "Current thread's C stack trace (most recent call first):\n  Binary file \"/x\" [0x1]\n",
    "[Switching to thread 1 (Thread 0x1 (LWP 2))]\n" + "   from /lib/x.so\n" * 100,
], ids=["binary", "broken-gdb-frames", "hang-headers", "deep-faulthandler", "c-stack-alone", "from-lines"])
def test_hostile_input_never_raises(tmp_path, data):
    src = _tmp(tmp_path, "bad.txt", data, kind="stack_dump")
    for fn in (parse_stack_dump, parse_rank_log_faulthandler):
        res = fn(src)
        for row in res.rows.get("stacks", []):
            assert len(row["frames"]) <= st.MAX_FRAMES


def test_ten_megabytes_of_thread_headers_are_capped(tmp_path):
    line = "Thread 0x00007f71021d06c0 (most recent call first):\n"
    src = _tmp(tmp_path, "many.txt", line * (10 * 1024 * 1024 // len(line)), kind="stack_dump")
    res = parse_stack_dump(src)
    assert len(res.rows.get("stacks", [])) == MAX_ROWS
    assert any("not kept" in p for p in res.problems)


@pytest.mark.parametrize("shape", ["plain", "prefixed", "gzip"])
def test_faulthandler_dump_inside_a_big_rank_log(tmp_path, shape):
    """A big log is read once: its faulthandler header is a trigger of the line parser's scan, which hands the file
    to the faulthandler parser (no second whole-file read for logs without a dump)."""
    import gzip
    dump = open(os.path.join(FIX, "rank1_faulthandler_segv.log")).read().splitlines()[4:]
    body = [f"step {i} loss {1 / (i + 1):.4f}" for i in range(30000)] + dump + ["after the dump"] * 10
    if shape == "prefixed":
        body = [f"[default1]:{ln}" for ln in body]
    data = ("\n".join(body) + "\n").encode()
    assert len(data) > 256 * 1024
    name = "rank1.log.gz" if shape == "gzip" else "rank1.log"
    src = _tmp(tmp_path, name, gzip.compress(data) if shape == "gzip" else data)
    assert src.kind == "rank_log"
    assert parse_rank_log_faulthandler(src).rows == {}  # not read again by the rank-log parser
    rows = base.parse_source(src).rows["stacks"]
    assert [f["func"] for f in rows[-1]["frames"]] == ["forward", "main", "<module>"]
    assert rows[-1]["active"] is True and rows[-1]["line"] == 30000 + 9  # its `Current thread` header


def test_big_rank_log_without_a_dump_hands_no_stack(tmp_path):
    src = _tmp(tmp_path, "rank0.log", "".join(f"step {i} loss 2.0\n" for i in range(40000))
               + 'Thread 7 started loading (most recent call first): no\n'
               + "Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:635 "
                 "(most recent call first):\nframe #0: c10::Error::Error() + 0x1 (0x7f in libc10.so)\n")
    assert src.kind == "rank_log"
    assert embedded.marker_kind("Exception raised from f at x.cpp:1 (most recent call first):") is None
    # near misses: the header's words mid-line; a C++ error's backtrace header (after every NCCL watchdog timeout)
    assert not base.parse_source(src).rows.get("stacks")

"""Discovery: kinds sniffed from content, path hints, unreadable inputs listed with a reason."""
from __future__ import annotations

import gzip
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from postmortem.ingest import discover as discover_mod
from postmortem.ingest.discover import discover, path_hints, sniff_kind


@pytest.mark.parametrize("rel,want", [
    ("logs/run_x/attempt_1/3/stdout.log", {"local_rank": 3, "attempt": 1}),
    ("rank7.log", {"rank": 7}), ("out/rank_12/stderr.txt", {"rank": 12}),
    ("nccl_trace_rank_5", {"rank": 5}), ("slurm-123456.out", {}),
    ("nccl.gpu-node-07.12345", {"host": "gpu-node-07", "pid": 12345}),
])
def test_path_hints(rel, want):
    assert path_hints(rel) == want


@pytest.mark.parametrize("head,kind", [
    (b"Process 5496: python sleeper.py\nPython v3.11.7 (/usr/bin/python)\n\nThread 5496 (idle): \"MainThread\"\n", "pyspy"),
    (b'[{"pid": 1, "thread_id": 2, "frames": []}]', "pyspy_json"),
    (b'{"message": {"message": "x", "extraInfo": {"py_callstack": "", "timestamp": "1"}}}', "torchrun_error"),
    (b'{"version": "2.10", "pg_config": {}, "entries": []}', "flight_recorder"),
    (b"\x80\x04\x95\x10\x00\x00", "flight_recorder"),
    (b"+-----+\n| NVIDIA-SMI 535.129.03   Driver Version: 535.129.03   CUDA Version: 12.2 |\n", "nvidia_smi"),
    (b"h:1:2 [0] NCCL INFO a\nh:1:2 [0] NCCL INFO b\nh:1:2 [0] NCCL INFO c\n", "nccl_log"),
    (b"[2059991.491542] Out of memory: Killed process 25315 (python3)\n", "dmesg"),
    (b'{\n  "title": "metadata, not a log",\n  "x": 1\n}\n', "json"),
    (b'{"time":"2026-11-21T13:22:28Z","level":"INFO","msg":"a"}\n{"time":"x","level":"INFO","msg":"b"}\n', "rank_log"),
    (b"\x00\x01\x02\x03" * 300, "binary"),
    (b"step 1 loss 2.0\n", "rank_log"),
])
def test_sniff_kind(head, kind):
    assert sniff_kind(head, "f") == kind


def test_tree_with_gz_binary_json_and_empty(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "rank0.log.gz").write_bytes(gzip.compress(b"step 1 loss 2\n"))
    (tmp_path / "blob.bin").write_bytes(os.urandom(4096).replace(b"\n", b"\x00") + b"\x00" * 500)
    (tmp_path / "case.json").write_text(json.dumps({"title": "x", "y": [1, 2]}, indent=2))
    (tmp_path / "empty.log").write_text("")
    got = {s.source: s for s in discover(str(tmp_path))}
    assert got["a/rank0.log.gz"].compression == "gzip" and got["a/rank0.log.gz"].rank == 0
    assert got["blob.bin"].kind == "binary" and "binary" in got["blob.bin"].problem
    assert got["case.json"].kind == "json" and got["case.json"].problem
    assert got["empty.log"].problem is None
    assert list(got) == sorted(got)


def test_symlink_loop_and_fifo_listed_not_followed(tmp_path):
    (tmp_path / "d").mkdir()
    os.symlink(str(tmp_path), str(tmp_path / "d" / "loop"))
    os.mkfifo(str(tmp_path / "fifo"))
    got = {s.source: s for s in discover(str(tmp_path))}
    assert "FIFO" in got["fifo"].problem
    assert any("loop" in (s.problem or "") for s in got.values())


def test_missing_path_raises():
    with pytest.raises(FileNotFoundError):
        discover("/nonexistent/postmortem/path")


# ---- the fast sniff (literal gates, newline-anchored copies of the line regexes) decides as the plain cascade

def _plain_sniff_kind(head: bytes, relpath: str, _stripped: bool = False) -> str:
    """sniff_kind as a plain cascade: every regex over the whole head, no gates (the reference)."""
    d = discover_mod
    name = relpath.rsplit("/", 1)[-1].lower()
    if not head:
        return "rank_log"
    if head[:1] == b"\x80" and len(head) > 2 and head[1] <= 5:
        return "flight_recorder"
    if d._looks_binary(head):
        return "binary"
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"["):
        kind = d._sniff_json(stripped)
        if kind:
            return kind
        if d._is_json_document(stripped):
            return "json"
    if d._SMI_TEXT.search(head) and (b"NVIDIA-SMI" in head or b"nvidia_smi_log" in head or b"NVSMI" in head
                                     or b"memory.used" in head or head.count(b"\n") < 40):
        return "nvidia_smi"
    lines = head.count(b"\n") + 1
    if len(d._SMI_ROWS.findall(head)) * 3 >= lines or d._SMI_CSV.search(head):
        return "nvidia_smi"
    if d._FREE_HDR.search(head) or d._VMSTAT_HDR.search(head):
        mem_lines = sum(len(rx.findall(head)) for rx in (d._FREE_HDR, d._FREE_ROW, d._VMSTAT_HDR, d._VMSTAT_ROW))
        if mem_lines * 2 >= len([ln for ln in head.splitlines() if ln.strip()]):
            return "host_memory"
    if len(d._PYSPY_TEXT.findall(head)) >= 1 and (b"Python v" in head or b"Thread " in head[:200]):
        return "pyspy"
    if d._PYSPY_ERROR.match(stripped) and (b"py_spy::" in head or b"target process" in head
                                           or stripped.startswith(b"Permission Denied")):
        return "pyspy"
    gdb_hang = d._GDB_HANG_HDR.search(head)
    if gdb_hang or d._FH_HDR.search(head):
        body = [ln for ln in head.splitlines() if ln.strip()]
        if len(d._STACK_LINE.findall(head)) * 5 >= len(body) * 2 and (gdb_hang or d._FH_FIRST.match(body[0])):
            return "stack_dump"
    if d._headless_stack(head):
        return "pyspy"
    if len(d._NCCL_LINE.findall(head)) >= max(2, lines // 2):
        return "nccl_log"
    if len(d._DMESG_LINE.findall(head)) >= max(1, lines // 2) or "dmesg" in name or name in ("syslog", "kern.log"):
        return "dmesg"
    if not _stripped:
        from postmortem.parsers.learned_prefix import strip_head
        bare = strip_head(head)
        if bare != head and _plain_sniff_kind(bare, relpath, True) in ("pyspy", "stack_dump", "nccl_log"):
            return _plain_sniff_kind(bare, relpath, True)
    return "rank_log"


# Lines of every shape the cascade looks for, with the blank-line and indentation variants the `^\s*` patterns see.
_SNIFF_LINES = [
    b"h:1:2 [0] NCCL INFO Bootstrap : Using eth0", b"[1700000000.1] host:12:34 [3] NCCL WARN Cuda failure",
    b"[2059991.491542] Out of memory: Killed process 25315 (python3)", b"May 15 23:09:30 node7 kernel: NVRM: Xid 79",
    b"2024-05-01T10:00:00,123+00:00 node kernel: x", b"[Mon May 15 23:09:30 2023] NVRM: Xid",
    b"Process 5496: python train.py", b"Python v3.11.7 (/usr/bin/python)", b"Thread 5496 (idle): \"MainThread\"",
    b"    all_gather (torch/distributed/distributed_c10d.py:3707)", b"Error: Failed to get process executable name",
    b"(gdb) bt", b"#0  0x00007f in __futex_abstimed_wait", b"#4 Frame 0x7f, for file x.py, line 3",
    b"--- Thread 1 (main) hangs ---", b"Thread 2 (Thread 0x7f (LWP 12)):", b"[Switching to thread 2]",
    b"Fatal Python error: Aborted", b"Current thread 0x00007f (most recent call first):",
    b"Thread 0x00007f [python] (most recent call first):", b"Stack (most recent call first):",
    b'  File "train.py", line 3 in main', b"Timeout (0:10:00)!",
    b"               total        used        free      shared  buff/cache   available",
    b"total        used        free      shared  buff/cache   available",  # `^\s+total` from the blank line above
    b"Mem:          515890       41234      400000        1234       74656      470000", b"Swap:  0 0 0",
    b"procs -----------memory---------- ---swap-- -----io---- -system-- ------cpu-----",
    b" r  b   swpd   free   buff  cache   si   so    bi    bo   in   cs us sy id wa st",
    b" 1  0      0 400000  1000 74656    0    0     0     0  100  200  5  1 94  0  0",
    b"timestamp, index, name, pci.bus_id, memory.used [MiB], memory.total [MiB]", b"index, memory.used",
    b"2025/06/01 15:03:44.970, 0, NVIDIA H100, 00000000:18:00.0, 61864 MiB, 81559 MiB",
    b"$ nvidia-smi --query-gpu=index,memory.used --format=csv", b"| NVIDIA-SMI 535.129.03   Driver Version: 535",
    b"|   0  GeForce GTX 1080    Off  | 00000000:01:00.0  On |                  N/A |",
    b"| 58%   70C    P2    67W / 200W |   1906MiB /  8111MiB |     19%      Default |",
    b"Unable to determine the device handle for GPU0000:03:00.0: Unknown Error", b"No devices were found",
    b"per_device_train_batch_size=8", b"Steps:   7%|\xe2\x96\x8b   | 15980/225000 [2:28:04<32:16:51,  1.80it/s]",
    b"[2025-06-01 12:00:03,000] [INFO] [train.py:88:main] config", b"W0601 12:00:00.000000 4000 run.py:792] x",
    b"", b" ", b"\t", b"\r", b"  ", b"\x1c",
]


def _sniff_heads():
    fix = os.path.join(os.path.dirname(__file__), "fixtures")
    for dirpath, _, files in os.walk(fix):
        for f in sorted(files):
            with open(os.path.join(dirpath, f), "rb") as fh:
                yield fh.read(16384)
    for i, ln in enumerate(_SNIFF_LINES):
        for pre in (b"", b"\n", b"\n\n", b"x\n", b"x\n\n", b"  \n"):
            for n in (1, 2, 5):
                yield pre + b"\n".join([ln] * n)
            yield pre + ln + b"\n" + _SNIFF_LINES[(i * 7 + 3) % len(_SNIFF_LINES)] + b"\n" + ln


@pytest.mark.parametrize("name", ["f", "x/dmesg.txt", "kern.log"])
def test_fast_sniff_decides_as_the_plain_cascade(name):
    heads = list(_sniff_heads())
    assert len(heads) > 500
    for head in heads:
        assert sniff_kind(head, name) == _plain_sniff_kind(head, name), head[:200]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_SNIFF_LINES), min_size=0, max_size=30),
       st.sampled_from([b"\n", b"\r\n", b"\n\n"]), st.sampled_from([b"", b"\n", b" ", b"  \n"]))
def test_fast_sniff_decides_as_the_plain_cascade_on_mixed_lines(lines, sep, pre):
    head = pre + sep.join(lines)
    assert sniff_kind(head, "f") == _plain_sniff_kind(head, "f")


def test_newline_anchored_copies_match_the_same_lines():
    d = discover_mod
    gated = [d._SNIFF_CSV_HDR_NL, d._SNIFF_MEM_HDR_NL, d._SNIFF_PYSPY_NL, d._SNIFF_FH_NL, d._SNIFF_GDB_NL]
    for head in _sniff_heads():
        padded = b"\n" + head
        assert len(d._NCCL_LINE.findall(head)) == len(d._SNIFF_NCCL_NL.findall(padded))
        assert len(d._DMESG_LINE.findall(head)) == len(d._SNIFF_DMESG_NL.findall(padded))
        assert bool(d._PYSPY_TEXT.search(head)) == bool(d._SNIFF_PYSPY_NL.search(padded))
        assert bool(d._GDB_HANG_HDR.search(head)) == bool(d._SNIFF_GDB_NL.search(padded))
        assert bool(d._FREE_HDR.search(head) or d._VMSTAT_HDR.search(head)) == bool(d._SNIFF_MEM_HDR_NL.search(padded))
        if any(rx.search(padded) for rx in gated):
            assert d._SNIFF_GATE_NL.search(padded), head[:200]

"""Discovery: kinds sniffed from content, path hints, unreadable inputs listed with a reason."""
from __future__ import annotations

import gzip
import json
import os

import pytest

from postmortem.discover import discover, path_hints, sniff_kind


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

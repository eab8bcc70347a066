"""Joins: kernel-OOM-killed pids to ranks via torchrun's exit lines; PCI bus ids across tools."""
from __future__ import annotations

import os
import shutil

import pytest

from postmortem.parsers.base import parse_source
from postmortem.tables import build as tables
from postmortem.ingest.discover import discover
from postmortem.tables.joins import join_killed_pids, normalize_bus_id

FIX = os.path.join(os.path.dirname(__file__), "fixtures")
SUMMARY = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
======================================================
train.py FAILED
------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-21_13:19:02
  host      : node2
  rank      : 4 (local_rank: 0)
  exitcode  : -15 (pid: 25316)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 25316
------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-21_13:19:02
  host      : node2
  rank      : 5 (local_rank: 1)
  exitcode  : -9 (pid: 25315)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 25315
======================================================
"""
AGENT = ("E1121 13:19:02.979000 8093 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) "
         "local_rank: 1 (pid: 25315) of binary: /usr/bin/python3\n")


def build(tmp_path, console: str):
    shutil.copy(os.path.join(FIX, "dmesg", "raw_wrapped_global_oom_python3.txt"), tmp_path / "dmesg.txt")
    (tmp_path / "console.log").write_text(console)
    sources = discover(str(tmp_path))
    return tables.build(sources, [parse_source(s) for s in sources])


def test_summary_block_gives_the_global_rank(tmp_path):
    assert join_killed_pids(build(tmp_path, AGENT + SUMMARY)) == {25315: 5}


def test_agent_line_alone_gives_the_local_rank(tmp_path):
    assert join_killed_pids(build(tmp_path, AGENT)) == {25315: 1}


def test_no_torchrun_line_or_other_signal_no_join(tmp_path):
    assert join_killed_pids(build(tmp_path, "step 3 loss 1.0\n")) == {}
    assert join_killed_pids(build(tmp_path, AGENT.replace("-9", "-15"))) == {}


@pytest.mark.parametrize("raw,want", [
    ("0000:3b:00", "00000000:3B:00.0"), ("00000000:3B:00.0", "00000000:3B:00.0"), ("PCI:0000:10:1c", "00000000:10:1C.0"),
    ("GPU0000:03:00.0", "00000000:03:00.0"), ("0001:b3:00.1", "00000001:B3:00.1"), ("nonsense", None), (None, None),
])
def test_normalize_bus_id(raw, want):
    assert normalize_bus_id(raw) == want

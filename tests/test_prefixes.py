"""Launcher prefixes stack and are stripped left to right (FORMATS.md §0, §5)."""
from __future__ import annotations

import pytest

from parsers.prefixes import PrefixError, load_prefixes, strip_prefixes


@pytest.mark.parametrize("line,msg,rank", [
    ("[default1]:[rank1]: ValueError: corrupt sample at step 3", "ValueError: corrupt sample at step 3", 1),
    ("[rank4]:[E318 07:39:53.792630246 ProcessGroupNCCL.cpp:616] x", "[E318 07:39:53.792630246 ProcessGroupNCCL.cpp:616] x", 4),
    ("[1,3]<stdout>:test-nccl-efa-worker-0:23:75 [3] NCCL INFO Connected", "test-nccl-efa-worker-0:23:75 [3] NCCL INFO Connected", 3),
    ("[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] y", "[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] y", 0),
    ("[rank: 1] Child process with PID 5 terminated with code 1.", "Child process with PID 5 terminated with code 1.", 1),
])
def test_stacked_prefixes(line, msg, rank):
    out, info = strip_prefixes(line)
    assert out == msg
    assert info.get("rank", info.get("local_rank")) == rank


def test_level_read_from_c10_prefix():
    _, info = strip_prefixes("[rank0]:[W1121 13:25:48.076492005 reducer.cpp:1529] Warning: find_unused_parameters")
    assert info["level"] == "W"


def test_timestamp_prefix():
    msg, info = strip_prefixes("[2024-05-08 08:47:31,261] torch.distributed.elastic: [WARNING] x")
    assert info["ts"] == "2024-05-08 08:47:31,261" and msg.startswith("torch.distributed")


def test_plain_line_untouched():
    assert strip_prefixes("RuntimeError: boom") == ("RuntimeError: boom", {})


def test_prefix_with_bad_sample_refused():
    with pytest.raises(PrefixError):
        load_prefixes([{"name": "x", "pattern": r"\[x(?P<rank>\d+)\]", "samples": [("[y1] z", {"rank": "1"})]}])

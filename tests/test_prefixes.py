"""Launcher prefixes stack and are stripped left to right (FORMATS.md §0, §5)."""
from __future__ import annotations

import pytest

from postmortem.parsers.prefixes import PrefixError, load_prefixes, strip_prefixes


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


def _plain_strip(line: str) -> tuple[str, dict]:
    """strip_prefixes as a loop over the prefixes, one match each (the reference for the combined regex)."""
    from postmortem.parsers import prefixes as p
    info: dict = {}
    msg = line
    for _ in range(8):
        if not msg or msg[0] not in p._FIRST_CHARS:
            break
        found = p._first_prefix_match(msg)
        if found is None:
            break
        g = found.groupdict()
        if g.get("rank") is not None and "rank" not in info:
            info["rank"] = int(g["rank"])
        if g.get("local_rank") is not None and "local_rank" not in info:
            info["local_rank"] = int(g["local_rank"])
        for key in ("host", "pid"):
            if g.get(key) and key not in info:
                info[key] = g[key]
        if g.get("ts"):  # of stacked stamps the innermost is the line's own time
            info["ts"] = g["ts"]
        msg = msg[found.end():]
    m = p._level(msg)
    if m is not None:
        info["level"] = m.group("level")
        if "ts" not in info and m.group("mmdd"):
            info["ts"] = f"--{m.group('mmdd')[:2]}-{m.group('mmdd')[2:]}T{m.group('hms')}{m.group('frac')}"
    return msg, info


_PREFIXES = ["[rank3]:", "[rank3]: ", "[default0]:", "[trainer12]:", "[1,3]<stdout>:", "[1,0][node1:123]<stderr>:",
             "[rank: 2] ", "[Rank 4] ", "[RANK 5]: ", "(RayWorkerWrapper pid=1019, ip=10.0.0.1) ", "[80746] ",
             "stderr: ", "stdout: ", "[2024-05-08 08:47:31,261] ", "2023-07-26 04:37:11.717 | ",
             "2024-01-02T03:04:05Z ", "Nov 20 16:03:25 ", "May 15 23:09:30 node7 ", "[12] x", "[rank", "(x) ",
             "2024-13", "Sep ", "1234 "]


@pytest.mark.parametrize("first", _PREFIXES)
def test_combined_prefix_regex_strips_as_the_plain_loop(first):
    for second in _PREFIXES:
        for rest in ("RuntimeError: boom", "[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] y", "kernel: x", ""):
            line = first + second + rest
            assert strip_prefixes(line) == _plain_strip(line), line

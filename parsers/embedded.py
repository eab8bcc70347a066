"""Structured dumps inside an ordinary log: an nvidia-smi table, a gdb session, a py-spy dump, `free`/`vmstat` snapshots printed
into the same console (or captured after start-up output), which the file's first bytes did not announce.

(py-spy dumps too.) A raw byte scan finds their markers; only then is the file read again by the dump's own parser, and only that
parser's structured rows (GPU rows, stacks, memory samples) are kept: the log's lines stay the line parser's.
"""
from __future__ import annotations

import re

from parsers.base import ParseResult, register
from postmortem import textio
from postmortem.discover import Source

_CHUNK = 4 * 1024 * 1024
# (a literal every match holds, the marker regex, the parser that reads it): the regex runs only on a chunk that
# holds the literal, so an ordinary log costs one C-speed `in` per literal and chunk.
_MARKERS = [
    (b"NVIDIA-SMI ", re.compile(rb"NVIDIA-SMI \d"), "nvidia_smi"),
    (b"(gdb) ", re.compile(rb"(?m)^(?:\S+ )?\(gdb\) (?:bt|py-bt|thread apply all)"), "stack_dump"),
    (b"Mem: ", re.compile(rb"(?m)^(?:\S+ ){0,2}Mem: +\d+ +\d+ +\d+"), "host_memory"),
    (b"Thread ", re.compile(rb"(?m)^(?:\S+ ){0,3}Thread (?:0x[0-9A-Fa-f]+|\d+) \((?:idle|active|gil)"), "pyspy"),
]
_KEEP = {"nvidia_smi": ("gpu",), "stack_dump": ("stacks",), "host_memory": ("events",), "pyspy": ("stacks",)}


def _kinds_in(path: str) -> list[str]:
    """The dump kinds whose markers occur anywhere in the file (one streamed pass, bounded memory)."""
    found: list[str] = []
    tail = b""
    try:
        with textio.open_binary(path) as fh:
            while len(found) < len(_MARKERS):
                chunk = fh.read(_CHUNK)
                if not chunk:
                    break
                data = tail + chunk
                for literal, rx, kind in _MARKERS:
                    if kind not in found and literal in data and rx.search(data):
                        found.append(kind)
                tail = data[-256:]
    except (OSError, EOFError, textio.InputProblem):
        return found
    return found


@register("rank_log")
def parse_embedded_dumps(source: Source) -> ParseResult:
    """Rows of the structured dumps found inside a log file (GPU snapshots, native stacks, memory samples)."""
    result = ParseResult()
    kinds = _kinds_in(source.path)
    if not kinds:
        return result
    from parsers.host_memory import parse_host_memory
    from parsers.nvidia_smi import parse_nvidia_smi
    from parsers.pyspy import parse_pyspy_text
    from parsers.stackdump import parse_stack_dump
    parsers = {"nvidia_smi": parse_nvidia_smi, "stack_dump": parse_stack_dump, "host_memory": parse_host_memory,
               "pyspy": parse_pyspy_text}
    for kind in kinds:
        sub = parsers[kind](source)
        for table in _KEEP[kind]:
            for row in sub.rows.get(table, []):
                if table == "events" and row.get("kind") != "host_mem":
                    continue
                result.add(table, row)
    return result

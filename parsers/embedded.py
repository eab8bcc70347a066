"""Structured dumps inside an ordinary log: an nvidia-smi table, a gdb session, a py-spy dump (with or without its
header), `free`/`vmstat` snapshots printed into the same console or captured after start-up output, which the
file's first bytes did not announce.

Files read whole exactly (their share of the job's exact budget covers them) are scanned here for the dumps'
markers; in the others the line parser meets the marker lines (they are
triggers of the whole-file scan, so ordinary logs pay nothing) and calls `read_dumps`. Only then is the file read
again by the dump's own parser, and only that parser's structured rows (GPU rows, stacks, memory samples) are kept:
the log's lines stay the line parser's.

This module finds the dumps (no parser imported); postmortem.parsers.dumps_in_logs reads them.
"""
from __future__ import annotations

import re

from postmortem.parsers import prefilter
from postmortem.ingest import textio
from postmortem.ingest.discover import Source

SMALL = prefilter.EXACT_JOB_BYTES  # the most a file read whole exactly (its share of the exact budget) can hold
# (a literal every marker line holds: a trigger of the line parser too, the marker regex, the dump kind)
MARKERS = [
    ("NVIDIA-SMI ", re.compile(r"NVIDIA-SMI \d"), "nvidia_smi"),
    ("(gdb) ", re.compile(r"^(?:\S+ )?\(gdb\) (?:bt|py-bt|thread apply all)"), "stack_dump"),
    ("Mem: ", re.compile(r"^(?:\S+ ){0,2}Mem: +\d+ +\d+ +\d+"), "host_memory"),
    ("Thread ", re.compile(r"^(?:\S+ ){0,3}Thread (?:0x[0-9A-Fa-f]+|\d+) \((?:idle|active|gil)"), "pyspy"),
    # faulthandler's `Current thread 0x... (most recent call first):`, not the `Exception raised from X at f.cpp:N
    # (most recent call first):` of every C++ error's backtrace (big logs only: postmortem.parsers.stackdump reads small ones)
    ("(most recent call first):", re.compile(r"^(?:\S+ ){0,3}(?:(?:Current thread|Thread) 0x[0-9a-fA-F]+(?: \[[^\]]*\])?"
                                             r"|Stack|Traceback|Current thread's C stack trace) \(most recent call first\):$"),
     "faulthandler"),
]
_SMALL_ONLY_ELSEWHERE = {"faulthandler"}
# py-spy frames pasted without their header: two `func (file.py:N)` lines in a row (small files only: such
# excerpts are pasted, and `.py:` is on every warning line of a big log)
_HEADLESS = re.compile(rb"\.pyx?:\d+\)[ \t]*(?:#[^\n]*)?\n[ \t]*[\w.<>]+ +\([\w./<> -]+\.pyx?:\d+\)[ \t]*(?:#[^\n]*)?\n")


def marker_kind(line: str) -> str | None:
    """The dump kind a log line starts (or None): for the line parser, on the lines its triggers hand over."""
    for literal, rx, kind in MARKERS:
        if literal in line and rx.search(line.strip()):
            return kind
    return None


def kinds_in_small(path: str) -> list[str]:
    try:
        data = textio.read_bounded(path, SMALL + 1)
    except (OSError, textio.InputProblem):
        return []
    found = []
    for line_literal, rx, kind in MARKERS:
        if kind in _SMALL_ONLY_ELSEWHERE:
            continue
        literal = line_literal.encode()
        if literal in data and kind not in found:
            for ln in data.split(b"\n"):
                if literal in ln and rx.search(ln.decode("utf-8", "replace").strip()):
                    found.append(kind)
                    break
    if "pyspy" not in found and b".py:" in data and _HEADLESS.search(data):
        found.append("pyspy")
    return found


def read_by_line_parser(source: Source) -> bool:
    """True when the dumps inside this log are found by the line parser's triggers: a compressed file, or one the
    line parser does not read whole exactly (its share of the job's exact budget is smaller than the file)."""
    return bool(source.compression) or prefilter.exact_share(source.bytes, source.exact_bytes) < source.bytes

"""Read the structured dumps found inside an ordinary log (postmortem.parsers.embedded finds them) with each dump's
own parser, keeping only that parser's structured rows."""
from __future__ import annotations

from postmortem.parsers.base import ParseResult, register
from postmortem.parsers.embedded import kinds_in_small, read_by_line_parser
from postmortem.ingest.discover import Source

_KEEP = {"nvidia_smi": ("gpu",), "stack_dump": ("stacks",), "host_memory": ("events",), "pyspy": ("stacks",),
         "faulthandler": ("stacks",)}


def read_dumps(source: Source, kinds) -> ParseResult:
    """Rows of the given dump kinds in a log file, each read by that dump's own parser."""
    from postmortem.parsers.host_memory import parse_host_memory
    from postmortem.parsers.nvidia_smi import parse_nvidia_smi
    from postmortem.parsers.pyspy import parse_pyspy_text
    from postmortem.parsers.stackdump import parse_faulthandler_dumps, parse_stack_dump
    parsers = {"nvidia_smi": parse_nvidia_smi, "stack_dump": parse_stack_dump, "host_memory": parse_host_memory,
               "pyspy": parse_pyspy_text, "faulthandler": parse_faulthandler_dumps}
    result = ParseResult()
    for kind in dict.fromkeys(kinds):
        sub = parsers[kind](source)
        for table in _KEEP[kind]:
            for row in sub.rows.get(table, []):
                if table == "events" and row.get("kind") != "host_mem":
                    continue
                result.add(table, row)
    return result


@register("rank_log", "nccl_log", "unknown")
def parse_embedded_dumps(source: Source) -> ParseResult:
    """Rows of the structured dumps found inside a small log file (big ones: see the line parser)."""
    if read_by_line_parser(source):
        return ParseResult()
    kinds = kinds_in_small(source.path)
    return read_dumps(source, kinds) if kinds else ParseResult()

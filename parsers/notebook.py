"""Executed Jupyter notebooks (.ipynb, nbformat 4): a run started from a notebook leaves its output in the cells'
outputs (stream text, IPython's colored tracebacks, results), not in a log file. The outputs are read in cell
order as the text a console would have shown and handed to the text-log parser."""
from __future__ import annotations

import dataclasses
import os
import re
import tempfile

from postmortem.parsers.base import ParseResult, register
from postmortem.parsers.safeload import loads_json
from postmortem.ingest import textio
from postmortem.ingest.discover import Source

MAX_NOTEBOOK_BYTES = 256 * 2 ** 20  # a notebook is loaded whole (JSON); bigger ones are refused with a problem
# IPython colours its tracebacks with ANSI escapes (SGR, and cursor controls in some frontends)
_ANSI = re.compile(r"\x1b\[[0-9;?]{0,32}[A-Za-z]|\x1b\][^\x07\n]{0,256}\x07")


def _text(value) -> str:
    """nbformat stores multi-line strings as a str or a list of str."""
    if isinstance(value, list):
        return "".join(v for v in value if isinstance(v, str))
    return value if isinstance(value, str) else ""


def notebook_text(nb) -> str:
    """The console text of a notebook's outputs, cell by cell: streams as printed, errors as IPython's traceback
    (escapes removed), results' text/plain. Anything not of nbformat's shape is skipped."""
    out: list[str] = []
    cells = nb.get("cells") if isinstance(nb, dict) else None
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict):
            continue
        for o in cell.get("outputs") or []:
            if not isinstance(o, dict):
                continue
            kind = o.get("output_type")
            if kind == "stream":
                out.append(_text(o.get("text")))
            elif kind == "error":
                tb = o.get("traceback")
                lines = [t for t in tb if isinstance(t, str)] if isinstance(tb, list) else []
                if not lines:
                    lines = [f"{o.get('ename', 'Error')}: {o.get('evalue', '')}"]
                out.append(_ANSI.sub("", "\n".join(lines)) + "\n")
            elif kind in ("execute_result", "display_data"):
                data = o.get("data")
                if isinstance(data, dict):
                    out.append(_text(data.get("text/plain")) + "\n")
    text = "".join(s if s.endswith("\n") or not s else s + "\n" for s in out)
    return _ANSI.sub("", text)


@register("notebook")
def parse_notebook(source: Source) -> ParseResult:
    """The notebook's outputs parsed as a text log (rows keep the notebook's display path)."""
    from postmortem.parsers.textlog import parse_textlog  # textlog registers itself at import; imported when first needed
    stats = textio.ReadStats()
    try:
        data = textio.read_bounded(source.path, MAX_NOTEBOOK_BYTES, stats)
        try:
            # (not strict: a notebook whose outputs carry raw escape codes, written by a tool that did not escape
            # them, is still its outputs)
            nb = loads_json(data, strict=False)
        except ValueError:
            unstamped = _without_line_stamps(data)
            if unstamped is None:
                raise
            nb = loads_json(unstamped, strict=False)
    except ValueError as exc:  # not JSON (truncated, empty, or a .ipynb that is something else): say so, go on
        return ParseResult(bytes=source.bytes, problems=[f"not a readable notebook: {type(exc).__name__}: "
                                                         f"{str(exc)[:120]}"])
    text = notebook_text(nb)
    fd, tmp = tempfile.mkstemp(prefix="postmortem-nb-", suffix=".log")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        sub = dataclasses.replace(source, path=tmp, kind="rank_log", compression=None,
                                  bytes=len(text.encode("utf-8")), exact_bytes=None)
        result = parse_textlog(sub)
    finally:
        os.unlink(tmp)
    result.bytes = source.bytes
    return result


def _without_line_stamps(data: bytes) -> str | None:
    """The notebook's JSON with the time stamp a log collector put before each of its lines taken off (None when
    its lines do not carry one): the file shipped through a collector is still the notebook."""
    from postmortem.parsers.prefixes import strip_prefixes
    lines = data.decode("utf-8", "replace").split("\n")
    out, stamped = [], 0
    for ln in lines:
        rest, info = strip_prefixes(ln.rstrip("\r"))
        if "ts" in info:
            stamped += 1
            out.append(ln[len(ln.rstrip("\r")) - len(rest):] if rest else "")
        else:
            out.append(ln)
    return "\n".join(out) if stamped >= 0.9 * sum(1 for ln in lines if ln.strip()) else None

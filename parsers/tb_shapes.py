"""Tracebacks in the shapes other printers give them, rewritten line by line into the plain shape that the traceback
collector (parsers/tracebacks.py) reads: IPython/Jupyter (7.x `<ipython-input-N-hash> in func(args)` and `/path.py in
func(args)` with `---->` arrows; 8.0-8.4 `Input In [N], in func(args)`; 8.5+ `Cell In[N], line M, in func(args)` and
`File /path.py:LINE, in func(args)`; every version's header `KeyError      Traceback (most recent call last)`),
rich's boxed tracebacks (`╭─ Traceback (most recent call last) ─╮`, `│ /path.py:LINE in func │` with long paths
wrapped onto the next box line, `│ ❱ LINE │ code │`, `╰─╯`, then the exception line) and loguru's `diagnose` style
(`> File "..."` marking the frame that caught it, `│ └ value` annotations). The exception line itself, chained
tracebacks (`During handling of the above exception ...`) and `[rankN]:` prefixes are already the plain shape.

Shapes recorded from IPython 7.34 / 8.4 / 9.18, rich 12.6 / 15.0 and loguru 0.7.3 (tests/fixtures/tracebacks).
"""
from __future__ import annotations

import re

PLAIN_HEADER = "Traceback (most recent call last):"
# IPython's header: the exception class, padding, then the plain header's words (no colon)
_IPY_HEADER = re.compile(r"^(?P<exc>[A-Za-z_][\w.]{0,200}) {2,}Traceback \(most recent call last\)\s*$")
_IPY_CELL = re.compile(r"^(?P<where>Cell In ?\[\d{1,9}\]), line (?P<line>\d{1,9})(?:, in (?P<func>[^(\n]{1,200}?)\(.*\))?\s*$")
_IPY_INPUT = re.compile(r"^(?P<where>Input In \[\d{1,9}\]), in (?P<func>[^(\n]{1,200}?)\(.*\)\s*$")
_IPY_FILE = re.compile(r"^File (?P<file>[^\"\s][^\n]{0,500}?):(?P<line>\d{1,9})(?:, in (?P<func>[^(\n]{1,200}?)\(.*\))?\s*$")
# IPython 7: `<ipython-input-5-8d7b> in <cell line: 0>()` or `/path/file.py in func(args)`: no line number, the
# arrow below gives it
_IPY7_FRAME = re.compile(r"^(?P<file><ipython-input-[\w-]{1,80}>|[^\s<][^\n]{0,500}?\.pyx?) in (?P<func>[^(\n]{1,200}?)"
                         r"\(.*\)\s*$")
_IPY_ARROW = re.compile(r"^-{1,8}> ?(?P<line>\d{1,9})(?: (?P<code>.*))?$")
_IPY_CONTEXT = re.compile(r"^ {2,}\d{1,9}(?: |$)")
_IPY_SEPARATOR = re.compile(r"^-{20,}\s*$")
_CELL_LINE = re.compile(r"^<cell line: (?P<line>\d{1,9})>$")
# rich: the panel's top, a frame header inside the box, the current line's marker, any other box line
_RICH_TOP = re.compile(r"^[╭┌]─+ ?Traceback \(most recent call last\) ?─+[╮┐]\s*$")
_RICH_FRAME = re.compile(r"^(?P<file>\S[^\n]{0,500}?):(?P<line>\d{1,9}) in (?P<func>\S{1,200})$")
_RICH_CODE = re.compile(r"^❱ ?(?P<line>\d{1,9}) [│|] ?(?P<code>.*)$")
_GUIDES = re.compile(r"^(?:\s*│)+")
_PATHLIKE = re.compile(r"^(?:/|~|[A-Za-z]:\\|\.{1,2}/|<)\S*$")
_LOGURU_FRAME = re.compile(r"^> (?=File \"[^\"\n]{1,500}\", line \d)")


# What the bytes prefilter must hand over for these shapes, whose lines hold none of the plain shape's words: the
# frame headers, and (windows) the lines after one up to its arrow and code (IPython 7's path frames have no word
# of their own: the arrows' windows reach them); rich's frame headers, the line a long path wraps onto, its `❱`.
LINE_TRIGGERS = ["Cell In[", "Input In [", "<ipython-input-", "File /", "--->", "❱", "│ /", "│ <", "│ ~"]
WINDOW_TRIGGERS = {"Cell In[": 12, "Input In [": 12, "<ipython-input-": 12, "File /": 12, "--->": 12, "│ /": 2}


class TracebackShapes:
    """Per output stream: which printer's traceback is open, and a rich frame path cut by the box's width."""

    def __init__(self):
        self.mode: dict = {}      # stream key -> "ipython" | "rich"
        self.pending: dict = {}   # stream key -> IPython 7 frame waiting for its arrow, or a rich path fragment

    def translate(self, key, message: str) -> list[str] | None:
        """The plain-shape lines `message` stands for ([]: nothing for the collector), or None: use it as it is."""
        mode = self.mode.get(key)
        if mode == "rich":
            return self._rich(key, message)
        first = message[:1]
        if mode == "ipython":
            out = self._ipython(key, message)
            if out is not None:
                return out
            held = self._end(key)  # the exception line (or anything else): IPython's traceback is over
            return held + [message] if held else None
        if first in "╭┌" and _RICH_TOP.match(message):
            self.mode[key] = "rich"
            return [PLAIN_HEADER]
        if first == ">" and _LOGURU_FRAME.match(message):
            return ["  " + message[2:]]
        if "Traceback (most recent call last)" in message and _IPY_HEADER.match(message.strip()):
            self.mode[key] = "ipython"
            return [PLAIN_HEADER]
        if first in "CIF" and (message.startswith(("Cell In", "Input In [", "File ")) and '"' not in message[:6]):
            out = self._ipython_frame(key, message)  # a pasted excerpt that lost its header
            if out is not None:
                self.mode[key] = "ipython"
                return [PLAIN_HEADER] + out
        return None

    def _end(self, key) -> list[str]:
        self.mode.pop(key, None)
        held = self.pending.pop(key, None)
        return [_frame(*held)] if isinstance(held, tuple) else []

    # -- IPython / Jupyter
    def _ipython(self, key, message: str) -> list[str] | None:
        stripped = message.strip()
        if not stripped or _IPY_SEPARATOR.match(stripped):
            return []
        if _IPY_HEADER.match(stripped):  # a chained exception's header after `The above exception ...`
            return self._flush(key) + [PLAIN_HEADER]
        m = _IPY_ARROW.match(stripped)
        if m:
            held = self.pending.pop(key, None)
            out = [_frame(held[0], int(m.group("line")), held[1])] if isinstance(held, tuple) else []
            return out + (["    " + m.group("code").strip()] if m.group("code") else [])
        if _IPY_CONTEXT.match(message):
            return []  # a context line around the arrow: not the frame's own line
        m = _IPY_INPUT.match(stripped)
        if m and not _CELL_LINE.match(m.group("func")):  # IPython 8.0-8.4 names no line: its arrow will
            out = self._flush(key)
            self.pending[key] = (m.group("where"), _func(m.group("func")))
            return out
        frame = self._ipython_frame(key, stripped)
        if frame is not None:
            return self._flush(key) + frame
        m = _IPY7_FRAME.match(stripped)
        if m:
            out = self._flush(key)
            self.pending[key] = (m.group("file"), _func(m.group("func")))
            return out
        if stripped.startswith(("During handling of the above exception", "The above exception was the direct")):
            return self._flush(key) + [stripped]
        return None

    def _ipython_frame(self, key, stripped: str) -> list[str] | None:
        m = _IPY_CELL.match(stripped)
        if m:
            return [_frame(m.group("where"), int(m.group("line")), _func(m.group("func")))]
        m = _IPY_INPUT.match(stripped)
        if m:
            func = m.group("func")
            cell = _CELL_LINE.match(func)
            return [_frame(m.group("where"), int(cell.group("line")) if cell else 0, _func(func))]
        m = _IPY_FILE.match(stripped)
        if m:
            return [_frame(m.group("file"), int(m.group("line")), _func(m.group("func")))]
        return None

    def _flush(self, key) -> list[str]:
        held = self.pending.pop(key, None)
        return [_frame(held[0], 0, held[1])] if isinstance(held, tuple) else []

    # -- rich
    def _rich(self, key, message: str) -> list[str] | None:
        first = message[:1]
        if first in "╰└":
            self.mode.pop(key, None)  # the panel closed: the exception line follows, in the plain shape
            self.pending.pop(key, None)
            return []
        if first not in "│|":
            self.mode.pop(key, None)
            self.pending.pop(key, None)
            return None
        inner = message[1:].rstrip()
        if inner.endswith(("│", "|")):
            inner = inner[:-1]
        body = inner.strip()
        if not body or body[:1] in "│╭╰┌└":  # a blank box line, or a nested box (rich's locals panel)
            return []
        m = _RICH_CODE.match(body)
        if m:  # (without rich's indent guides: `│   │   b = ...`)
            return ["    " + _GUIDES.sub("", m.group("code")).strip()]
        fragment = self.pending.pop(key, None)
        if isinstance(fragment, str):
            body = fragment + body
        m = _RICH_FRAME.match(body)
        if m:
            return [_frame(m.group("file"), int(m.group("line")), m.group("func"))]
        # A path the box's width cut (no spaces; it filled the line): the rest is on the next box line.
        if _PATHLIKE.match(body) and len(inner) - len(inner.rstrip()) <= 1 and len(body) < 2000:
            self.pending[key] = body
        return []


def _func(name: str | None) -> str:
    """A frame's function as the plain shape names it (IPython's `<cell line: N>` is the cell's module level)."""
    if not name:
        return "<module>"
    name = name.strip()
    return "<module>" if _CELL_LINE.match(name) else name


def _frame(file: str, line: int, func: str) -> str:
    return f'  File "{file}", line {line}, in {func}'


def feed(collector, shapes: TracebackShapes, key, lineno: int, message: str, ctx: dict) -> bool:
    """collector.feed for `message` as the plain shape it stands for; True when the line belongs to a traceback
    (a dropped box or context line too: code quoted in a traceback is no event)."""
    lines = shapes.translate(key, message)
    if lines is None:
        return collector.feed(key, lineno, message, ctx)
    consumed = True
    for text in lines:
        consumed = collector.feed(key, lineno, text, ctx)
    return consumed

"""rich's traceback renderer (rich/traceback.py, used by structlog's ConsoleRenderer, Typer, rich.logging) draws the
frames in a box (read by tb_shapes) and then prints `ExcType: message` word-wrapped to the console width: a long
message (gloo's `[.../pair.cc:553] Connection closed by peer ...`) starts on the line after `ExcType: ` and runs
over several. The exception line right after the box's closing `╰` with nothing after the colon takes those lines
as its message, up to a blank line."""
from __future__ import annotations

from postmortem.parsers import tb_shapes
from postmortem.parsers.line_shapes import EXC_RE

RICH_WRAP_LINES = 12  # at most this many wrapped lines are taken (rich wraps at 80-200 columns)
_NOT_MESSAGE = ("Traceback", "╭", "│", "╰", 'File "', "During handling", "The above exception")


def continues(pending: dict, key, stripped: str) -> bool:
    """Append a wrapped line to the pending row's message; False (and forget the row) when the message is over."""
    row, taken = pending[key]
    if not stripped or taken >= RICH_WRAP_LINES or stripped.startswith(_NOT_MESSAGE):
        del pending[key]
        return False
    row["exc_message"] = f"{row['exc_message']} {stripped}".strip()[:2000]
    pending[key][1] = taken + 1
    return True


class Wrapped:
    """Per file: the streams whose rich box just closed, and the rows whose message is still being read."""

    def __init__(self) -> None:
        self.pending: dict = {}   # stream key -> [traceback row, lines taken]
        self.after_box: set = set()

    def feed(self, collector, shapes, key, lineno: int, message: str, ctx: dict) -> bool:
        """tb_shapes.feed, with a rich-wrapped exception message joined to its traceback row."""
        if key in self.pending and continues(self.pending, key, message.strip()):
            return False  # (the message's lines are also scanned for events)
        was_rich = shapes.mode.get(key) == "rich"
        consumed = tb_shapes.feed(collector, shapes, key, lineno, message, ctx)
        if key in self.after_box:
            self.after_box.discard(key)
            em = EXC_RE.match(message)
            rows = collector.result.rows.get("tracebacks") or []
            if em and not (em.group("msg") or "").strip() and rows and rows[-1].get("end_line") == lineno:
                self.pending[key] = [rows[-1], 0]
        if was_rich and message[:1] in "╰└":
            self.after_box.add(key)
        return consumed

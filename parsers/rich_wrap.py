"""rich's traceback renderer (rich/traceback.py, used by structlog's ConsoleRenderer, Typer, rich.logging) draws the
frames in a box and then prints `ExcType: message` word-wrapped to the console width: a long message (gloo's
`[.../pair.cc:553] Connection closed by peer ...`) starts on the next line after `ExcType: ` and runs over several.
The exception line right after the box's closing `╰` with nothing after the colon takes those lines as its
message, up to a blank line."""
from __future__ import annotations

RICH_WRAP_LINES = 12  # at most this many wrapped lines are taken (rich wraps at 80-200 columns)
_NOT_MESSAGE = ("Traceback", "╭", "│", "╰", 'File "', "During handling", "The above exception")


def maybe_wrapped(pending: dict, key, prev_first_char: str | None, exc_msg: str | None, row: dict | None) -> None:
    """Remember `row` for `key` when its exception line closed a rich box and its message is empty."""
    if row is not None and prev_first_char == "╰" and not (exc_msg or "").strip():
        pending[key] = [row, 0]


def continues(pending: dict, key, stripped: str) -> bool:
    """Append a wrapped line to the pending row's message; False (and forget the row) when the message is over."""
    row, taken = pending[key]
    if not stripped or taken >= RICH_WRAP_LINES or stripped.startswith(_NOT_MESSAGE):
        del pending[key]
        return False
    row["exc_message"] = f"{row['exc_message']} {stripped}".strip()[:2000]
    pending[key][1] = taken + 1
    return True

"""A one-line progress bar on stderr for long analyses (only on a terminal; `quiet` turns it off)."""
from __future__ import annotations

import sys
import time

MIN_INTERVAL = 0.1   # seconds between redraws
SHOW_AFTER = 0.5     # a run shorter than this never draws anything


class Progress:
    """Counts parsed files and bytes; redraws `parsing 123/512 files  1.2/4.0 GiB  31%` at most ten times a second."""

    def __init__(self, files: int, total_bytes: int, label: str = "parsing", stream=None, enabled: bool | None = None):
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = _is_tty(self.stream)
        self.enabled = enabled
        self.files, self.total, self.label = files, max(0, total_bytes), label
        self.done_files = self.done_bytes = 0
        self.start = time.monotonic()
        self._last = 0.0
        self._width = 0

    def update(self, nbytes: int, files: int = 1) -> None:
        """One more file (of `nbytes` bytes) parsed."""
        self.done_files += files
        self.done_bytes += max(0, nbytes)
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.start < SHOW_AFTER or (now - self._last < MIN_INTERVAL and self.done_files < self.files):
            return
        self._last = now
        self._draw(now)

    def line(self, now: float | None = None) -> str:
        """The text of the bar as it would be drawn now."""
        now = time.monotonic() if now is None else now
        frac = self.done_bytes / self.total if self.total else (self.done_files / self.files if self.files else 1.0)
        frac = min(1.0, frac)
        elapsed = now - self.start
        eta = f"  ETA {_secs(elapsed * (1 - frac) / frac)}" if 0 < frac < 1 and elapsed > 1 else ""
        bar = "#" * int(frac * 20)
        return (f"postmortem: {self.label} [{bar:<20}] {self.done_files}/{self.files} files  "
                f"{_size(self.done_bytes)}/{_size(self.total)}  {frac:4.0%}{eta}")

    def _draw(self, now: float) -> None:
        text = self.line(now)
        pad = max(0, self._width - len(text))
        self._width = len(text)
        try:
            self.stream.write("\r" + text + " " * pad)
            self.stream.flush()
        except (OSError, ValueError):
            self.enabled = False

    def close(self) -> None:
        """Erase the bar (nothing was drawn for a short run)."""
        if self.enabled and self._width:
            try:
                self.stream.write("\r" + " " * self._width + "\r")
                self.stream.flush()
            except (OSError, ValueError):
                pass
        self._width = 0

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def make(files: int, total_bytes: int, quiet: bool = False, stream=None) -> Progress:
    """A progress bar that draws only when `quiet` is false and the stream is a terminal."""
    return Progress(files, total_bytes, stream=stream, enabled=False if quiet else None)


def _is_tty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _size(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"


def _secs(s: float) -> str:
    s = int(s + 0.5)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"

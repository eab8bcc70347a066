"""Copy a job's output pipe to the terminal unchanged and to a file with arrival timestamps, cheaply."""
from __future__ import annotations

import codecs
import io
import os
import threading
import time
from datetime import datetime, timezone
from typing import BinaryIO

CHUNK = 64 * 1024


class Activity:
    """When the job last wrote anything (monotonic seconds); written by tee threads, read by the watchdog."""

    def __init__(self) -> None:
        from postmortem.collect.stall import Rhythm
        self.last = time.monotonic()
        self.bytes = 0
        self.rhythm = Rhythm()   # the silences between output chunks, once the job has printed

    def touch(self, n: int) -> None:
        """Record `n` bytes of output now."""
        now = time.monotonic()
        if self.bytes:
            self.rhythm.add(now - self.last)
        self.last = now
        self.bytes += n


def stamp(now: float | None = None) -> bytes:
    """The line prefix `[2026-11-21T13:18:24.100Z] ` (UTC, milliseconds): an ISO timestamp the analyzer strips."""
    t = datetime.fromtimestamp(time.time() if now is None else now, tz=timezone.utc)
    return b"[%s.%03dZ] " % (t.strftime("%Y-%m-%dT%H:%M:%S").encode(), t.microsecond // 1000)


class LineStamper:
    """Turns raw chunks into timestamped lines; whole-chunk bytes operations only (no per-line Python work)."""

    def __init__(self) -> None:
        self.at_line_start = True

    def feed(self, chunk: bytes, now: float | None = None) -> bytes:
        """The bytes to append to the file for `chunk` (every line that starts in it gets the arrival time)."""
        if not chunk:
            return b""
        if b"\r" in chunk:
            # A progress bar redraws with bare \r and may never end a line: give each redraw its own timestamped
            # line (as torchrun's --tee does) so the file keeps the latest state within the analyzer's line cap.
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\r\n")
        p = stamp(now)
        ends = chunk.endswith(b"\n")
        body = chunk[:-1] if ends else chunk
        out = body.replace(b"\n", b"\n" + p)
        if self.at_line_start:
            out = p + out
        if ends:
            out += b"\n"
        self.at_line_start = ends
        return out


class TextSink:
    """A binary-write face for a text-only stream (Jupyter's stdout): decodes incrementally, so that a character
    split across two chunks is not mangled."""

    def __init__(self, stream):
        self.stream = stream
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def write(self, data: bytes) -> int:
        self.stream.write(self.decoder.decode(data))
        return len(data)

    def flush(self) -> None:
        self.stream.flush()


def binary_stream(stream) -> BinaryIO:
    """A stream that takes bytes: a text stream's `.buffer`, a decoding adapter when it has none (Jupyter)."""
    if not isinstance(stream, io.TextIOBase):
        return stream
    buf = getattr(stream, "buffer", None)
    return buf if buf is not None else TextSink(stream)


class Tee(threading.Thread):
    """Drain one pipe of the job: raw bytes to `terminal`, timestamped lines to `log_path`."""

    def __init__(self, fd: int, terminal: BinaryIO | None, log_path: str, activity: Activity, name: str,
                 lock: threading.Lock | None = None):
        super().__init__(name=f"postmortem-tee-{name}", daemon=True)
        self.fd, self.terminal, self.log_path, self.activity = fd, terminal, log_path, activity
        self.stream = name
        self.lock = lock or threading.Lock()   # shared with the collector's own messages on the same terminal
        self.terminal_at_line_start = True
        self.stamper = LineStamper()
        self.terminal_error: str | None = None
        self.log_error: str | None = None
        self.bytes = 0

    def run(self) -> None:
        try:
            log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            log_fd, self.log_error = -1, str(exc)
        try:
            while True:
                try:
                    chunk = os.read(self.fd, CHUNK)
                except InterruptedError:
                    continue
                except OSError:
                    break
                if not chunk:
                    break
                self.activity.touch(len(chunk))
                self.bytes += len(chunk)
                self._to_terminal(chunk)
                if log_fd >= 0:
                    try:
                        _write_all(log_fd, self.stamper.feed(chunk))
                    except OSError as exc:  # disk full: the job must go on; the terminal copy still flows
                        self.log_error = str(exc)
                        os.close(log_fd)
                        log_fd = -1
        finally:
            if log_fd >= 0:
                os.close(log_fd)
            try:
                os.close(self.fd)
            except OSError:
                pass

    def _to_terminal(self, chunk: bytes) -> None:
        if self.terminal is None:
            return
        try:
            with self.lock:
                self.terminal.write(chunk)
                self.terminal.flush()
                self.terminal_at_line_start = chunk.endswith(b"\n")
        except (OSError, ValueError) as exc:
            # Reader gone (`| head`) or closed: keep draining so the job never blocks on a full pipe.
            self.terminal_error = str(exc)
            self.terminal = None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]

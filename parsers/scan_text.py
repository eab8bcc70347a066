"""The prefilter's byte-level helpers: reading a file from its descriptor, launcher stream ids, newline counting,
views of a block without copies, and the decoding and cleaning of the lines handed over."""
from __future__ import annotations

import os

try:  # numpy finds a block's line breaks several times faster than bytes.count (optional: pandas brings it)
    import numpy as _np
except ImportError:  # pragma: no cover
    _np = None

from postmortem.ingest import textio
from postmortem.parsers import scan_limits as limits
from postmortem.parsers.scan_limits import (ANSI_BYTES_RE, SHORT_SPAN)

def _open(path: str, stats: textio.ReadStats):
    """A plain file straight from its descriptor (a third of the cost of textio's buffered layers), a gzip file
    through textio.open_binary; the same snapshot, size and expansion bounds either way."""
    fd, st = textio.open_regular(path)
    try:
        gz = os.pread(fd, 2, 0) == textio.GZIP_MAGIC
    except OSError:
        gz = False
    if gz:
        os.close(fd)
        return textio.open_binary(path, stats)
    return _PlainReader(fd, st.st_size, stats)


def last_split(data: bytes, n: int, drop_first: bool = False) -> list[bytes]:
    """data.split(b"\n")[-n:] (its first part left out when `drop_first`: a window that starts mid-line), split from
    the n-th newline back instead of splitting the whole window (64 KiB of short lines cost ~0.5 ms)."""
    pos = len(data)
    for _ in range(n):
        pos = data.rfind(b"\n", 0, pos)
        if pos < 0:
            break
    if n > 0 and pos >= 0:
        return data[pos + 1:].split(b"\n")  # the n parts after the n-th newline from the end: never the first part
    parts = data.split(b"\n")
    if drop_first and parts:
        parts.pop(0)
    return parts[-n:]


class _PlainReader:
    """Reads a regular file up to the size it had when opened (and at most textio.MAX_FILE_BYTES)."""

    def __init__(self, fd: int, size: int, stats: textio.ReadStats):
        self.fd, self.size, self.stats = fd, size, stats
        self.left = min(size, textio.MAX_FILE_BYTES)
        self.pos = 0
        self.closed = False

    def peek(self, n: int) -> bytes:
        try:
            return os.pread(self.fd, min(n, self.left), 0)
        except OSError:
            return b""

    def read(self, n: int) -> bytes:
        if self.left <= 0:
            self._at_end()
            return b""
        try:
            data = os.read(self.fd, min(n, self.left))
        except OSError as exc:
            self.stats.problems.append(f"read error: {exc.__class__.__name__}: {exc}")
            data = b""
        if not data:  # shrank while being read
            self.left = 0
            return b""
        self.left -= len(data)
        self.pos += len(data)
        self.stats.bytes += len(data)
        return data

    def _at_end(self) -> None:
        if self.closed or getattr(self, "_noted", False):
            return
        self._noted = True
        if self.pos >= textio.MAX_FILE_BYTES and self.size > textio.MAX_FILE_BYTES:
            self.stats.problems.append(f"stopped after {textio.MAX_FILE_BYTES} bytes (file size limit)")
            return
        try:
            now = os.fstat(self.fd).st_size
        except OSError:
            return
        if now > self.size:
            self.stats.problems.append(f"file grew while being read; read the {self.size} bytes present when it "
                                       f"was opened")

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                os.close(self.fd)
            except OSError:
                pass


class NotStreamable(Exception):
    """The file is not UTF-8 text (UTF-16 etc.): read it with textio.iter_lines instead."""


def _stream_id(line: bytes) -> bytes:
    """The launcher prefix a line starts with (`[default3]:`, `[1,3]<stdout>:`, ` 3: `), b'' when none."""
    if line[:1] == b"[":
        i = line.find(b"]:", 0, 48)
        if i < 0:
            i = line.find(b">:", 0, 48)
        return line[: i + 2] if i > 0 else b""
    if line[:1] in b" 0123456789" and line[:1]:
        i = line.find(b": ", 0, 16)
        if 0 < i and line[:i].strip().isdigit():
            return line[: i + 2]
    return b""


def _newline_counter(buf: bytes, start: int, end: int):
    """count(a, b) = newlines in buf[a:b] for start <= a <= b <= end. Short spans (the lines between two nearby
    hits) are counted by bytes.count, whose call costs least; long ones in a newline mask of the block that numpy
    builds, once, at ~40 GB/s (bytes.count runs at ~3 GB/s, and the spans between hits add up to the block)."""
    if _np is None or end - start < 65536:
        return lambda a, b: buf.count(b"\n", a, b)
    mask = None

    def newlines(a: int, b: int) -> int:
        nonlocal mask
        if b - a < SHORT_SPAN:
            return buf.count(b"\n", a, b)
        if mask is None:
            mask = _np.frombuffer(buf, _np.uint8, end - start, start) == 10
        return int(_np.count_nonzero(mask[a - start:b - start]))
    return newlines


def _last_segment_with(line: bytes, needle: bytes, end: int | None = None) -> bytes | None:
    """The `\\r` segment containing the last occurrence of `needle` (before `end`), with a short line prefix kept."""
    pos = line.rfind(needle, 0, len(line) if end is None else end)
    if pos < 0:
        return None
    lo = line.rfind(b"\r", 0, pos) + 1
    hi = line.find(b"\r", pos)
    seg = line[lo:] if hi < 0 else line[lo:hi]
    if lo > 0:
        first = line.find(b"\r")
        if 0 < first <= 48 and b"%|" not in line[:first]:
            seg = line[:first] + seg  # an srun/pdsh label printed once before the bar redraws
    return seg


class _Span:
    """A long line inside a read block, addressed by offsets: the bytes API the scanner needs, without a copy."""
    __slots__ = ("buf", "start", "end")

    def __init__(self, buf: bytes, start: int, end: int):
        self.buf, self.start, self.end = buf, start, end

    def __len__(self) -> int:
        return self.end - self.start

    def __contains__(self, sub: bytes) -> bool:
        return self.buf.find(sub, self.start, self.end) >= 0

    def _bounds(self, lo: int, hi: int | None) -> tuple[int, int]:
        n = self.end - self.start
        lo, hi, _ = slice(lo, n if hi is None else hi).indices(n)
        return self.start + lo, self.start + hi

    def find(self, sub: bytes, lo: int = 0, hi: int | None = None) -> int:
        i = self.buf.find(sub, *self._bounds(lo, hi))
        return i - self.start if i >= 0 else -1

    def rfind(self, sub: bytes, lo: int = 0, hi: int | None = None) -> int:
        i = self.buf.rfind(sub, *self._bounds(lo, hi))
        return i - self.start if i >= 0 else -1

    def __getitem__(self, sl: slice) -> bytes:
        lo, hi, _ = sl.indices(self.end - self.start)
        return self.buf[self.start + lo:self.start + max(lo, hi)]

    def bytes(self) -> bytes:
        return self.buf[self.start:self.end]

    def view(self) -> memoryview:
        return memoryview(self.buf)[self.start:self.end]


def _span_or_bytes(buf: bytes, start: int, end: int):
    return _Span(buf, start, end) if end - start > limits.SPAN_MIN else buf[start:end]


class _Ready:
    """A pending sample cut out already."""
    __slots__ = ("seg",)

    def __init__(self, seg: bytes | None):
        self.seg = seg

    def text(self) -> str | None:
        return None if self.seg is None else _text(self.seg)


class _Lazy:
    """A pending sample: the segment is cut out of its line only if it is ever emitted."""
    __slots__ = ("line", "needle", "scanner")

    def __init__(self, line: bytes, needle: bytes | None, scanner=None):  # scanner: the LineScanner (its step_segment)
        self.line, self.needle, self.scanner = line, needle, scanner

    def text(self) -> str | None:
        if self.needle is not None:
            seg = _last_segment_with(self.line, self.needle)
        else:
            seg = self.scanner.step_segment(self.line)
        return None if seg is None else _text(seg)


def _rfind_pair(buf: bytes, pair: bytes, a: int, b: int) -> int:
    """buf.rfind(pair, a, b) for a two-byte `pair`, found by its first byte with memrchr: bytes.rfind of a two-byte
    needle crawls (~4 GB/s less: 0.24 ms for a megabyte without one, the common case of a log without bars)."""
    b = min(b, len(buf))
    if b - a < 64:
        return buf.rfind(pair, a, b)
    first, second = pair[:1], pair[1]
    j = b - 1  # the first byte of a whole pair lies before b - 1
    for _ in range(16):
        i = buf.rfind(first, a, j)
        if i < 0:
            return -1
        if buf[i + 1] == second:
            return i
        j = i
    return buf.rfind(pair, a, j + 1)  # many lone first bytes: the plain search for what is left


def _needs_clean(data: bytes) -> bool:
    """Whether textio.clean would change a line of these joined lines: a NUL, an escape, a CR ending a line."""
    return b"\x00" in data or b"\x1b" in data or b"\r\n" in data or data.endswith(b"\r")


def _clean_items(items: list, buf: bytes) -> list:
    """_clean for a run that may hold spans (spans of a dirty block are copied out first)."""
    if b"\x00" in buf or b"\x1b" in buf:
        return _clean([it.bytes() if type(it) is _Span else it for it in items], buf)
    return items


def _clean(lines: list, buf: bytes) -> list:
    """NUL bytes and ANSI escapes out of lines (checked once on the whole block, where they are rare)."""
    if b"\x00" in buf:
        lines = [ln.replace(b"\x00", b"") for ln in lines]
    if b"\x1b" in buf:
        lines = [ANSI_BYTES_RE.sub(b"", ln) if b"\x1b" in ln else ln for ln in lines]
    return lines


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _text(data: bytes) -> str:
    """Bytes of one line or segment -> the text the line parser gets (bounded like textio.iter_lines)."""
    text = _decode(data[: textio.MAX_LINE_CHARS * 4])
    if len(text) > textio.MAX_LINE_CHARS:
        text = text[: textio.MAX_LINE_CHARS] + textio.TRUNCATION_MARK
    return text.rstrip("\r") if text.endswith("\r") else text

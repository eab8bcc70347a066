"""Bounded, streaming access to untrusted input files: gzip with an expansion cap, line-length cap, text cleanup."""
from __future__ import annotations

import gzip
import io
import os
import re
import zlib
from dataclasses import dataclass, field
from typing import BinaryIO, Iterator

MAX_LINE_CHARS = 64 * 1024          # longer lines are cut here and marked
MAX_DECOMPRESSED = 4 * 1024 ** 3    # a .gz may expand to at most this many bytes (gzip-bomb guard)
MAX_FILE_BYTES = 8 * 1024 ** 3      # plain files are read up to this many bytes
TRUNCATION_MARK = " …[line truncated by postmortem]"
GZIP_MAGIC = b"\x1f\x8b"

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][AB012]")


class InputProblem(Exception):
    """A file cannot be read as text; the message says why, for the sources table."""


@dataclass
class ReadStats:
    """What a reader consumed: bytes of (decompressed) content, physical lines, and any problem met."""
    bytes: int = 0
    lines: int = 0
    truncated_lines: int = 0
    problems: list[str] = field(default_factory=list)


class _CappedReader(io.RawIOBase):
    """Raw stream that stops (and records a problem) after `limit` bytes, and records decompression errors."""

    def __init__(self, inner: BinaryIO, limit: int, stats: ReadStats, what: str):
        self._inner, self._limit, self._stats, self._what = inner, limit, stats, what
        self._seen = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        room = self._limit - self._seen
        if room <= 0:
            if "cap" not in self._what:
                self._stats.problems.append(f"stopped after {self._limit} bytes ({self._what} limit)")
                self._what += " cap"
            return 0
        view = memoryview(buf)[: min(len(buf), room)]
        try:
            n = self._inner.readinto(view)
        except (EOFError, OSError, zlib.error) as exc:
            self._stats.problems.append(f"truncated or corrupt compressed data: {exc.__class__.__name__}: {exc}")
            return 0
        n = n or 0
        self._seen += n
        self._stats.bytes += n
        return n


def is_gzip(path: str) -> bool:
    """True when the file starts with the gzip magic bytes."""
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == GZIP_MAGIC
    except OSError:
        return False


def open_binary(path: str, stats: ReadStats | None = None) -> io.BufferedReader:
    """Open a file (transparently un-gzipping) as a bounded binary stream."""
    stats = stats if stats is not None else ReadStats()
    raw = open(path, "rb")  # noqa: SIM115 - ownership passes to the returned reader
    if raw.read(2) == GZIP_MAGIC:
        raw.seek(0)
        inner: BinaryIO = gzip.GzipFile(fileobj=raw)
        capped = _CappedReader(inner, MAX_DECOMPRESSED, stats, "decompression")
    else:
        raw.seek(0)
        capped = _CappedReader(raw, MAX_FILE_BYTES, stats, "file size")
    return io.BufferedReader(capped, buffer_size=1 << 20)


def read_head(path: str, n: int = 8192) -> bytes:
    """The first n bytes of the (decompressed) content; empty on any error."""
    try:
        with open_binary(path) as fh:
            return fh.read(n)
    except OSError:
        return b""


def read_bounded(path: str, limit: int, stats: ReadStats | None = None) -> bytes:
    """Read at most `limit` bytes of (decompressed) content; for small structured files (JSON, XML, pickle)."""
    stats = stats if stats is not None else ReadStats()
    with open_binary(path, stats) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputProblem(f"larger than {limit} bytes; not loaded")
    return data


def sniff_encoding(head: bytes) -> str:
    """utf-16 when a BOM says so, else utf-8 (decoded with replacement)."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    return "utf-8"


def iter_lines(path: str, stats: ReadStats | None = None) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, cleaned text) for each physical line, streaming with bounded memory.

    Cleaning: NUL bytes and ANSI escapes removed, trailing newline dropped, lines over MAX_LINE_CHARS cut with a
    marker. Carriage returns are kept: callers split progress-bar segments themselves.
    """
    stats = stats if stats is not None else ReadStats()
    binary = open_binary(path, stats)
    encoding = sniff_encoding(binary.peek(4)[:4])
    text = io.TextIOWrapper(binary, encoding=encoding, errors="replace", newline="\n")
    lineno = 0
    try:
        while True:
            try:
                chunk = text.readline(MAX_LINE_CHARS)
            except (UnicodeError, ValueError) as exc:
                stats.problems.append(f"decode error: {exc}")
                break
            if not chunk:
                break
            lineno += 1
            if not chunk.endswith("\n") and len(chunk) >= MAX_LINE_CHARS:
                # Skip the rest of an over-long line without holding it.
                while True:
                    rest = text.readline(MAX_LINE_CHARS)
                    if not rest or rest.endswith("\n"):
                        break
                stats.truncated_lines += 1
                chunk += TRUNCATION_MARK
            stats.lines = lineno
            yield lineno, clean(chunk.rstrip("\n"))
    finally:
        text.close()
    if stats.truncated_lines:
        stats.problems.append(f"{stats.truncated_lines} line(s) longer than {MAX_LINE_CHARS} chars truncated")


def clean(line: str) -> str:
    """Drop NULs, ANSI escapes and a trailing CR from one line."""
    if "\x00" in line:
        line = line.replace("\x00", "")
    if "\x1b" in line:
        line = ANSI_RE.sub("", line)
    return line.rstrip("\r") if line.endswith("\r") else line


def safe_size(path: str) -> int:
    """File size in bytes, or -1 when it cannot be read."""
    try:
        return os.stat(path).st_size
    except OSError:
        return -1

"""Bounded, streaming access to untrusted input files: gzip with an expansion cap, line-length cap, text cleanup.

Bounds (every input byte is untrusted):
- a line longer than MAX_LINE_CHARS is cut there and marked with TRUNCATION_MARK; the rest of it is skipped while
  streaming, so a 500 MB runaway print costs time, not memory;
- a gzip file stops expanding at `expansion_bound(compressed_size)` = min(MAX_DECOMPRESSED,
  max(MIN_EXPANSION_BYTES, MAX_EXPANSION_RATIO x compressed size)): real logs compress 5-50x, a gzip bomb ~1000x;
- a plain file is read up to the size it had when it was opened (a file still being written is read as a snapshot),
  and at most MAX_FILE_BYTES;
- only regular files are opened, and without blocking (a FIFO or device never stalls the reader).
"""
from __future__ import annotations

import errno
import fcntl
import gzip
import io
import os
import re
import stat
import zlib
from dataclasses import dataclass, field
from typing import BinaryIO, Iterator

MAX_LINE_CHARS = 64 * 1024          # longer lines are cut here and marked
MAX_DECOMPRESSED = 4 * 1024 ** 3    # a .gz never expands past this many bytes (gzip-bomb guard) ...
MIN_EXPANSION_BYTES = 256 * 1024 ** 2  # ... and may always expand to this many ...
MAX_EXPANSION_RATIO = 250           # ... or to this many times its compressed size, whichever is larger
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


def expansion_bound(compressed_size: int) -> int:
    """The most bytes a gzip file of `compressed_size` bytes is allowed to decompress to."""
    return min(MAX_DECOMPRESSED, max(MIN_EXPANSION_BYTES, MAX_EXPANSION_RATIO * max(0, compressed_size)))


class _CappedReader(io.RawIOBase):
    """Raw stream that stops (and records a problem) after `limit` bytes, and records decompression errors."""

    def __init__(self, inner: BinaryIO, limit: int, stats: ReadStats, what: str, owner=None):
        self._inner, self._limit, self._stats, self._what = inner, limit, stats, what
        self._owner = owner  # the OS-level file, closed with this reader
        self._seen = 0
        self._capped = False

    def close(self) -> None:
        if not self.closed:
            for f in (self._inner, self._owner):
                if f is not None:
                    try:
                        f.close()
                    except OSError:
                        pass
        super().close()

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        room = self._limit - self._seen
        if room <= 0:
            if not self._capped:
                self._capped = True
                try:  # content that ends exactly at the bound was read whole
                    more = self._inner.read(1)
                except (EOFError, OSError, zlib.error):
                    more = b""
                if more:
                    self._stats.problems.append(f"stopped after {self._limit} bytes ({self._what})")
            return 0
        try:
            # Views released on every exit (an interrupt mid-read must not leave the caller's buffer exported).
            with memoryview(buf) as whole, whole[: min(len(buf), room)] as view:
                n = self._inner.readinto(view)
        except (EOFError, OSError, zlib.error) as exc:
            what = "truncated or corrupt compressed data" if self._owner is not None else "read error"
            self._stats.problems.append(f"{what}: {exc.__class__.__name__}: {exc}")
            return 0
        n = n or 0
        self._seen += n
        self._stats.bytes += n
        return n


def is_gzip(path: str) -> bool:
    """True when the file starts with the gzip magic bytes."""
    try:
        fd, _ = open_regular(path)
    except InputProblem:
        return False
    try:
        return os.read(fd, 2) == GZIP_MAGIC
    except OSError:
        return False
    finally:
        os.close(fd)


class _SnapshotFile(io.RawIOBase):
    """A regular file read only up to the size it had when opened; notes when it grew meanwhile."""

    def __init__(self, fd: int, size: int, stats: ReadStats):
        self._fd, self._size, self._stats, self._pos = fd, size, stats, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        room = self._size - self._pos
        if room <= 0:
            self._note_growth()
            return 0
        with memoryview(buf) as whole, whole[: min(len(buf), room)] as view:
            n = os.readv(self._fd, [view])
        self._pos += n
        if n == 0:  # shrank (truncated by its writer) while we read
            self._size = self._pos
        return n

    def _note_growth(self) -> None:
        try:
            now = os.fstat(self._fd).st_size
        except OSError:
            return
        if now > self._size and not getattr(self, "_noted", False):
            self._noted = True
            self._stats.problems.append(f"file grew while being read; read the {self._size} bytes present when it "
                                        f"was opened")

    def close(self) -> None:
        if not self.closed:
            try:
                os.close(self._fd)
            except OSError:
                pass
        super().close()


def open_regular(path: str) -> tuple[int, os.stat_result]:
    """Open a regular file read-only without blocking; raise InputProblem for FIFOs, devices, sockets, directories.

    The type is checked before opening (opening some devices has side effects) and again on the open descriptor.
    """
    try:
        pre = os.stat(path)
    except OSError as exc:
        raise _open_problem(exc) from exc
    if not stat.S_ISREG(pre.st_mode):
        raise InputProblem(f"not a regular file ({file_type(pre.st_mode)}); not read")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _open_problem(exc) from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputProblem(f"not a regular file ({file_type(st.st_mode)}); not read")
        # Regular files never block; clear O_NONBLOCK so reads behave normally on network file systems.
        fl = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, fl & ~getattr(os, "O_NONBLOCK", 0))
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _open_problem(exc: OSError) -> InputProblem:
    if isinstance(exc, PermissionError) or exc.errno in (errno.EACCES, errno.EPERM):
        return InputProblem("permission denied")
    if exc.errno == errno.ELOOP:
        return InputProblem("symlink loop; not read")
    if isinstance(exc, FileNotFoundError):
        return InputProblem("vanished or dangling symlink; not read")
    return InputProblem(f"cannot open: {exc.strerror or exc}")


def file_type(mode: int) -> str:
    """A word for a non-regular file type (for problems)."""
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISDIR(mode):
        return "directory"
    return "special file"


def open_binary(path: str, stats: ReadStats | None = None) -> io.BufferedReader:
    """Open a regular file (transparently un-gzipping) as a bounded, non-blocking binary stream."""
    stats = stats if stats is not None else ReadStats()
    fd, st = open_regular(path)
    try:
        snap = _SnapshotFile(fd, st.st_size, stats)
    except BaseException:
        os.close(fd)
        raise
    buffer_size = max(8192, min(1 << 20, st.st_size))
    raw = io.BufferedReader(snap, buffer_size=buffer_size)
    if raw.peek(2)[:2] == GZIP_MAGIC:
        inner: BinaryIO = gzip.GzipFile(fileobj=raw, mode="rb")
        bound = expansion_bound(st.st_size)
        capped = _CappedReader(inner, bound, stats, "gzip expansion bound: decompressed size may reach "
                               "max(256 MiB, 250 x compressed size), at most 4 GiB", owner=raw)
        return io.BufferedReader(capped, buffer_size=1 << 16)
    capped = _CappedReader(raw, MAX_FILE_BYTES, stats, "file size limit")
    return io.BufferedReader(capped, buffer_size=buffer_size)


def read_head(path: str, n: int = 8192) -> bytes:
    """The first n bytes of the (decompressed) content; empty on any error."""
    try:
        with open_binary(path) as fh:
            return fh.read(n)
    except (OSError, InputProblem, EOFError, zlib.error):
        return b""


def read_bounded(path: str, limit: int, stats: ReadStats | None = None) -> bytes:
    """Read at most `limit` bytes of (decompressed) content; for small structured files (JSON, XML, pickle)."""
    stats = stats if stats is not None else ReadStats()
    with open_binary(path, stats) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputProblem(f"larger than {limit} bytes; not loaded")
    stats.lines = line_count(data)
    return data


def sniff_encoding(head: bytes) -> str:
    """utf-16 when a BOM says so or NULs alternate with ASCII (BOM-less UTF-16), else utf-8 (with replacement)."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    if head.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    sample = head[:4096]
    if len(sample) >= 8:
        even, odd = sample[0::2], sample[1::2]
        # Windows tools (PowerShell redirection) write UTF-16 without a BOM sometimes: ASCII text with every
        # other byte NUL.
        if odd.count(0) >= 0.9 * len(odd) and even.count(0) <= 0.1 * len(even):
            return "utf-16-le"
        if even.count(0) >= 0.9 * len(even) and odd.count(0) <= 0.1 * len(odd):
            return "utf-16-be"
    return "utf-8"


def iter_lines(path: str, stats: ReadStats | None = None, start: int = 1) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, cleaned text) for each physical line, streaming with bounded memory.

    Cleaning: NUL bytes and ANSI escapes removed, trailing newline dropped, lines over MAX_LINE_CHARS cut with a
    marker. Carriage returns are kept: callers split progress-bar segments themselves. `start`: the first line
    wanted; in UTF-8 text the lines before it are skipped by counting newlines in the bytes, not decoded one by one
    (the context of a cited line near the end of a big log: ~20 ms -> ~1 ms a file).
    """
    stats = stats if stats is not None else ReadStats()
    binary = open_binary(path, stats)
    encoding = sniff_encoding(binary.peek(4096)[:4096])
    lineno = 0
    if start > 1 and not encoding.startswith("utf-16"):
        binary, lineno = _skip_lines(binary, start - 1)
        if lineno:
            encoding = "utf-8"  # a BOM belongs to the first line only
    text = io.TextIOWrapper(binary, encoding=encoding, errors="replace", newline="\n")
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


def _skip_lines(binary: io.BufferedReader, k: int) -> tuple[io.BufferedReader, int]:
    """The stream after its first k newline-terminated lines (fewer at its end), and how many were skipped."""
    skipped = 0
    while True:
        block = binary.read(1 << 20)
        if not block:
            return binary, skipped
        n = block.count(b"\n")
        if skipped + n >= k:
            rest = block.split(b"\n", k - skipped)[-1]
            return io.BufferedReader(_Prepended(rest, binary), buffer_size=1 << 16), k
        skipped += n


class _Prepended(io.RawIOBase):
    """A raw stream that gives `head` first, then what `stream` gives (closing it on close)."""

    def __init__(self, head: bytes, stream):
        self._head, self._stream = head, stream

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._stream.read(len(b))
        b[:len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()


def line_count(data: bytes | str) -> int:
    """Physical lines in a buffer the way iter_lines counts them: newlines, plus a last line without one."""
    nl = b"\n" if isinstance(data, bytes) else "\n"
    return data.count(nl) + (1 if data and not data.endswith(nl) else 0)


def count_lines(path: str) -> int:
    """Physical lines of a file the way iter_lines counts them (a last line without newline counts); 0 on error."""
    count, last = 0, b"\n"
    try:
        with open_binary(path) as fh:
            while True:
                chunk = fh.read(1 << 20)
                if not chunk:
                    break
                count += chunk.count(b"\n")
                last = chunk[-1:]
    except (OSError, InputProblem, EOFError, zlib.error):
        return count
    return count + (last != b"\n")


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


def display_path(rel: str) -> str:
    """A path safe to print: undecodable bytes as \\xNN, control characters (newline, ESC) escaped."""
    if not _CTRL_RE.search(rel):
        return rel
    if _SURROGATE_RE.search(rel):
        rel = os.fsencode(rel).decode("utf-8", "backslashreplace")
    return _CTRL_RE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), rel)


_CTRL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_SURROGATE_RE = re.compile(r"[\udc80-\udcff]")

"""Bytes-level prefilter for big text logs: read a file once in chunks and hand the line parser only the lines that
can yield a row; progress bars and step lines become a bounded sample, NCCL INFO topology lines become counts.

Big files (SUMMARY_MIN_BYTES and more) with Hyperscan installed are scanned block by block (`_scan_blocks`): one
Hyperscan pass over each 1 MiB block finds every trigger (the literals of every declared line format, the line
parser's own words, NCCL facts, window openers); only the lines holding one go through the per-line judge `_one`.
The lines in between are never split: numpy's index of the block's line breaks numbers them, progress is sampled
at byte strides, and the last progress/step line before an error line and at the end is searched for backwards
when it is needed (`_resolve`). Repeated event lines are capped per shape (informational) or per shape and rank
(errors), the latest of each kept; a block dense with triggers (an error flood) is walked line by line with a
dict lookup for the capped shapes (`_dense`).

The per-line judge: a line's *shape key* is the line with digits, blanks and progress-bar glyphs deleted
(`bytes.translate`, C speed). Lines of one shape share a key (every tqdm redraw of a bar, every
`Channel 03/0 : 5[5] -> 6[6] via P2P/IPC/read`), so the key is classified once and the verdict memoised. Deleting
bytes maps an occurrence of a trigger inside the line to an occurrence of the equally normalised trigger inside the
key, so a line that contains a trigger is never skipped.

A line with none of the parser's triggers is skipped: it could not yield a row. Files smaller than
SUMMARY_MIN_BYTES are handed over exactly as a line-by-line reader would (every progress, step and NCCL line
included). Bigger files are summarised (line by line by their keys where Hyperscan is missing, with the same event
lines as the block scan):
- a line with an event trigger is handed over whole; a long `\\r`-joined line only with its trigger segments
  (a run of equal-shape segments as its first and last one; the redraws of one bar, e.g. a sampling bar, as
  its first redraw and the step row of its last); a bare `Warning` only within reach of a traceback frame;
- progress-bar lines and step lines (HF log dicts, `step N | loss`, Megatron iterations) are sampled at a byte
  stride (about MAX_SAMPLES per file), plus the last ones of each output stream before every error line and at
  the end of the file, so the step of death and each rank's last step are kept;
- NCCL INFO lines are counted by kind (channel, ring, trees, other) except the ones that carry facts
  (communicator init, version, network, error trails), which are handed over;
- traceback frames and torchrun summary blocks open a window of following lines handed over unconditionally.
"""
from __future__ import annotations

import os
from typing import Iterator

from postmortem.ingest import textio
from postmortem.parsers import scan_limits as limits
from postmortem.parsers.scan_blocks import BlockScan
from postmortem.parsers.scan_limits import *  # noqa: F401,F403 - the sizes and flags, re-exported for readers
from postmortem.parsers.scan_limits import (HEAD_BYTES, INFO_CAP, MIN_STRIDE, NCCL_KINDS, SCAN_BLOCKS, TAIL_BYTES)
from postmortem.parsers.scan_judge import LineJudge, _cap_key, _may_name_rank  # noqa: F401 - re-exported
from postmortem.parsers.scan_limits import _EVENT_BITS, _RANK_DIGITS_RE  # noqa: F401 - re-exported (tests)
from postmortem.parsers.scan_text import (NotStreamable, _PlainReader, _open, _rfind_pair, _stream_id,  # noqa: F401
                                          last_split, _newline_counter, _clean, _clean_items, _decode, _text, _Lazy,
                                          _Ready, _Span, _span_or_bytes, _last_segment_with, _needs_clean)
from postmortem.parsers.scan_triggers import Triggers, compile_triggers, normalise  # noqa: F401 - re-exported


def exact_shares(sizes: list[int], budget: int | None = None) -> list[int]:
    """Each file's share of the job's exact budget (limits.EXACT_JOB_BYTES): equal shares, where a file smaller than its
    share leaves the rest to the others (from the sizes alone, so every engine and worker gets the same shares)."""
    out = [0] * len(sizes)
    left = limits.EXACT_JOB_BYTES if budget is None else budget
    order = sorted(range(len(sizes)), key=lambda i: (sizes[i], i))
    for k, i in enumerate(order):
        out[i] = min(max(0, sizes[i]), left // (len(order) - k))
        left -= out[i]
    return out


def text_size(path: str, size: int, compression: str | None) -> int:
    """The bytes a file holds once decompressed: a gzip file's own record of it (its trailer), where plausible;
    else eight times its size."""
    if not compression:
        return size
    try:
        fd, _ = textio.open_regular(path)
        try:
            tail = os.pread(fd, 4, max(0, size - 4))
        finally:
            os.close(fd)
    except (OSError, textio.InputProblem):
        tail = b""
    isize = int.from_bytes(tail, "little") if len(tail) == 4 else 0  # the size modulo 4 GiB (one member)
    return isize if size <= isize <= textio.expansion_bound(size) else size * 8


def _last_parts(data: bytes, n: int, whole: bool) -> list[bytes]:
    """The last n lines of `data` (a file's end; without the line it starts inside unless `whole`)."""
    if not data:
        return []
    return last_split(data[:-1] if data.endswith(b"\n") else data, n, drop_first=not whole)


def exact_share(size: int, exact_bytes: int | None) -> int:
    """The bytes of a file read exactly: its share, or where none was given, that of a job of this one file."""
    return min(size, limits.EXACT_JOB_BYTES) if exact_bytes is None else exact_bytes


class LineScanner(BlockScan, LineJudge):
    """Iterate the interesting lines of one file: (line number, text, steps_only)."""

    def __init__(self, path: str, stats: textio.ReadStats, size_hint: int, triggers: Triggers,
                 exact_bytes: int | None = None):
        """`exact_bytes`: how much of the file's end is read line by line (its share of the job's exact budget,
        exact_shares; None: the share of a job of this one file); the lines before it are summarised."""
        self.stats, self.trig = stats, triggers
        self.fh = _open(path, stats)
        enc = textio.sniff_encoding(self.fh.peek(4096)[:4096])
        if enc not in ("utf-8", "utf-8-sig"):
            self.fh.close()
            raise NotStreamable(enc)
        exact_bytes = exact_share(size_hint, exact_bytes)
        size = self.fh.size if type(self.fh) is _PlainReader else size_hint
        # the exact part: the lines that start at this offset or later (0: the whole file, as a line reader reads it)
        self.exact_from = max(0, min(size, textio.MAX_FILE_BYTES) - exact_bytes)
        self.exact = self.exact_from == 0
        self.summarised = not self.exact  # whether some lines were summarised (counted, sampled, capped)
        self._pos = 0  # offset (after a BOM) of the next byte _read returns
        self.stride = max(MIN_STRIDE, size_hint // limits.MAX_SAMPLES)
        self.nccl_counts = {name: 0 for _, name in NCCL_KINDS}
        self.sampled = {"progress_lines": 0, "step_lines": 0}
        self._pushback = b""
        self._started = False
        self._ends = (b"", b"")  # the last two blocks read from the file (its tail, without a copy per block)
        self._whole = True       # whether those two blocks are the whole file

    def whole_file(self) -> bytes | None:
        """The file's bytes when the block head_lines() read holds all of it (before the scan; a BOM left out), else
        None: a file that goes on beyond its first block, or not a plain file."""
        fh = self.fh
        if self._pushback and type(fh) is _PlainReader and fh.left <= 0 and fh.pos == fh.size:
            return self._pushback
        return None

    def _read(self) -> bytes:
        if self._pushback:
            block, self._pushback = self._pushback, b""
            self._pos += len(block)
            return block
        block = self.fh.read(limits.CHUNK)
        if not self._started:
            self._started = True
            if block.startswith(b"\xef\xbb\xbf"):
                block = block[3:]
        if block:
            if self._ends[0]:
                self._whole = False
            self._ends = (self._ends[1], block)
        self._pos += len(block)
        return block

    def _unread(self, data: bytes) -> None:
        """Give back bytes read last: the next _read returns them first."""
        self._pushback = data + self._pushback
        self._pos -= len(data)

    def _exact_cut(self, buf: bytes, end: int, mid: bool) -> int | None:
        """Where the exact part starts inside buf[:end] (the file's bytes from self._pos - len(buf); `mid`: buf
        starts inside a line): the first line start at or after exact_from; None when there is none before end."""
        if self.exact:
            return None
        rel = self.exact_from - (self._pos - len(buf))
        if rel >= end:
            return None
        if rel <= 0 and not mid:
            return 0
        i = buf.find(b"\n", max(0, rel - 1), end)
        return None if i < 0 else i + 1

    def tail_lines(self, n: int) -> list[tuple[int, str]]:
        """The file's last n lines (at most TAIL_BYTES of it) as (line number, cleaned text), once it is scanned."""
        prev, cur = self._ends
        data = cur if len(cur) >= TAIL_BYTES else prev[-(TAIL_BYTES - len(cur)):] + cur
        whole = self._whole and len(data) == len(prev) + len(cur)
        parts = _last_parts(data, n, whole)
        last = self.stats.lines
        clean = textio.clean
        # a line's end is what a terminal shows of it (the last redraw of a progress bar)
        return [(last - len(parts) + 1 + i, clean(_decode(p[-4096:]))) for i, p in enumerate(parts)]

    def head_lines(self, n: int) -> list[str]:
        """The first n lines (cleaned, decoded) without consuming them: for file-level prefix schemes."""
        if not self._pushback:
            self._unread(self._read())
        buf, pos, out = self._pushback, 0, []
        head = buf[:HEAD_BYTES]
        parts = head.split(b"\n", n)
        if len(parts) > n or len(head) == len(buf):  # n whole lines (or the whole file) in the head: split in C
            parts = [p if len(p) <= 1024 else p[:1024] for p in parts[:n]]  # the start tells the prefix scheme
            joined = b"\n".join(parts)
            if not _needs_clean(joined):
                # one decode gives what a decode per line gives (a newline never sits inside a UTF-8 sequence, so a
                # broken or cut one is replaced the same way)
                return _decode(joined).split("\n")
            clean = textio.clean
            return [clean(_decode(p)) for p in parts]
        for _ in range(n):  # no split of the whole block: a head line can be a megabyte of progress redraws
            j = buf.find(b"\n", pos)
            end = len(buf) if j < 0 else j
            out.append(textio.clean(_decode(buf[pos:min(end, pos + 1024)])))  # the start tells the prefix scheme
            if j < 0:
                break
            pos = j + 1
        return out

    def close(self) -> None:
        self.fh.close()

    def _blocks(self) -> Iterator[tuple[bytes, int, int, bool, bool]]:
        """Runs of whole lines as (buffer, start, end, continues, dirty): buf[start:end] ends after a `\\n`, or is a
        long line cut between two redraws (continues: the next run goes on with the same line), a truncated line
        or the file's last line. `dirty`: NUL bytes or ANSI escapes inside (to be cleaned line by line)."""
        carry = b""
        mid = False  # carry starts inside a line (the rest of a long line cut between redraws)
        while True:
            block = self._read()
            if not block:
                if carry:
                    if self._exact_cut(carry, len(carry), mid) == 0:  # the last line (no break after it) is exact
                        self._unread(carry)
                        return
                    yield carry, 0, len(carry), False, b"\x00" in carry or b"\x1b" in carry
                return
            buf = carry + block if carry else block
            last_nl = buf.rfind(b"\n")
            if last_nl < 0:
                carry = buf
                cr = carry.rfind(b"\r") if len(carry) >= limits.CHUNK else -1
                dirty = b"\x00" in carry or b"\x1b" in carry
                if cr > 0:  # a very long progress line: cut between two redraws and go on with the same line
                    carry, mid = buf[cr:], True
                    yield buf, 0, cr, True, dirty
                elif len(carry) >= limits.LONG_LINE:  # no break at all: keep the first limits.LONG_LINE bytes, skip the rest
                    carry = b""
                    self.stats.truncated_lines += 1
                    self._skip_rest_of_line()
                    yield buf, 0, limits.LONG_LINE, False, dirty
                continue
            cut = self._exact_cut(buf, last_nl + 1, mid)
            if cut is not None:  # the exact part starts in this run: the lines before it, then the rest goes back
                self._unread(buf[cut:])
                if cut:
                    yield buf, 0, cut, False, b"\x00" in buf[:cut] or b"\x1b" in buf[:cut]
                return
            carry, mid = buf[last_nl + 1:], False
            yield buf, 0, last_nl + 1, False, b"\x00" in buf or b"\x1b" in buf

    def _pieces(self) -> Iterator[tuple[list, bool]]:
        """Runs of whole, cleaned lines; the flag says the run's last line goes on in the next run.

        A line longer than limits.SPAN_MIN comes as a _Span of the block it lies in: copying megabytes of progress redraws
        out of the block (what `split` does) costs more than judging them."""
        carry = b""
        mid = False  # carry starts inside a line (the rest of a long line cut between redraws)
        while True:
            block = self._read()
            if not block:
                if carry:
                    if self._exact_cut(carry, len(carry), mid) == 0:  # the last line (no break after it) is exact
                        self._unread(carry)
                        return
                    yield _clean([carry], carry), False
                return
            buf = carry + block if carry else block
            last_nl = buf.rfind(b"\n")
            stop = False
            if last_nl >= 0:
                cut = self._exact_cut(buf, last_nl + 1, mid)
                if cut is not None:  # the exact part starts in this run: the lines before it, the rest goes back
                    self._unread(buf[cut:])
                    if not cut:
                        return
                    buf, last_nl, stop = buf[:cut], cut - 1, True
            if last_nl < 0:
                carry, lines, cont = buf, [], False
                cr = carry.rfind(b"\r") if len(carry) >= limits.CHUNK else -1
                if cr > 0:  # a very long progress line: cut between two redraws and go on with the same line
                    lines, carry, cont, mid = [_span_or_bytes(carry, 0, cr)], carry[cr:], True, True
                elif len(carry) < limits.LONG_LINE:
                    continue
                else:       # no break at all: keep the first limits.LONG_LINE bytes, skip to the next newline
                    lines, carry = [carry[:limits.LONG_LINE]], b""
                    self.stats.truncated_lines += 1
                    self._skip_rest_of_line()
                yield _clean_items(lines, buf), cont
                continue
            carry, mid = buf[last_nl + 1:], False
            if b"\x00" in buf or b"\x1b" in buf:  # rare: clean line by line (copies)
                yield _clean(buf[:last_nl].split(b"\n"), buf), False
                if stop:
                    return
                continue
            lines = []
            pos = 0
            find = buf.find
            while pos <= last_nl:
                j = find(b"\n", pos)
                lines.append(buf[pos:j] if j - pos <= limits.SPAN_MIN else _Span(buf, pos, j))
                pos = j + 1
            yield lines, False
            if stop:
                return

    def _skip_rest_of_line(self) -> None:
        while True:
            block = self._read()
            if not block:
                return
            i = block.find(b"\n")
            if i >= 0:
                self._unread(block[i + 1:])
                return

    def __iter__(self) -> Iterator[tuple[int, str, bool]]:
        try:
            yield from self._scan()
        finally:  # also when the consumer stops early
            self.close()

    def _scan(self) -> Iterator[tuple[int, str, bool]]:
        trig = self.trig
        exact = self.exact
        self.exact = False  # the summarised part first (none when the whole file is exact)
        self.long_fast = trig.fast_events() is not None
        self.pending_bar: dict[bytes, tuple] = {}
        self.pending_step: dict[tuple, tuple] = {}  # (stream, shape) -> the last step line of that shape
        self.bar_seen = self.step_seen = self.next_bar = self.next_step = 0
        self.window_end = self.frame_end = 0
        self.counts = [0, 0, 0, 0]
        self.progress = self.steps_n = 0
        self.info_seen: dict[bytes, int] = {}
        self.pending_info: dict[bytes, tuple] = {}
        self.pending_err: dict[tuple, tuple] = {}
        self.unresolved: list = []  # skipped regions not yet looked at for their last progress/step line
        self.capped_shapes: dict = {}  # shape key -> True (informational) or the capped (key, stream, rank) keys
        self.info_skipped = 0
        self.plain = None  # the last ordinary line of the exact part, handed over before the next event line
        self.info_cap = INFO_CAP
        self.block_counts = False
        lineno = 0
        if not exact:
            if self.long_fast and SCAN_BLOCKS:
                lineno = yield from self._scan_blocks()
            else:
                lineno = yield from self._scan_lines()
            yield from self._flush()  # what the summarised part holds back comes before the exact part
        # the exact part: every line that can yield a row, as a line reader gives it
        self.exact, self.long_fast, self.block_counts, self.info_cap = True, False, False, None
        lineno = yield from self._scan_lines(lineno)
        self.stats.lines = lineno
        if self.stats.truncated_lines:
            self.stats.problems.append(f"{self.stats.truncated_lines} line(s) longer than {limits.LONG_LINE} bytes "
                                       f"without a line break truncated")
        for i, (_, name) in enumerate(NCCL_KINDS):
            self.nccl_counts[name] = self.counts[i]
        self.sampled = {"progress_lines": self.progress, "step_lines": self.steps_n,
                        "repeated_event_lines": self.info_skipped}

    def _flush(self):
        """The held-back lines of the summarised part: the latest of capped shapes, the last progress/step lines."""
        if self.unresolved:
            self._resolve()
        for ln, raw in sorted(list(self.pending_info.values()) + list(self.pending_err.values())):
            yield from self._event_items(ln, raw)
        rest = sorted(list(self.pending_bar.values()) + list(self.pending_step.values()), key=lambda t: t[0])
        for ln, lazy in rest:
            text = lazy.text()
            if text is not None:
                yield ln, text, True
        for held in (self.pending_info, self.pending_err, self.pending_bar, self.pending_step):
            held.clear()

    def _scan_lines(self, lineno: int = 0):
        """Every line through `_one` from line lineno + 1 (the exact part, and the summarised part where Hyperscan
        is missing), up to where the exact part starts (summarised) or to the end (exact)."""
        cont = False
        one = self._one
        for lines, cont_next in self._pieces():
            for idx, line in enumerate(lines):
                if not (cont and idx == 0):
                    lineno += 1
                out = one(lineno, line)
                if out:
                    yield from out
            cont = cont_next
        return lineno

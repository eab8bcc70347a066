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
import re
from typing import Iterator

import regex

try:  # numpy finds a block's line breaks several times faster than bytes.count (optional: pandas brings it)
    import numpy as _np
except ImportError:  # pragma: no cover
    _np = None

from postmortem.parsers import literal_scan
from postmortem.parsers.formats import trigger_regex
from postmortem.ingest import textio

# The exact budget: this much of a job's text is read line by line in all, every line that can yield a row handed
# over as a line reader would (every progress, step and NCCL line); the rest of every file is summarised. It is
# shared by the job's files (exact_shares): a job of a few small logs is read exactly, one of thousands of ranks is
# summarised whatever the size of its files, and what is kept exactly costs a fixed amount of time and memory.
EXACT_JOB_BYTES = 512 * 1024
CHUNK = 1 << 20
SHORT_SPAN = 16 * 1024      # spans shorter than this have their newlines counted by bytes.count
LONG_LINE = 8 << 20           # a line with neither `\n` nor `\r` is cut after this many bytes
KEY_MEMO_MAX = 4096           # keys longer than this are not memoised
HEAD_BYTES = 128 * 1024       # head_lines splits this much in C when the lines it wants lie within
SPAN_MIN = 64 * 1024          # lines longer than this are not copied out of their block (see _Span)
MEMO_CAP = 200_000            # memo entries per process before it is cleared
MAX_SAMPLES = 16              # sampled progress / step lines per file (plus the exact last ones)
MIN_STRIDE = 8 * 1024
ERROR_CAP = 64                # error lines of one shape and rank handed over per big file (then: the latest)
INFO_CAP = 4                  # informational event lines of one shape handed over per big file (then: the latest)
SCAN_BLOCKS = True            # big files: whole-block Hyperscan scanning (False: every line judged on its own)
TAIL_BYTES = 64 * 1024        # the end of every file kept for its last lines (postmortem.ranks.odd_lines)
SEGMENT_LEVEL = 8             # an event line with more `\r` segments than this is handed over segment by segment

F_EVENT, F_BAR, F_STEP, F_WEAK = 1, 2, 4, 8
F_NCCL_CHANNEL, F_NCCL_RING, F_NCCL_TREES, F_NCCL_OTHER = 16, 32, 64, 128
F_NCCL = F_NCCL_CHANNEL | F_NCCL_RING | F_NCCL_TREES | F_NCCL_OTHER
F_WINDOW = 256
F_ERRLINE = 1024  # an event trigger of an error-level format: the last progress line before it is handed over too
F_EXCWORD = 512  # only a weak trigger (`Warning`): a line that matters only inside an open traceback
F_GATED = 2048  # an event only by the triggers of `scan: regex` formats: an event where one of their regexes matches
_EVENT_BITS = F_EVENT | F_GATED | F_ERRLINE | F_WINDOW
FRAME_REACH = 62  # lines after a traceback frame where a weak-trigger line can still close it (textlog.MAX_OPEN_GAP)
RESOLVE_REACH = 1 << 20  # bytes before an error line (or the end) searched for the last progress/step line
STRIDE_WALK = 16   # lines looked at after a stride mark for a progress/step line to sample
REGION_WALK = 64   # lines walked back from the end of a skipped region for its last step line
CONFIG_HEAD = 64 * 1024      # bytes at a big file's start where every case-insensitive config word is reported
NCCL_COUNT_HEAD = 64 * 1024   # block mode counts NCCL INFO lines in the first this many bytes of a file
NCCL_COUNT_NEEDLES = ((0, b"NCCL INFO Channel"), (1, b"NCCL INFO Ring"), (2, b"NCCL INFO Tree"))
NCCL_KINDS = ((F_NCCL_CHANNEL, "channel"), (F_NCCL_RING, "ring"), (F_NCCL_TREES, "trees"), (F_NCCL_OTHER, "other"))

# Bytes that vary between lines of one shape: digits, blanks, tqdm's ascii and unicode bar glyphs (U+2588-U+258F).
DELETE = b"0123456789 \t#" + bytes([0xE2, 0x96]) + bytes(range(0x88, 0x90))
_RANK_DIGITS_RE = re.compile(rb"(?i)rank\D{0,3}(\d+)")  # the rank a repeated error line names (part of its cap key)
ANSI_BYTES_RE = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\n]*\x07|\x1b[()][AB012]")
# NCCL INFO lines that state facts the tables need (rank map, world size, version, transport, error trails).
NCCL_FACTS = ["Init COMPLETE", "Init START", "nRanks", "NCCL version", "Using network", " : Using "]
NCCL_TRAIL_KEY_RE = re.compile(rb"NCCLINFO[\w/-]+\.(?:cc|cu|cpp|c|h):->")
# The raw form for Hyperscan leaves out the `NCCL INFO` part (on half the lines of an NCCL_DEBUG=INFO log, it
# halves the scan speed); the shape key check (NCCL_TRAIL_KEY_RE) then asks for it.
NCCL_TRAIL_RAW = rb"(?:\.cc|\.cu|\.cpp|\.c|\.h):[0-9]*[ \t]*->"


def exact_shares(sizes: list[int], budget: int | None = None) -> list[int]:
    """Each file's share of the job's exact budget (EXACT_JOB_BYTES): equal shares, where a file smaller than its
    share leaves the rest to the others (from the sizes alone, so every engine and worker gets the same shares)."""
    out = [0] * len(sizes)
    left = EXACT_JOB_BYTES if budget is None else budget
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


def exact_share(size: int, exact_bytes: int | None) -> int:
    """The bytes of a file read exactly: its share, or where none was given, that of a job of this one file."""
    return min(size, EXACT_JOB_BYTES) if exact_bytes is None else exact_bytes


def normalise(text: str | bytes) -> bytes:
    """The shape key of a line or trigger (digits, blanks and bar glyphs removed)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return data.translate(None, DELETE)


class Triggers:
    """The compiled classification of shape keys for one set of triggers (built once per process)."""

    def __init__(self, events: list[str], events_nocase: list[str], windows: dict[str, int], steps: list[str],
                 steps_nocase: list[str], weak_steps_nocase: list[str], weak_events: list[str] = (),
                 error_events: list[str] | None = None, gates: tuple = (), gated: tuple = (),
                 scans: tuple = ()):
        """`gates`: (pattern, caseless) of the `scan: regex` formats, and `gated`, their triggers (in `events`)
        that no other format shares: a line with only those is an event only where a gate pattern matches it
        (gate), and the whole-block scan looks for the patterns instead of these short, common words.
        `scans`: more (pattern, caseless) the whole-block scan finds every match of (lines that hold an event
        trigger anyway, such as a config echo's `_every=`, whose words alone are reported once per block)."""
        self.gates, self.scans, gated = tuple(gates), tuple(scans), frozenset(gated)
        events = [t for t in events if t not in set(weak_events)]
        self.gated_re = trigger_regex(sorted({normalise(t) for t in gated} - {b""})) if gated else None
        # ASCII classes, as Hyperscan's: every line this confirms, the whole-block scan has found
        self.gate_re = regex.compile("|".join(f"(?{'i' if caseless else ''}:{p})" for p, caseless in gates),
                                     regex.M | regex.A) if gates else None
        # the events whose line gets the stream's last progress/step line handed over before it (the step of death
        # and the phase an error happened in); None: every event
        self.error_re = trigger_regex(sorted({normalise(t) for t in error_events if t not in set(weak_events)}
                                             - {b""})) if error_events is not None else None
        self.excword_re = trigger_regex(sorted({normalise(t) for t in weak_events})) if weak_events else None
        lits = {normalise(t) for t in list(events) + NCCL_FACTS + list(windows) if t not in gated}
        lits.discard(b"")
        self.event_re = trigger_regex(sorted(lits))
        self.event_nocase_re = re.compile("|".join(re.escape(t) for t in events_nocase).encode(), re.I) \
            if events_nocase else None
        self.windows = [(normalise(k), n) for k, n in windows.items()]
        self.step_re = re.compile(b"|".join([re.escape(normalise(s)) for s in steps] +
                                            [b"(?i:" + re.escape(normalise(s)) + b")" for s in steps_nocase]))
        self.weak_re = re.compile("|".join(re.escape(t) for t in weak_steps_nocase).encode(), re.I) \
            if weak_steps_nocase else None
        self.memo: dict[bytes, int] = {}
        self.window_len: dict[bytes, int] = {}
        self.pattern_text = sorted({t for t in list(events) + NCCL_FACTS + list(windows) if t not in gated})
        self.events_nocase = list(events_nocase)
        self._fast = None
        self._config = None

    def fast_events(self) -> literal_scan.LiteralSet | None:
        """The event triggers as raw literals for the fast matcher (None when Hyperscan is not installed). The
        case-insensitive config words are reported once per scanned block: a config echo sits at the start of a
        log (`fast_config` finds every one in a file's first 64 KiB); later, `epoch 3 batch 120` on every line is
        progress, not configuration."""
        if self._fast is None:
            if not literal_scan.available():
                return None
            self._fast = literal_scan.LiteralSet([t.encode() for t in self.pattern_text], [], [NCCL_TRAIL_RAW],
                                                 once_nocase=[t.encode() for t in self.events_nocase],
                                                 prefilters=[(p.encode(), c) for p, c in self.gates + self.scans])
        return self._fast

    def fast_config(self) -> literal_scan.LiteralSet | None:
        """Every occurrence of the case-insensitive config words (for a file's head)."""
        if self._config is None:
            if not literal_scan.available():
                return None
            self._config = literal_scan.LiteralSet([], [t.encode() for t in self.events_nocase])
        return self._config

    def long_line_flags(self, line) -> int | None:
        """Flags of a long `\\r`-joined line (bytes or a _Span) without normalising it: None when it may hold an
        event (the caller then classifies every segment), else the flags of its first and last redraw.

        A long line with no event trigger anywhere (the fast matcher reads its raw bytes) is a run of progress
        redraws; its first and last segments say which kind of bar or step line it is."""
        fast = self.fast_events()
        if fast is None or fast.search(line.view() if isinstance(line, _Span) else line):
            return None
        first = line.find(b"\r")
        end = len(line)
        while end > 0 and line[end - 1:end] == b"\r":
            end -= 1
        last = line[line.rfind(b"\r", 0, end) + 1:end]
        f = self.flags(line[:first].translate(None, DELETE)) | self.flags(last.translate(None, DELETE))
        return None if f & F_EVENT else f

    def gate(self, f: int, line) -> int:
        """A line's flags, without its event bits where they come only from gated words (F_GATED) and no gate
        pattern matches the line."""
        if not f & F_GATED or self.gate_re is None:
            return f
        raw = line if type(line) is bytes else line.bytes()
        return f if self.gate_re.search(raw.decode("utf-8", "replace")) is not None else f & ~_EVENT_BITS

    def classify(self, key: bytes) -> int:
        """Flags of one segment's shape key (no `\\r` inside)."""
        f = 0
        if self.event_re.search(key) or (self.event_nocase_re is not None and self.event_nocase_re.search(key)) \
                or NCCL_TRAIL_KEY_RE.search(key):
            f |= F_EVENT
        elif self.gated_re is not None and self.gated_re.search(key):
            f |= F_EVENT | F_GATED
        if f & F_EVENT:
            if self.error_re is None or self.error_re.search(key) or NCCL_TRAIL_KEY_RE.search(key):
                f |= F_ERRLINE
            win = max((n for w, n in self.windows if w in key), default=0)
            if win:
                f |= F_WINDOW
                self.window_len[key] = win
        elif self.excword_re is not None and self.excword_re.search(key):
            f |= F_EXCWORD
        if b"%|" in key:
            f |= F_BAR  # a progress bar is sampled as one: words in its description do not make it a step line
        elif self.step_re.search(key):
            f |= F_STEP
        elif self.weak_re is not None and self.weak_re.search(key):
            f |= F_WEAK
        rest = None
        for level in (b"NCCLINFO", b"NCCLTRACE", b"NCCLCALL"):
            i = key.find(level)
            if i >= 0:
                rest = key[i + len(level):]
                break
        if rest is not None and not f & F_EVENT:
            f |= (F_NCCL_CHANNEL if rest.startswith(b"Channel") else F_NCCL_RING if rest.startswith(b"Ring")
                  else F_NCCL_TREES if rest.startswith((b"Trees", b"Tree")) else F_NCCL_OTHER)
        return f

    def flags(self, key: bytes) -> int:
        """Flags of a line's key, `\\r` segments combined; memoised for short keys."""
        f = self.memo.get(key)
        if f is not None:
            return f
        if b"\r" in key:
            f = 0
            for seg in set(key.split(b"\r")):
                f |= self.flags(seg)
        else:
            f = self.classify(key)
        if len(key) <= KEY_MEMO_MAX:
            if len(self.memo) >= MEMO_CAP:
                self.memo.clear()
            self.memo[key] = f
        return f

    def window_of(self, key: bytes) -> int:
        if b"\r" in key:
            return max((self.window_of(s) for s in key.split(b"\r")), default=0)
        if key not in self.window_len:
            self.classify(key)
        return self.window_len.get(key, 0)


_COMPILED: dict = {}


def compile_triggers(**spec) -> Triggers:
    """Triggers for a spec (cached per process: the memo then serves every file this process reads)."""
    key = tuple((k, tuple(v.items()) if isinstance(v, dict) else tuple(v)) for k, v in sorted(spec.items()))
    trig = _COMPILED.get(key)
    if trig is None:
        trig = _COMPILED[key] = Triggers(**spec)
    return trig


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


def _cap_key(key: bytes, line) -> tuple:
    """What repeated error lines are counted by: their shape and the rank they come from (a launcher prefix with
    digits names it; else the first `rank N` in the line)."""
    sid = _stream_id(line)  # it reads the first 48 bytes only
    if sid and not sid.isalpha():
        return key, sid
    m = _RANK_DIGITS_RE.search(line, 0, 200) if _may_name_rank(key) else None
    return key, sid, m and m.group(1)


_RANK_IN_KEY: dict[bytes, bool] = {}


def _may_name_rank(key: bytes) -> bool:
    """False when a line of this shape key cannot hold `rank` (any case): the key keeps every letter of the line,
    so a line with the word has it in its key too. Memoised by key: a traceback line of an error flood skips the
    rank search then (it was most of the cost of such a line)."""
    found = _RANK_IN_KEY.get(key)
    if found is None:
        found = b"rank" in key.lower()
        if len(_RANK_IN_KEY) >= 4096:  # process-wide: bounded by entries, whatever the files hold
            _RANK_IN_KEY.clear()
        _RANK_IN_KEY[key] = found
    return found


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


class LineScanner:
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
        self.stride = max(MIN_STRIDE, size_hint // MAX_SAMPLES)
        self.nccl_counts = {name: 0 for _, name in NCCL_KINDS}
        self.sampled = {"progress_lines": 0, "step_lines": 0}
        self._pushback = b""
        self._started = False
        self._ends = (b"", b"")  # the last two blocks read from the file (its tail, without a copy per block)
        self._whole = True       # whether those two blocks are the whole file

    def _read(self) -> bytes:
        if self._pushback:
            block, self._pushback = self._pushback, b""
            self._pos += len(block)
            return block
        block = self.fh.read(CHUNK)
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
        parts = data.split(b"\n")
        if parts and parts[-1] == b"":
            parts.pop()
        if not whole and parts:
            parts.pop(0)  # cut mid-line
        parts = parts[-n:]
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
                cr = carry.rfind(b"\r") if len(carry) >= CHUNK else -1
                dirty = b"\x00" in carry or b"\x1b" in carry
                if cr > 0:  # a very long progress line: cut between two redraws and go on with the same line
                    carry, mid = buf[cr:], True
                    yield buf, 0, cr, True, dirty
                elif len(carry) >= LONG_LINE:  # no break at all: keep the first LONG_LINE bytes, skip the rest
                    carry = b""
                    self.stats.truncated_lines += 1
                    self._skip_rest_of_line()
                    yield buf, 0, LONG_LINE, False, dirty
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

        A line longer than SPAN_MIN comes as a _Span of the block it lies in: copying megabytes of progress redraws
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
                cr = carry.rfind(b"\r") if len(carry) >= CHUNK else -1
                if cr > 0:  # a very long progress line: cut between two redraws and go on with the same line
                    lines, carry, cont, mid = [_span_or_bytes(carry, 0, cr)], carry[cr:], True, True
                elif len(carry) < LONG_LINE:
                    continue
                else:       # no break at all: keep the first LONG_LINE bytes, skip to the next newline
                    lines, carry = [carry[:LONG_LINE]], b""
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
                lines.append(buf[pos:j] if j - pos <= SPAN_MIN else _Span(buf, pos, j))
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
            self.stats.problems.append(f"{self.stats.truncated_lines} line(s) longer than {LONG_LINE} bytes "
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

    def _scan_blocks(self):
        """Whole-block scanning: one Hyperscan pass over each block's bytes finds every trigger; only the lines
        holding one (and the few lines after a traceback frame or summary header) go through `_one`. The lines in
        between are never split: their NCCL lines are counted with `bytes.count`, progress is sampled at byte
        strides, and the last progress/step line before each handed-over line is found by walking back a little."""
        fast = self.trig.fast_events()
        config = self.trig.fast_config()
        one = self._one
        done = 0        # lines finished before the current block
        foff = 0        # file offset of the current block's start
        self.next_mark = 0
        for buf, start, end, cont_next, dirty in self._blocks():
            if dirty:  # NUL bytes or ANSI escapes: cleaned line by line (rare)
                self.block_counts = False
                lines = _clean(buf[start:end].split(b"\n"), buf)
                if buf[end - 1:end] == b"\n":
                    lines.pop()
                for i, line in enumerate(lines):
                    out = one(done + i + 1, line)
                    if out:
                        yield from out
                n = buf.count(b"\n", start, end)
                done += n if (cont_next or buf[end - 1:end] == b"\n") else n + 1
                foff += end - start
                continue
            pos, pos_line = start, done + 1
            if not foff:  # NCCL INFO lines are counted in a big file's head (its init and topology lines)
                h = buf.find(b"\n", min(end, start + NCCL_COUNT_HEAD), end)
                self._count_nccl(buf, start, end if h < 0 else h + 1)
            self.block_counts = True
            view = memoryview(buf)[start:end]
            ends = fast.ends(view)
            if not foff:  # every config word in a file's head (its config echoes)
                ends = sorted(ends + config.ends(view[:CONFIG_HEAD]))
            if len(ends) * 100 > end - start > 8192:  # a trigger every 100 bytes or more often
                n_lines = buf.count(b"\n", start, end)
                yield from self._dense(buf, start, end, done + 1)
                done += n_lines if (cont_next or buf[end - 1:end] == b"\n") else n_lines + 1
                foff += end - start
                continue
            newlines = _newline_counter(buf, start, end)
            capped = self.capped_shapes
            later: dict = {}  # capped informational shape -> (start, end) of its latest line since the last hit
            skipped = 0
            le = -1
            for e in ends:
                p = start + e - 1
                if p < le:
                    continue  # another trigger on a line already handled
                ls = buf.rfind(b"\n", start, p) + 1
                if ls == 0:
                    ls = start
                if ls < pos:
                    continue
                le = buf.find(b"\n", p, end)
                if le < 0:
                    le = end
                if capped and le - ls <= KEY_MEMO_MAX:
                    k = buf[ls:le].translate(None, DELETE)
                    if capped.get(k) is True:  # one more of a capped informational shape: it stays in the region
                        later[k] = (ls, le)
                        skipped += 1
                        continue
                if later:
                    self._hold_latest(later, buf, pos, pos_line, newlines)
                nl = newlines(pos, ls)
                if ls > pos:
                    yield from self._region(buf, pos, ls, pos_line, foff - start, nl, newlines)
                pos_line += nl
                line = buf[ls:le] if le - ls <= SPAN_MIN else _Span(buf, ls, le)
                out = one(pos_line, line)
                if out:
                    yield from out
                if le < end:
                    pos, pos_line, le = le + 1, pos_line + 1, le + 1
                else:
                    pos = end
            if later:
                self._hold_latest(later, buf, pos, pos_line, newlines)
            self.info_skipped += skipped
            nl = 0
            if pos < end:
                nl = newlines(pos, end)
                yield from self._region(buf, pos, end, pos_line, foff - start, nl, newlines)
            n = pos_line - (done + 1) + nl
            done += n if (cont_next or buf[end - 1:end] == b"\n") else n + 1
            foff += end - start
        return done

    def _hold_latest(self, later: dict, buf: bytes, pos: int, pos_line: int, newlines) -> None:
        """The latest line of each capped informational shape since the last handed-over line becomes the one held
        for it (numbered only now: a shape repeated on every line costs one line count, not one per line)."""
        for k, (ls, le) in sorted(later.items(), key=lambda kv: kv[1][0]):
            pos_line += newlines(pos, ls)  # in order: each span counted once, not again from `pos`
            pos = ls
            self.pending_info[k] = (pos_line, buf[ls:le])
        later.clear()

    def _dense(self, buf: bytes, start: int, end: int, lineno: int):
        """A block where triggers are everywhere (an error flood): every line through `_one`, except the lines of
        a shape (and rank) already past its cap, which only become the latest of their kind, with a dict lookup."""
        seg = buf[start:end]
        lines = seg.split(b"\n")
        keys = seg.translate(None, DELETE).split(b"\n")
        if seg.endswith(b"\n"):
            lines.pop()
            keys.pop()
        capped = self.capped_shapes
        one = self._one
        memo_get = self.trig.memo.get
        pending_info, pending_err = self.pending_info, self.pending_err
        skipped = 0
        for line, k in zip(lines, keys):
            c = capped.get(k)
            if c is not None:
                if c is True:
                    pending_info[k] = (lineno, line)
                    skipped += 1
                    lineno += 1
                    continue
                ck = _cap_key(k, line)
                if ck in c:
                    pending_err[ck] = (lineno, line)
                    skipped += 1
                    lineno += 1
                    continue
            elif memo_get(k) == 0 and lineno > self.window_end and lineno > self.frame_end:
                lineno += 1
                continue
            out = one(lineno, line if len(line) <= SPAN_MIN else _Span(line, 0, len(line)))
            if out:
                yield from out
            lineno += 1
        self.info_skipped += skipped

    def _region(self, buf: bytes, a: int, b: int, lineno: int, base: int, nl: int, newlines):
        """Lines buf[a:b] (whole lines, no trigger in them) starting at line `lineno`; `base` + offset = file
        offset. Window lines go through `_one`; the rest is counted and sampled without splitting it."""
        reach = max(self.window_end, self.frame_end)
        one = self._one
        while a < b and lineno <= reach:
            j = buf.find(b"\n", a, b)
            j = b if j < 0 else j
            out = one(lineno, buf[a:j])
            if out:
                yield from out
            a, lineno = j + 1, lineno + 1
            if j < b:
                nl -= 1
            reach = max(self.window_end, self.frame_end)
        if a >= b:
            return
        # progress sampled at byte strides of the file: the first progress/step line at or after each mark (a mark
        # whose region ends first waits for the next region)
        stride = self.stride
        seen = None  # (start, end, line, flags) of the last line looked at: one long redraw line holds many marks
        at, at_line = a, lineno  # the last position numbered: the next is counted from it, not from `a` again
        while self.next_mark < base + b:
            m = max(a, self.next_mark - base)
            if seen is not None and seen[0] <= m <= seen[1]:
                ls = seen[0]  # what rfind would find, without searching the long line back again
            else:
                ls = buf.rfind(b"\n", a, m) + 1
                ls = a if ls == 0 else ls
            walked = 0
            found = False
            while walked < STRIDE_WALK and ls < b:
                walked += 1
                if seen is not None and seen[0] == ls:
                    _, j, line, f = seen
                else:
                    j = buf.find(b"\n", ls, b)
                    j = b if j < 0 else j
                    line = buf[ls:j] if j - ls <= SPAN_MIN else _Span(buf, ls, j)
                    f = self._quiet_flags(line)
                    seen = (ls, j, line, f)
                if f & (F_BAR | F_STEP):
                    seg = _last_segment_with(line, b"%|", max(2, m - ls + 2)) if f & F_BAR \
                        else self.step_segment(line if type(line) is bytes else line.bytes())
                    if seg is None and f & F_BAR:
                        seg = _last_segment_with(line, b"%|")
                    if seg is not None:
                        self.steps_n += 1
                        at_line += newlines(at, ls) if ls >= at else -newlines(ls, at)
                        at = ls
                        yield at_line, _text(seg), True
                    found = True
                    break
                ls = j + 1
            if not found and walked < STRIDE_WALK:
                break  # the region ended: the next one serves this mark
            self.next_mark = max(self.next_mark + stride, base + m + 1)
        # the last progress and step line before the region's end: looked for only when needed (before the next
        # error line, before a progress line judged on its own, at the end), newest region first
        self.unresolved.append((buf, a, b, lineno + nl - (1 if buf[b - 1:b] == b"\n" else 0), newlines))
        if len(self.unresolved) > 16:
            self._resolve()

    def _resolve(self) -> None:
        """pending_bar / pending_step from the skipped regions since the last call: the last bar redraw (found
        in C) and the last step line (a few lines walked back, then the last HF log dict found in C) of the
        newest region that has one; older regions are not looked at once both are found."""
        need_bar = need_step = True
        reach = RESOLVE_REACH  # bytes looked through, newest first: a log without bars is not searched whole
        for buf, a, b, last, newlines in reversed(self.unresolved):
            if reach <= 0:
                break
            a0, a = a, max(a, b - reach)
            reach -= b - a
            if a > a0:  # cut inside a line: start at the next line or redraw
                k = buf.find(b"\n", a, b)
                r = buf.find(b"\r", a, b if k < 0 else k)
                k = r if r >= 0 else k
                a = b if k < 0 else k + 1
            if need_bar:
                i = _rfind_pair(buf, b"%|", a, b)
                if i >= 0:
                    ls = buf.rfind(b"\n", a, i) + 1
                    ls = a if ls == 0 else ls
                    le = buf.find(b"\n", i, b)
                    le = b if le < 0 else le
                    line = buf[ls:le] if le - ls <= SPAN_MIN else _Span(buf, ls, le)
                    if self._quiet_flags(line) & F_BAR:
                        self.pending_bar[_stream_id(line[:64])] = (last - newlines(min(le + 1, b), b),
                                                                    _Ready(_last_segment_with(line, b"%|")))
                        need_bar = False
            if need_step:
                need_step = not self._last_step(buf, a, b, last, newlines)
            if not (need_bar or need_step):
                break
        self.unresolved.clear()

    def _last_step(self, buf: bytes, a: int, b: int, last: int, newlines) -> bool:
        """The last step line of each shape (up to 3: `step N loss`, `epoch E batch B`, ...) among the last lines
        of a region, else its last HF log dict; True when one was found."""
        j = b - 1 if buf[b - 1:b] == b"\n" else b
        ln = last
        shapes: set = set()
        for _ in range(REGION_WALK):
            if j < a or len(shapes) >= 3:
                break
            i = buf.rfind(b"\n", a, j) + 1
            i = a if i == 0 else i
            if j - i > 1:
                line = buf[i:j] if j - i <= SPAN_MIN else _Span(buf, i, j)
                f = self._quiet_flags(line)
                if f & F_STEP and not f & F_BAR:
                    k = (_stream_id(line[:64]), line[:200].translate(None, DELETE))
                    if k not in shapes:
                        shapes.add(k)
                        self.pending_step[k] = (ln, _Ready(self.step_segment(
                            line if type(line) is bytes else line.bytes())))
            j, ln = i - 1, ln - 1
        if shapes:
            return True
        i = _rfind_pair(buf, b"{'", a, j + 1 if j >= a else a)
        if i >= 0:
            ls = buf.rfind(b"\n", a, i) + 1
            ls = a if ls == 0 else ls
            le = buf.find(b"\n", i, b)
            le = b if le < 0 else le
            line = buf[ls:le]
            f = self._quiet_flags(line)
            if f & F_STEP and not f & F_BAR:
                self.pending_step[(_stream_id(line[:64]), line[:200].translate(None, DELETE))] = (
                    last - newlines(min(le + 1, b), b), _Ready(self.step_segment(line)))
                return True
        return False

    def _count_nccl(self, buf: bytes, a: int, b: int, sign: int = 1) -> None:
        """NCCL INFO lines in buf[a:b] by kind, with `bytes.count` (block mode: the whole block at once; the
        event lines among them are taken back out by `_one`)."""
        counts = self.counts
        n_info = buf.count(b"NCCL INFO", a, b)
        if n_info:
            seen = buf.count(b"NCCL INFO Channel", a, b)
            counts[0] += sign * seen
            if seen < n_info:
                for i, needle in NCCL_COUNT_NEEDLES[1:]:
                    c = buf.count(needle, a, b)
                    counts[i] += sign * c
                    seen += c
            counts[3] += sign * (n_info - seen)

    def _event_items(self, lineno: int, line) -> list:
        if b"\r" in line and (len(line) > KEY_MEMO_MAX or line.count(b"\r") > SEGMENT_LEVEL):
            return list(self._segments(lineno, line))
        return [(lineno, _text(line), False)]

    def _quiet_flags(self, line) -> int:
        """Flags of a line known to hold no event trigger (a long `\\r` line: of its first and last redraw)."""
        if len(line) > KEY_MEMO_MAX and b"\r" in line:
            first = line.find(b"\r")
            end = len(line)
            while end > 0 and line[end - 1:end] == b"\r":
                end -= 1
            lastseg = line[line.rfind(b"\r", 0, end) + 1:end]
            return self.trig.flags(line[:first].translate(None, DELETE)) | \
                self.trig.flags(lastseg.translate(None, DELETE))
        if type(line) is _Span:
            line = line.bytes()
        key = line.translate(None, DELETE)
        f = self.trig.memo.get(key)
        return self.trig.flags(key) if f is None else f

    def _one(self, lineno: int, line) -> list | None:
        """What one line hands over: [(line number, text, steps_only)], or None."""
        trig = self.trig
        f = None
        key = None
        if type(line) is _Span:
            if self.long_fast and b"\r" in line:
                f = trig.long_line_flags(line)
            if f is None or f & F_STEP or lineno <= self.window_end:
                line, f = line.bytes(), None  # the exact path needs the line's own bytes (rare)
        elif self.long_fast and len(line) > KEY_MEMO_MAX and b"\r" in line:
            f = trig.long_line_flags(line)
        if f is None:
            key = line.translate(None, DELETE)
            f = trig.memo.get(key)
            if f is None:
                f = trig.flags(key)
        if f & F_GATED:
            f = trig.gate(f, line)  # only the short words of a `scan: regex` format: an event if its regex matches
        if f & F_WINDOW and b'File "' in line:
            self.frame_end = max(self.frame_end, lineno + FRAME_REACH)
        if lineno <= self.window_end:
            if f & F_WINDOW:
                self.window_end = max(self.window_end, lineno + trig.window_of(key))
            return [(lineno, _text(line), False)]
        if not f:
            if self.exact and line.strip():
                self.plain = (lineno, line)
            return None
        if self.exact:  # the exact part: every line that can yield a row, as it is
            if f & F_WINDOW:
                self.window_end = max(self.window_end, lineno + trig.window_of(key))
            out = [(lineno, _text(line), not f & (F_EVENT | F_NCCL | F_EXCWORD))]
            if f & F_EVENT and self.plain is not None:
                # and the ordinary line before an event: what the job was doing when it happened
                out.insert(0, (self.plain[0], _text(self.plain[1]), False))
                self.plain = None
            return out
        if f & F_EXCWORD and not f & F_EVENT and lineno <= self.frame_end:
            return [(lineno, _text(line), False)]  # may close a traceback: `UserWarning: ...`
        out = []
        if f & F_EVENT and self.info_cap is not None:
            # Repeated event lines of a big file: the first INFO_CAP informational lines of each shape (a checkpoint
            # path, a config echo, an eval/sampling bar) and the first ERROR_CAP error lines of each shape and
            # rank are handed over; later ones only as the latest of their kind, before the next error line (info)
            # and at the end, so the phase an error happened in and each rank's last error are still there.
            if key is None:
                key = line.translate(None, DELETE) if len(line) <= KEY_MEMO_MAX else None
            if key is not None:
                if f & (F_ERRLINE | F_WINDOW):
                    cap_key, cap, held = _cap_key(key, line), ERROR_CAP, self.pending_err
                else:
                    cap_key, cap, held = key, INFO_CAP, self.pending_info
                n = self.info_seen.get(cap_key, 0)
                if n >= cap:
                    held[cap_key] = (lineno, bytes(line) if type(line) is bytes else line.bytes())
                    self.info_skipped += 1
                    if len(self.capped_shapes) < MEMO_CAP:
                        if cap is INFO_CAP:
                            self.capped_shapes[key] = True
                        elif self.capped_shapes.get(key) is not True:
                            self.capped_shapes.setdefault(key, set()).add(cap_key)
                    return None
                if len(self.info_seen) < MEMO_CAP:
                    self.info_seen[cap_key] = n + 1
        if f & F_EVENT:
            if self.block_counts and b"NCCL INFO" in line:  # counted with its block, but an event is no count
                b = line if type(line) is bytes else line.bytes()
                self._count_nccl(b, 0, len(b), -1)
            sid = _stream_id(line)
            if f & F_ERRLINE and self.unresolved:
                self._resolve()
            if f & F_ERRLINE and self.pending_info:
                for ln, raw in sorted(self.pending_info.values()):
                    out.extend(self._event_items(ln, raw))
                self.pending_info.clear()
            pending_bar, pending_step = self.pending_bar, self.pending_step
            due = []
            if f & F_ERRLINE:
                if sid in pending_bar:
                    due.append(pending_bar.pop(sid))
                for k in [k for k in pending_step if k[0] == sid]:
                    due.append(pending_step.pop(k))
            for ln, lazy in sorted(due, key=lambda t: t[0]):
                text = lazy.text()
                if text is not None:
                    out.append((ln, text, True))
            if f & F_WINDOW:
                self.window_end = max(self.window_end, lineno + trig.window_of(key))
            out.extend(self._event_items(lineno, line))
            return out
        if f & F_NCCL and not self.block_counts:
            for i, (bit, _) in enumerate(NCCL_KINDS):
                if f & bit:
                    self.counts[i] += 1
        stride = self.stride
        if f & (F_BAR | F_STEP) and self.unresolved:
            self._resolve()  # older than this line
        if f & F_BAR:
            sid = _stream_id(line)
            self.progress += 1
            before = self.bar_seen
            self.bar_seen += len(line)
            if self.bar_seen > self.next_bar:
                # one sample per stride mark crossed inside this line (an epoch can be one physical line)
                taken = 0
                while self.next_bar < self.bar_seen and taken < MAX_SAMPLES:
                    seg = _last_segment_with(line, b"%|", max(2, self.next_bar - before + 2))
                    if seg is None:
                        seg = _last_segment_with(line, b"%|")
                    if seg is not None:
                        out.append((lineno, _text(seg), True))
                        taken += 1
                    self.next_bar += stride
                self.next_bar = max(self.next_bar, self.bar_seen)
            # a span's last redraw is cut out now: a pending sample must not hold its whole block
            self.pending_bar[sid] = (lineno, _Lazy(line, b"%|") if type(line) is bytes
                                     else _Ready(_last_segment_with(line, b"%|")))
        if f & F_STEP:
            sid = _stream_id(line)
            self.steps_n += 1
            self.step_seen += len(line)
            lazy = _Lazy(line, None, self)
            k = (sid, key[:200] if key is not None else None)
            if self.step_seen > self.next_step:
                self.next_step = self.step_seen + stride
                text = lazy.text()
                if text is not None:
                    out.append((lineno, text, True))
                self.pending_step.pop(k, None)
            else:
                self.pending_step[k] = (lineno, lazy)
        return out

    # -- helpers that run only for the few lines handed over
    def _segments(self, lineno: int, line: bytes) -> Iterator[tuple[int, str, bool]]:
        """An event line of many `\\r` segments: its trigger segments (runs of one shape: first and last)."""
        run = self._one_bar_run(line)
        if run is not None:  # the common case, decided in C: every segment a redraw of one event bar
            first, last = run
            yield lineno, _text(first), False
            if last is not None:
                yield lineno, _text(last), True
            return
        flags_of = self.trig.flags
        prev_key = None
        prev_bar = 0
        run_last = None
        last_bar = None
        for seg in line.split(b"\r"):
            if not seg.strip():
                continue
            k = seg.translate(None, DELETE)
            f = flags_of(k)
            if f & F_GATED:
                f = self.trig.gate(f, seg)
            if f & F_EVENT:
                if f & F_BAR:  # redraws of one bar (same description) are one run, however its numbers change
                    k = k[: k.find(b"%|")]
                if k == prev_key:
                    run_last = seg
                    continue
                if run_last is not None:  # a bar run's last redraw only adds its step
                    yield lineno, _text(run_last), bool(prev_bar)
                    run_last = None
                prev_bar = f & F_BAR
                if last_bar is not None:
                    yield lineno, _text(last_bar), True
                    last_bar = None
                prev_key = k
                yield lineno, _text(seg), False
            else:
                if run_last is not None:
                    yield lineno, _text(run_last), bool(prev_bar)
                    run_last = None
                prev_key = None
                if f & (F_BAR | F_STEP):
                    last_bar = seg
        if run_last is not None:
            yield lineno, _text(run_last), bool(prev_bar)
        if last_bar is not None:
            yield lineno, _text(last_bar), True

    def _one_bar_run(self, line: bytes) -> tuple[bytes, bytes | None] | None:
        """(first, last) segment when every non-blank segment is a redraw of one bar whose description holds an
        event trigger (a sampling or validation bar): what the segment walk below yields for such a line, found
        with one translate and two splits instead of a Python step per redraw. None for any other line."""
        keys = line.translate(None, DELETE).split(b"\r")
        head = next((k for k in keys if k), None)
        if head is None:
            return None
        cut = head.find(b"%|")
        if cut < 0:
            return None
        desc = head[:cut]
        if not self.trig.flags(desc) & F_EVENT:
            return None
        prefix = desc + b"%|"
        segs = line.split(b"\r")
        picked = []
        for key, seg in zip(keys, segs):
            if not key.startswith(prefix):
                if key or seg.strip():  # another shape, or a segment of digits only: walk it the slow way
                    return None
                continue
            picked.append(seg)
        if not picked or not picked[0].strip():
            return None
        return picked[0], (picked[-1] if len(picked) > 1 else None)

    def step_segment(self, line: bytes) -> bytes | None:
        """The last `\\r` segment of a line that is a step line and not a progress bar."""
        if b"\r" not in line:
            return line
        step_re = self.trig.step_re
        for seg in reversed(line.split(b"\r")):
            if b"%|" not in seg and step_re.search(seg.translate(None, DELETE)):
                return seg
        return None


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
    return _Span(buf, start, end) if end - start > SPAN_MIN else buf[start:end]


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

    def __init__(self, line: bytes, needle: bytes | None, scanner: LineScanner | None = None):
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

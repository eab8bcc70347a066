"""Bytes-level prefilter for big text logs: read a file once in chunks and hand the line parser only the lines that
can yield a row; progress bars and step lines become a bounded sample, NCCL INFO topology lines become counts.

How a line is judged without running the parser's regex cascade on it: its *shape key* is the line with digits,
blanks and progress-bar glyphs deleted (`bytes.translate`, C speed). Lines of one shape share a key (every tqdm
redraw of a bar, every `Channel 03/0 : 5[5] -> 6[6] via P2P/IPC/read`), so the key is classified once and the
verdict memoised. Deleting bytes maps an occurrence of a trigger inside the line to an occurrence of the equally
normalised trigger inside the key, so a line that contains a trigger is never skipped.

A line with none of the parser's triggers is skipped: it could not yield a row. Files smaller than
SUMMARY_MIN_BYTES are otherwise handed over exactly as a line-by-line reader would (every progress, step and NCCL
line included). Bigger files are summarised:
- a line with an event trigger is handed over whole; a long `\\r`-joined line only with its trigger segments
  (a run of equal-shape segments as its first and last one; the redraws of one bar, e.g. a sampling bar, as
  its first redraw and the step row of its last);
- progress-bar lines and step lines (HF log dicts, `step N | loss`, Megatron iterations) are sampled at a byte
  stride (about MAX_SAMPLES per file), plus the last one of each output stream before every handed-over line and at
  the end of the file, so the step of death and each rank's last step are exact;
- NCCL INFO lines are counted by kind (channel, ring, trees, other) except the ones that carry facts
  (communicator init, version, network, error trails), which are handed over;
- traceback frames and torchrun summary blocks open a window of following lines handed over unconditionally.
"""
from __future__ import annotations

import os
import re
from typing import Iterator

from parsers import literal_scan
from parsers.formats import trigger_regex
from postmortem import textio

SUMMARY_MIN_BYTES = 256 * 1024  # smaller files: every progress/step/NCCL line is handed over (nothing summarised)
CHUNK = 1 << 20
LONG_LINE = 8 << 20           # a line with neither `\n` nor `\r` is cut after this many bytes
KEY_MEMO_MAX = 4096           # keys longer than this are not memoised
SPAN_MIN = 64 * 1024          # lines longer than this are not copied out of their block (see _Span)
MEMO_CAP = 200_000            # memo entries per process before it is cleared
MAX_SAMPLES = 24              # sampled progress / step lines per file (plus the exact last ones)
MIN_STRIDE = 8 * 1024
SEGMENT_LEVEL = 8             # an event line with more `\r` segments than this is handed over segment by segment

F_EVENT, F_BAR, F_STEP, F_WEAK = 1, 2, 4, 8
F_NCCL_CHANNEL, F_NCCL_RING, F_NCCL_TREES, F_NCCL_OTHER = 16, 32, 64, 128
F_NCCL = F_NCCL_CHANNEL | F_NCCL_RING | F_NCCL_TREES | F_NCCL_OTHER
F_WINDOW = 256
NCCL_KINDS = ((F_NCCL_CHANNEL, "channel"), (F_NCCL_RING, "ring"), (F_NCCL_TREES, "trees"), (F_NCCL_OTHER, "other"))

# Bytes that vary between lines of one shape: digits, blanks, tqdm's ascii and unicode bar glyphs (U+2588-U+258F).
DELETE = b"0123456789 \t#" + bytes([0xE2, 0x96]) + bytes(range(0x88, 0x90))
ANSI_BYTES_RE = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\n]*\x07|\x1b[()][AB012]")
# NCCL INFO lines that state facts the tables need (rank map, world size, version, transport, error trails).
NCCL_FACTS = ["Init COMPLETE", "Init START", "nRanks", "NCCL version", "Using network", " : Using "]
NCCL_TRAIL_KEY_RE = re.compile(rb"NCCLINFO[\w/-]+\.(?:cc|cu|cpp|c|h):->")
NCCL_TRAIL_RAW = rb"NCCL[ \t]+INFO[ \t]+[\w/-]+\.(?:cc|cu|cpp|c|h):[0-9]*[ \t]*->"


def normalise(text: str | bytes) -> bytes:
    """The shape key of a line or trigger (digits, blanks and bar glyphs removed)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return data.translate(None, DELETE)


class Triggers:
    """The compiled classification of shape keys for one set of triggers (built once per process)."""

    def __init__(self, events: list[str], events_nocase: list[str], windows: dict[str, int], steps: list[str],
                 steps_nocase: list[str], weak_steps_nocase: list[str]):
        lits = {normalise(t) for t in list(events) + NCCL_FACTS + list(windows)}
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
        self.pattern_text = sorted({t for t in list(events) + NCCL_FACTS + list(windows)})
        self.events_nocase = list(events_nocase)
        self._fast = None

    def fast_events(self) -> literal_scan.LiteralSet | None:
        """The event triggers as raw literals for the fast matcher (None when Hyperscan is not installed)."""
        if self._fast is None:
            if not literal_scan.available():
                return None
            self._fast = literal_scan.LiteralSet([t.encode() for t in self.pattern_text],
                                                 [t.encode() for t in self.events_nocase], [NCCL_TRAIL_RAW])
        return self._fast

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

    def classify(self, key: bytes) -> int:
        """Flags of one segment's shape key (no `\\r` inside)."""
        f = 0
        if self.event_re.search(key) or (self.event_nocase_re is not None and self.event_nocase_re.search(key)) \
                or NCCL_TRAIL_KEY_RE.search(key):
            f |= F_EVENT
            win = max((n for w, n in self.windows if w in key), default=0)
            if win:
                f |= F_WINDOW
                self.window_len[key] = win
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
                 exact: bool | None = None):
        self.stats, self.trig = stats, triggers
        self.exact = size_hint < SUMMARY_MIN_BYTES if exact is None else exact
        self.fh = _open(path, stats)
        enc = textio.sniff_encoding(self.fh.peek(4096)[:4096])
        if enc not in ("utf-8", "utf-8-sig"):
            self.fh.close()
            raise NotStreamable(enc)
        self.stride = max(MIN_STRIDE, size_hint // MAX_SAMPLES)
        self.nccl_counts = {name: 0 for _, name in NCCL_KINDS}
        self.sampled = {"progress_lines": 0, "step_lines": 0}
        self._pushback = b""
        self._started = False

    def _read(self) -> bytes:
        if self._pushback:
            block, self._pushback = self._pushback, b""
            return block
        block = self.fh.read(CHUNK)
        if not self._started:
            self._started = True
            if block.startswith(b"\xef\xbb\xbf"):
                block = block[3:]
        return block

    def head_lines(self, n: int) -> list[str]:
        """The first n lines (cleaned, decoded) without consuming them: for file-level prefix schemes."""
        if not self._pushback:
            self._pushback = self._read()
        buf, pos, out = self._pushback, 0, []
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

    def _pieces(self) -> Iterator[tuple[list, bool]]:
        """Runs of whole, cleaned lines; the flag says the run's last line goes on in the next run.

        A line longer than SPAN_MIN comes as a _Span of the block it lies in: copying megabytes of progress redraws
        out of the block (what `split` does) costs more than judging them."""
        carry = b""
        while True:
            block = self._read()
            if not block:
                if carry:
                    yield _clean([carry], carry), False
                return
            buf = carry + block if carry else block
            last_nl = buf.rfind(b"\n")
            if last_nl < 0:
                carry, lines, cont = buf, [], False
                cr = carry.rfind(b"\r") if len(carry) >= CHUNK else -1
                if cr > 0:  # a very long progress line: cut between two redraws and go on with the same line
                    lines, carry, cont = [_span_or_bytes(carry, 0, cr)], carry[cr:], True
                elif len(carry) < LONG_LINE:
                    continue
                else:       # no break at all: keep the first LONG_LINE bytes, skip to the next newline
                    lines, carry = [carry[:LONG_LINE]], b""
                    self.stats.truncated_lines += 1
                    self._skip_rest_of_line()
                yield _clean_items(lines, buf), cont
                continue
            carry = buf[last_nl + 1:]
            if b"\x00" in buf or b"\x1b" in buf:  # rare: clean line by line (copies)
                yield _clean(buf[:last_nl].split(b"\n"), buf), False
                continue
            lines = []
            pos = 0
            find = buf.find
            while pos <= last_nl:
                j = find(b"\n", pos)
                lines.append(buf[pos:j] if j - pos <= SPAN_MIN else _Span(buf, pos, j))
                pos = j + 1
            yield lines, False

    def _skip_rest_of_line(self) -> None:
        while True:
            block = self._read()
            if not block:
                return
            i = block.find(b"\n")
            if i >= 0:
                self._pushback = block[i + 1:]
                return

    def __iter__(self) -> Iterator[tuple[int, str, bool]]:
        try:
            yield from self._scan()
        finally:  # also when the consumer stops early
            self.close()

    def _scan(self) -> Iterator[tuple[int, str, bool]]:
        trig = self.trig
        exact = self.exact
        memo_get = trig.memo.get
        flags_of = trig.flags
        long_flags = trig.long_line_flags
        long_fast = not exact and trig.fast_events() is not None
        stride = self.stride
        pending_bar: dict[bytes, tuple] = {}
        pending_step: dict[bytes, tuple] = {}
        bar_seen = step_seen = 0
        next_bar = next_step = 0
        window_end = 0
        lineno = 0
        plain = None
        counts = [0, 0, 0, 0]
        cont = False
        progress = steps_n = 0
        for lines, cont_next in self._pieces():
            for idx, line in enumerate(lines):
                if not (cont and idx == 0):
                    lineno += 1
                f = None
                if type(line) is _Span:
                    if long_fast and b"\r" in line:
                        f = long_flags(line)
                    if f is None or f & F_STEP or lineno <= window_end:
                        line, f = line.bytes(), None  # the exact path needs the line's own bytes (rare)
                elif long_fast and len(line) > KEY_MEMO_MAX and b"\r" in line:
                    f = long_flags(line)
                if f is None:
                    key = line.translate(None, DELETE)
                    f = memo_get(key)
                    if f is None:
                        f = flags_of(key)
                if lineno <= window_end:
                    if f & F_WINDOW:
                        window_end = max(window_end, lineno + trig.window_of(key))
                    yield lineno, _text(line), False
                    continue
                if not f:
                    if exact and line.strip():
                        plain = (lineno, line)
                    continue
                if exact:  # a small file: every line that can yield a row, as it is
                    if f & F_EVENT and plain is not None:
                        # and the ordinary line before an event: what the job was doing when it happened
                        yield plain[0], _text(plain[1]), False
                        plain = None
                    if f & F_WINDOW:
                        window_end = max(window_end, lineno + trig.window_of(key))
                    yield lineno, _text(line), not f & (F_EVENT | F_NCCL)
                    continue
                if f & F_EVENT:
                    sid = _stream_id(line)
                    due = [pending_bar.pop(sid)] if sid in pending_bar else []
                    if sid in pending_step:
                        due.append(pending_step.pop(sid))
                    for ln, lazy in sorted(due, key=lambda t: t[0]):
                        text = lazy.text()
                        if text is not None:
                            yield ln, text, True
                    if f & F_WINDOW:
                        window_end = max(window_end, lineno + trig.window_of(key))
                    if b"\r" in line and (len(line) > KEY_MEMO_MAX or line.count(b"\r") > SEGMENT_LEVEL):
                        yield from self._segments(lineno, line)
                    else:
                        yield lineno, _text(line), False
                    continue
                if f & F_NCCL:
                    for i, (bit, _) in enumerate(NCCL_KINDS):
                        if f & bit:
                            counts[i] += 1
                if f & F_BAR:
                    sid = _stream_id(line)
                    progress += 1
                    before = bar_seen
                    bar_seen += len(line)
                    if bar_seen > next_bar:
                        # one sample per stride mark crossed inside this line (an epoch can be one physical line)
                        taken = 0
                        while next_bar < bar_seen and taken < MAX_SAMPLES:
                            seg = _last_segment_with(line, b"%|", max(2, next_bar - before + 2))
                            if seg is None:
                                seg = _last_segment_with(line, b"%|")
                            if seg is not None:
                                yield lineno, _text(seg), True
                                taken += 1
                            next_bar += stride
                        next_bar = max(next_bar, bar_seen)
                    # a span's last redraw is cut out now: a pending sample must not hold its whole block
                    pending_bar[sid] = (lineno, _Lazy(line, b"%|") if type(line) is bytes
                                        else _Ready(_last_segment_with(line, b"%|")))
                if f & F_STEP:
                    sid = _stream_id(line)
                    steps_n += 1
                    step_seen += len(line)
                    lazy = _Lazy(line, None, self)
                    if step_seen > next_step:
                        next_step = step_seen + stride
                        text = lazy.text()
                        if text is not None:
                            yield lineno, text, True
                        pending_step.pop(sid, None)
                    else:
                        pending_step[sid] = (lineno, lazy)
            cont = cont_next
        rest = sorted(list(pending_bar.values()) + list(pending_step.values()), key=lambda t: t[0])
        for ln, lazy in rest:
            text = lazy.text()
            if text is not None:
                yield ln, text, True
        self.stats.lines = lineno
        if self.stats.truncated_lines:
            self.stats.problems.append(f"{self.stats.truncated_lines} line(s) longer than {LONG_LINE} bytes "
                                       f"without a line break truncated")
        for i, (_, name) in enumerate(NCCL_KINDS):
            self.nccl_counts[name] = counts[i]
        self.sampled = {"progress_lines": progress, "step_lines": steps_n}

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

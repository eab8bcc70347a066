"""The prefilter's per-line judge (a mixin of LineScanner): which lines, or which `\r` segments of a line, are
handed over, capped, sampled or counted."""
from __future__ import annotations

from typing import Iterator

from postmortem.parsers import scan_limits as limits
from postmortem.parsers.scan_limits import (DELETE, ERROR_CAP, F_BAR, F_ERRLINE, F_EVENT, F_EXCWORD, F_GATED, F_NCCL,
                                            F_STEP, F_WINDOW, FRAME_REACH, INFO_CAP, KEY_MEMO_MAX, MEMO_CAP,
                                            NCCL_KINDS, _RANK_DIGITS_RE, SEGMENT_LEVEL)
from postmortem.parsers.scan_text import (_last_segment_with, _Lazy, _Ready, _Span, _stream_id, _text)

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


class LineJudge:
    """LineScanner's judgement of one line (`_one`) and of a line's `\\r` segments."""

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
        if f & F_WINDOW and (b'File "' in line or b'File \\"' in line):
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
                while self.next_bar < self.bar_seen and taken < limits.MAX_SAMPLES:
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

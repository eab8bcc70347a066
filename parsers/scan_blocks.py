"""The prefilter's whole-block scan (a mixin of LineScanner): one Hyperscan pass per block, the lines between hits
numbered without being split, strides sampled, and the last progress/step lines resolved backwards."""
from __future__ import annotations

from postmortem.parsers import scan_limits as limits
from postmortem.parsers.scan_limits import (CONFIG_HEAD, DELETE, F_BAR, F_STEP, KEY_MEMO_MAX, NCCL_COUNT_HEAD,
                                            NCCL_COUNT_NEEDLES, REGION_WALK, RESOLVE_REACH, STRIDE_WALK)
from postmortem.parsers.scan_text import (_clean, _last_segment_with, _newline_counter, _Ready, _rfind_pair, _Span,
                                          _stream_id, _text)
from postmortem.parsers.scan_judge import (_cap_key)

class BlockScan:
    """LineScanner's block mode (`_scan_blocks`) and the searches it makes backwards."""

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
                line = buf[ls:le] if le - ls <= limits.SPAN_MIN else _Span(buf, ls, le)
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
            out = one(lineno, line if len(line) <= limits.SPAN_MIN else _Span(line, 0, len(line)))
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
                    line = buf[ls:j] if j - ls <= limits.SPAN_MIN else _Span(buf, ls, j)
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
                    line = buf[ls:le] if le - ls <= limits.SPAN_MIN else _Span(buf, ls, le)
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
                line = buf[i:j] if j - i <= limits.SPAN_MIN else _Span(buf, i, j)
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

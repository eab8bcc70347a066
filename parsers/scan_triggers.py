"""Triggers: which shape keys (a line with digits, blanks and bar glyphs deleted) are events, progress, steps, NCCL
lines or window openers, classified once per key and memoised (the prefilter's per-line judge asks them)."""
from __future__ import annotations

import re

import regex

from postmortem.parsers import literal_scan
from postmortem.parsers.formats import trigger_regex
from postmortem.parsers.linear_regex import LinearSearch
from postmortem.parsers.scan_limits import (DELETE, _EVENT_BITS, F_BAR, F_ERRLINE, F_EVENT, F_EXCWORD, F_GATED,
                                            F_NCCL_CHANNEL, F_NCCL_OTHER, F_NCCL_RING, F_NCCL_TREES, F_STEP, F_WEAK,
                                            F_WINDOW, KEY_MEMO_MAX, MEMO_CAP, NCCL_FACTS, NCCL_TRAIL_KEY_RE,
                                            NCCL_TRAIL_RAW)
from postmortem.parsers.scan_text import (_Span)

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
        # ASCII classes, as Hyperscan's: every line this confirms, the whole-block scan has found; in the form whose
        # search is linear in the line (a line is untrusted: `sav...[^\n]*checkpoint` from every `saving` was not)
        self.gate_re = LinearSearch(gates, regex.compile, regex.M | regex.A) if gates else None
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

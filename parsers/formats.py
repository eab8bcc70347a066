"""Line formats declared as data (lnav-style): event kind, regex with named groups, and sample lines with the
values they must produce. `load_formats` refuses a format whose samples do not parse."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import regex

from postmortem.parsers import launcher_formats, process_formats, stop_formats
from postmortem.parsers.prefixes import sample_match

# The declarations, as data: what the process prints, then how jobs are stopped from outside, then launchers.
# (Each declaration: see process_formats.py for the fields.)
FORMAT_DEFS: list[dict] = process_formats.DEFS + stop_formats.DEFS + launcher_formats.DEFS


@dataclass(frozen=True)
class LineFormat:
    """A line format; its regex is compiled on first use (most formats never trigger in a given job, and compiling
    all of them took ~30 ms of every run, before any file could be read)."""
    name: str
    kind: str
    level: str
    triggers: tuple[str, ...]
    source: str | regex.Pattern  # the pattern (or an already compiled one)
    requires_nocase: tuple[tuple[str, ...], ...] = ()
    scan_regex: bool = False  # the whole-file scan looks for the regex itself, not the triggers (see scan_pattern)

    @functools.cached_property
    def regex(self) -> regex.Pattern:
        return self.source if isinstance(self.source, regex.Pattern) else regex.compile(self.source)

    @property
    def pattern(self) -> str:
        return self.source.pattern if isinstance(self.source, regex.Pattern) else self.source

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        """The group names in group order when every group is named once, else ()."""
        rx = self.regex
        index = rx.groupindex
        if len(index) == rx.groups and sorted(index.values()) == list(range(1, rx.groups + 1)):
            return tuple(sorted(index, key=index.get))
        return ()

    def groupdict(self, m) -> dict:
        """m.groupdict() of this format's match, built from m.groups() (a fraction of the regex module's cost)."""
        if not self.names:
            return m.groupdict()
        return dict(zip(self.names, m.groups()))

    def may_match(self, lowered: str | None) -> bool:
        """False when the line (as lower_for_literals gives it) lacks a `requires_nocase` group."""
        if not self.requires_nocase or lowered is None:
            return True
        return all(any(w in lowered for w in group) for group in self.requires_nocase)


class FormatError(ValueError):
    """A format definition whose samples do not parse."""


# The only characters that case-insensitive `re`/`regex` patterns match to an ASCII letter other than its two cases:
# the Kelvin sign (k; str.lower() agrees), the dotted and dotless I (i) and the long s (s), which str.lower() keeps
# apart (or turns into two characters).
_ODD_FOLDS = ("\u0130", "\u0131", "\u017f")


def lower_for_literals(text: str) -> str | None:
    """`text` lowercased so that an ASCII literal a case-insensitive pattern matches in it is in the result; None
    where that cannot be promised (text with an odd fold): then a literal test says nothing, run the regex."""
    if not text.isascii() and any(c in text for c in _ODD_FOLDS):
        return None
    return text.lower()


def load_formats(defs: list[dict] = FORMAT_DEFS, check: bool = True) -> list[LineFormat]:
    """The definitions as LineFormats; with `check`, compile each and refuse any whose samples do not match or yield
    other values than declared (the test suite checks the built-in ones; a run only declares them)."""
    out = []
    names = set()
    for d in defs:
        if d["name"] in names:
            raise FormatError(f"duplicate format name {d['name']}")
        names.add(d["name"])
        if d.get("scan", "triggers") not in ("triggers", "regex"):
            raise FormatError(f"format {d['name']}: scan is 'triggers' or 'regex'")
        requires = tuple(tuple(group) for group in d.get("requires_nocase", ()))
        fmt = LineFormat(d["name"], d["kind"], d["level"], tuple(d["triggers"]), d["pattern"], requires,
                         d.get("scan") == "regex")
        if check:
            _check(fmt, d)
        out.append(fmt)
    return out


def _check(fmt: LineFormat, d: dict) -> None:
    """Refuse a format whose samples lack its triggers or required words, do not match, or give other values."""
    rx = fmt.regex
    if not d.get("samples"):
        raise FormatError(f"format {d['name']} has no sample lines")
    requires = fmt.requires_nocase
    if any(not group or any(w != w.lower() or not w.isascii() for w in group) for group in requires):
        raise FormatError(f"format {d['name']}: requires_nocase needs non-empty groups of lowercase ASCII")
    for line, want in d["samples"]:
        if not any(t in line for t in d["triggers"]):
            raise FormatError(f"format {d['name']}: sample has none of the triggers: {line!r}")
        if requires and not all(any(w in line.lower() for w in group) for group in requires):
            raise FormatError(f"format {d['name']}: sample lacks a requires_nocase group: {line!r}")
        m = sample_match(rx.search, f"format {d['name']}", line, want, FormatError)
        if list(fmt.groupdict(m).items()) != list(m.groupdict().items()):
            raise FormatError(f"format {d['name']}: groups out of order")


FORMATS = load_formats(check=False)  # checked by tests/test_formats.py


def _tokens(pattern: str):
    """(position, token, inside a [...] class) for each token of a regex; an escape is one token."""
    in_class, i = False, 0
    while i < len(pattern):
        if pattern[i] == "\\":
            yield i, pattern[i:i + 2], in_class
            i += 2
            continue
        ch, was = pattern[i], in_class
        if in_class:
            in_class = ch != "]" or pattern[i - 1] == "["
        elif ch == "[":
            in_class = True
        yield i, ch, was
        i += 1


def _without_optional_tail(pattern: str) -> str:
    """The pattern without a trailing optional group (`...(?:[^\\n]*?(?P<path>...))?`): it changes what a match
    captures, never whether a line matches, and a scanner need not follow it to the end of every line."""
    if not pattern.endswith(")?"):
        return pattern
    opens, start = [], None
    for i, tok, in_class in _tokens(pattern[:-1]):
        if in_class:
            continue
        if tok == "(":
            opens.append(i)
        elif tok == ")":
            start = opens.pop()
    return pattern[:start] if start is not None and not opens and start > 0 else pattern


def scan_pattern(fmt: LineFormat) -> tuple[str, bool]:
    """(pattern, caseless) of a `scan: regex` format for scanning raw lines: named groups plain, `(?i)` as a flag
    and `^` anchors dropped (the format matches a message, which a raw line holds after its prefixes), so that it
    finds every line the format can match on the message (and, rarely, a few more)."""
    pattern = fmt.pattern
    caseless = pattern.startswith("(?i)")
    if caseless:
        pattern = pattern[4:]
    pattern = _without_optional_tail(re.sub(r"\(\?P<\w+>", "(", pattern))
    return _unbounded("".join(tok for _, tok, in_class in _tokens(pattern) if in_class or tok != "^")), caseless


_BOUNDED_REPEAT = re.compile(r"\{(\d+),\d+\}\??")


def _unbounded(pattern: str) -> str:
    """Bounded repeats without their upper bound (`[^\\n]{0,60}?` -> `[^\\n]*`): the scan may find a few more lines,
    which the format's own regex then refuses, and Hyperscan builds the database in a third of the time (a bounded
    repeat in the checkpoint formats alone took 55 ms to compile, on every run)."""
    out, skip_to = [], -1
    for pos, tok, in_class in _tokens(pattern):
        if pos < skip_to:
            continue
        m = _BOUNDED_REPEAT.match(pattern, pos) if tok == "{" and not in_class else None
        if m:
            out.append("*" if m.group(1) == "0" else "{%s,}" % m.group(1))
            skip_to = m.end()
            continue
        out.append(tok)
    return "".join(out)


def trigger_regex(words) -> re.Pattern:
    """One regex that finds any of `words` (all str or all bytes), as a prefix tree: Python's `re` scans that ~10x
    faster than a flat alternation (it only answers whether some word occurs; the match may be a shorter word)."""
    words = [w for w in words if w]
    if not words:
        return re.compile(r"(?!x)x")
    end = words[0][:0]
    group, bar, close = ("(?:", "|", ")") if isinstance(end, str) else (b"(?:", b"|", b")")
    trie: dict = {}
    for w in words:
        node = trie
        for i in range(len(w)):
            node = node.setdefault(w[i:i + 1], {})
        node[end] = {}

    def emit(node: dict):
        if end in node:  # a word ends here: a longer one adds nothing to "some word occurs"
            return end
        alts = [re.escape(ch) + emit(sub) for ch, sub in sorted(node.items())]
        return alts[0] if len(alts) == 1 else group + bar.join(alts) + close
    return re.compile(emit(trie))


# One search for every trigger: a line that contains none of them is skipped without running any format.
TRIGGER_RE = trigger_regex({t for f in FORMATS for t in f.triggers})


def _trigger_index(formats: list[LineFormat]) -> tuple[int, dict[str, list[tuple[str, int]]]]:
    """Triggers bucketed by their first K characters (K = the shortest trigger, at most 2), each with the bit mask
    of the formats (by position) it triggers."""
    masks: dict[str, int] = {}
    for i, f in enumerate(formats):
        for t in f.triggers:
            masks[t] = masks.get(t, 0) | (1 << i)
    k = max(1, min(2, min(len(t) for t in masks)))
    buckets: dict[str, list[tuple[str, int]]] = {}
    for t, mask in sorted(masks.items()):
        buckets.setdefault(t[:k], []).append((t, mask))
    return k, buckets


_KEY_LEN, _TRIGGERS_AT = _trigger_index(FORMATS)
MAX_TRIGGER_SPOTS = 32  # a line with more trigger positions than this is tested trigger by trigger instead
# Ranks print the same messages (progress redraws, warnings, errors) once prefixes are stripped: the masks of recent
# messages are kept (a pure function of the text; bounded, cleared when full).
_MEMO: dict[str, int] = {}
MEMO_MAX = 8192
MEMO_MAX_CHARS = 512  # longer lines are rarely repeated; keeps the memo within a few MB


def triggered(message: str) -> int:
    """Bit mask of the formats (by position in FORMATS) with a trigger in `message`."""
    if len(message) > MEMO_MAX_CHARS:
        return _triggered(message)
    found = _MEMO.get(message)
    if found is None:
        if len(_MEMO) >= MEMO_MAX:
            _MEMO.clear()
        found = _MEMO[message] = _triggered(message)
    return found


def _triggered(message: str) -> int:
    """triggered() uncached: TRIGGER_RE finds exactly the positions where some trigger starts; only the few
    triggers that begin with the characters there are compared, instead of testing all ~160 against the line."""
    m = TRIGGER_RE.search(message)
    found = 0
    spots = 0
    k = _KEY_LEN
    while m is not None:
        p = m.start()
        for t, mask in _TRIGGERS_AT.get(message[p:p + k], ()):
            if message.startswith(t, p):
                found |= mask
        spots += 1
        if spots > MAX_TRIGGER_SPOTS:  # trigger-dense text: the plain test costs less than walking every spot
            return _triggered_plain(message)
        m = TRIGGER_RE.search(message, p + 1)
    return found


def _triggered_plain(message: str) -> int:
    found = 0
    for i, fmt in enumerate(FORMATS):
        for t in fmt.triggers:
            if t in message:
                found |= 1 << i
                break
    return found


def match_line(message: str) -> list[tuple[LineFormat, regex.Match]]:
    """All formats that match a (prefix-stripped) message, in declaration order; cheap when nothing triggers."""
    found = triggered(message)
    hits = []
    lowered = False
    while found:
        low = found & -found
        fmt = FORMATS[low.bit_length() - 1]
        found ^= low
        if fmt.requires_nocase:
            if lowered is False:
                lowered = lower_for_literals(message)
            if not fmt.may_match(lowered):
                continue
        m = fmt.regex.search(message)
        if m:
            hits.append((fmt, m))
    return hits

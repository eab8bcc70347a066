"""Patterns a log line is only *searched* with (does it match anywhere?), in a form whose search costs time linear
in the line: a log line is untrusted input, and a backtracking engine tries a pattern from every position.

Three shapes made a search quadratic (a 66,000-character line repeating "file was modified after saving." took
9 s, doubled 60 s, 8x did not finish):
- `P[^\\n]*S` (a word, anything, a later word): from every occurrence of P the gap runs to the line's end and
  back. Searched instead as the *first* P of a line, then S between its end and the line's end: a line matches one
  iff it matches the other when P's match ends where its word ends (P ends with `\\b` or is a plain literal,
  checked here), because a later P leaves S less room. (One regex, `^(?>[^\\n]*?P)[^\\n]*S`, says the same, but
  the `regex` module still searches it in quadratic time and `re` has atomic groups only from Python 3.11.)
- a leading `\\s*` (left where a `^` was dropped): it can match empty, so it is dropped;
- a leading `X+` of one character (`\\*+ Running`): a run of k X's is walked from each of its k starts; `X` alone
  matches wherever `X+` does (the run's last X).
Whether a line matches is unchanged, only where the engine looks (tests/test_linear_regex.py compares both forms
on random lines made of the pattern's own words and times them on long ones)."""
from __future__ import annotations

import re

GAPS = ("[^\\n]*", ".*")
_ONE_CHAR = re.compile(r"^(?:\\.|\[(?:\\.|[^\]\\])+\]|[^\\()\[|?*+{.^$])\+(?![?+*{])")
_LITERAL = re.compile(r"^(?:\\[^A-Za-z0-9]|[^\\()\[\]|?*+{}.^$])+$")


class NotLinear(ValueError):
    """A pattern this module cannot rewrite into a linear search (declare it differently)."""


def _depth_split(pattern: str, sep: str) -> list[str]:
    """`pattern` split at `sep` (one character) outside groups and classes."""
    parts, depth, in_class, i, start = [], 0, False, 0, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = not (ch == "]" and pattern[i - 1] != "[" and pattern[i - 2:i] != "[^")
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    parts.append(pattern[start:])
    return parts


def _unwrap(pattern: str) -> str:
    """The inside of a `(?:...)` that encloses the whole pattern (else the pattern)."""
    if pattern.startswith("(?:") and pattern.endswith(")") and len(_depth_split(pattern[3:-1], ")")) == 1 \
            and _balanced(pattern[3:-1]):
        return pattern[3:-1]
    return pattern


def _balanced(pattern: str) -> bool:
    depth, in_class, i = 0, False, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = not (ch == "]" and pattern[i - 1] != "[" and pattern[i - 2:i] != "[^")
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return False
        i += 1
    return depth == 0


def _gaps(alt: str) -> list[int]:
    """Positions of the unbounded gaps (`[^\\n]*`, `.*`, not lazy or possessive) at the top level of `alt`."""
    found, depth, in_class, i = [], 0, False, 0
    while i < len(alt):
        ch = alt[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = not (ch == "]" and alt[i - 1] != "[" and alt[i - 2:i] != "[^")
            i += 1
            continue
        if depth == 0:
            for gap in GAPS:
                end = i + len(gap)
                if alt.startswith(gap, i) and alt[end:end + 1] not in ("?", "+"):
                    found.append(i)
                    break
        if ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        i += 1
    return found


def _ends_at_word_end(head: str) -> bool:
    """True when every match of `head` at one start ends at one place: it ends with `\\b` and matches word
    characters only (checked loosely: no class, dot or non-word literal but `\\b`), or it is a plain literal."""
    if _LITERAL.match(head.replace("\\b", "")):  # word boundaries are zero-width: still one end per start
        return True
    if not head.endswith("\\b"):
        return False
    bare = head.replace("\\b", "").replace("(?:", "").replace("(", "").replace(")", "").replace("|", "") \
        .replace("?", "")
    return re.fullmatch(r"\w+", bare) is not None


def _simplified(alt: str) -> str:
    """`alt` without a leading `\\s*` and with a leading one-character `X+` as `X` (same lines match)."""
    while alt.startswith(("\\s*", "\\s+")):
        alt = alt[3:] if alt.startswith("\\s*") else "\\s" + alt[3:]
    m = _ONE_CHAR.match(alt)
    return m.group()[:-1] + alt[m.end():] if m else alt


def split_alternative(alt: str) -> tuple[str, str | None]:
    """(head, tail) of an alternative with one top-level gap (`head[^\\n]*tail`), or (alternative, None)."""
    alt = _simplified(alt)
    gaps = _gaps(alt)
    if not gaps:
        return alt, None
    if len(gaps) > 1:
        raise NotLinear(f"more than one unbounded gap: {alt!r}")
    cut = gaps[0]
    gap = GAPS[0] if alt.startswith(GAPS[0], cut) else GAPS[1]
    head, tail = alt[:cut], alt[cut + len(gap):]
    if not _ends_at_word_end(head):
        raise NotLinear(f"the part before the gap must end at a word's end (\\b) or be a literal: {alt!r}")
    return head, tail


class LinearSearch:
    """A union of patterns, searched in time linear in the text: `search(text)` is not None where one of them
    matches (what it returns is a match of a part, not of the pattern)."""

    def __init__(self, patterns, compile_=None, flags: int = 0):
        """`patterns`: (pattern, caseless) pairs; `compile_`: `regex.compile` or `re.compile` (default `regex`)."""
        if compile_ is None:
            import regex
            compile_ = regex.compile
        plain, self.pairs = [], []
        for pattern, caseless in patterns:
            i = "(?i:" if caseless else "(?:"
            for alt in _depth_split(_unwrap(pattern), "|"):
                head, tail = split_alternative(alt)
                if tail is None:
                    plain.append(i + head + ")")
                else:
                    self.pairs.append((compile_(i + head + ")", flags), compile_(i + tail + ")", flags)))
        self.plain = compile_("|".join(plain), flags) if plain else None

    def search(self, text):
        """A match where one of the patterns matches `text`, else None."""
        if self.plain is not None:
            m = self.plain.search(text)
            if m is not None:
                return m
        nl = "\n" if isinstance(text, str) else b"\n"
        for head, tail in self.pairs:
            pos = 0
            while True:
                m = head.search(text, pos)
                if m is None:
                    break
                end = text.find(nl, m.end())
                t = tail.search(text, m.end(), len(text) if end < 0 else end)
                if t is not None:
                    return t
                if end < 0:
                    break
                pos = end + 1  # the next line: its first head
        return None

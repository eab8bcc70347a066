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
                if alt.startswith(gap, i) and alt[end:end + 1] != "+":  # greedy or lazy: the same lines match
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


def _fixed_width(part: str) -> bool:
    """True when every match of `part` has the same length: characters, escapes and classes only (no group,
    alternative or quantifier), so its first match is also the one that ends first."""
    in_class, i = False, 0
    while i < len(part):
        ch = part[i]
        if ch == "\\":
            if part[i + 1:i + 2] in ("b", "B", "A", "Z", "d", "D", "w", "W", "s", "S") or not part[i + 1:i + 2].isalpha():
                i += 2
                continue
            return False  # \p{...}, \N{...}: not worth telling apart
        if in_class:
            in_class = not (ch == "]" and part[i - 1] != "[" and part[i - 2:i] != "[^")
        elif ch == "[":
            in_class = True
        elif ch in "()|*+?{^$.":
            return False
        i += 1
    return not in_class


def head_parts(head: str) -> list[str]:
    """The alternatives of a gap's head (`(?:a|b)` -> [a, b]), each one whose first match in a line ends first
    among its matches (fixed width, or ending at a word's end); the earliest of their ends is where the tail may
    start (NotLinear for any other head)."""
    inner = _unwrap(head)
    parts = _depth_split(inner, "|") if inner != head else [head]
    for part in parts:
        if not (_fixed_width(part) or _ends_at_word_end(part)):
            raise NotLinear(f"the part before the gap must end at a word's end (\\b), be a literal or of fixed "
                            f"width: {head!r}")
    return parts


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
    end = cut + len(gap) + (alt[cut + len(gap):cut + len(gap) + 1] == "?")
    head, tail = _without_optional_end(alt[:cut]), alt[end:]
    head_parts(head)  # refuses a head whose first match may not end first
    return head, tail


def _without_optional_end(head: str) -> str:
    """`head` without a trailing optional group (`bootstrap(?:Root|Net)?` -> `bootstrap`): before a gap it changes
    no line's answer (the gap takes what it would have), and the head left has one end per start."""
    while head.endswith(")?"):
        depth, i = 0, len(head) - 2
        while i >= 0:  # the `(` that opens the group (no escapes or classes with parentheses expected here)
            if head[i] == ")" and (i == 0 or head[i - 1] != "\\"):
                depth += 1
            elif head[i] == "(" and (i == 0 or head[i - 1] != "\\"):
                depth -= 1
                if depth == 0:
                    break
            i -= 1
        if i <= 0 or "[" in head[i:]:
            return head
        head = head[:i]
    return head


class LinearSearch:
    """A union of patterns, searched in time linear in the text: `search(text)` is not None where one of them
    matches (what it returns is a match of a part, not of the pattern)."""

    def __init__(self, patterns, compile_=None, flags: int = 0):
        """`patterns`: (pattern, caseless) pairs; `compile_`: `regex.compile` or `re.compile` (default `regex`)."""
        if compile_ is None:
            import regex
            compile_ = regex.compile
        plain, self.pairs = [], []
        self.pattern = "|".join(p for p, _ in patterns)  # the source, for whoever reads it (tests, repr)
        for pattern, caseless in patterns:
            i = "(?i:" if caseless else "(?:"
            for alt in _depth_split(_unwrap(pattern), "|"):
                head, tail = split_alternative(alt)
                if tail is None:
                    plain.append(i + head + ")")
                else:
                    self.pairs.append(([compile_(i + part + ")", flags) for part in head_parts(head)],
                                       compile_(i + tail + ")", flags)))
        self.plain = compile_("|".join(plain), flags) if plain else None

    def search(self, text):
        """A match where one of the patterns matches `text`, else None."""
        if self.plain is not None:
            m = self.plain.search(text)
            if m is not None:
                return m
        nl = "\n" if isinstance(text, str) else b"\n"
        for heads, tail in self.pairs:
            pos = 0
            found: list = [False] * len(heads)  # each head's next match (None: no more), searched again once passed
            while True:
                for k, h in enumerate(heads):
                    if found[k] is False or (found[k] is not None and found[k].start() < pos):
                        found[k] = h.search(text, pos)
                # the earliest end of a head match in this line (a later one leaves the tail less room)
                ends = [m.end() for m in found if m is not None]
                if not ends:
                    break
                first = min(ends)
                line_start = text.rfind(nl, 0, first) + 1
                if line_start > pos:  # that head is on a later line: search the heads again from there
                    pos = line_start
                    continue
                end = text.find(nl, first)
                t = tail.search(text, first, len(text) if end < 0 else end)
                if t is not None:
                    return t
                if end < 0:
                    break
                pos = end + 1  # the next line: its first head
        return None


def compile_search(pattern: str, flags: int = 0, compile_=None) -> LinearSearch:
    """LinearSearch of one pattern (a leading `(?i)` read as its flag), for a caller that only asks `.search()`."""
    caseless = pattern.startswith("(?i)")
    return LinearSearch([(pattern[4:] if caseless else pattern, caseless)], compile_, flags)

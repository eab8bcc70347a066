"""Which extracted library string a printed line or an exception message is, and its derived label (runtime).

    lookup(text) -> Match(role, category, implies, rule, lib, kind, literal) | None

The index (derived.json.gz, built by index.py) holds the strings whose derived label is informative. A line is
checked only against the strings whose anchor word (their rarest word) it contains; a string matches when its
literal pieces occur in the line in order, each within MAX_GAP characters of the previous one (the values the
program printed between them). The match with the most literal text wins. No regex runs on the line: one
tokenizer pass and str.find calls, so a long line costs linear time.
"""
from __future__ import annotations

import functools
import gzip
import json
import os
import re
from dataclasses import dataclass

INDEX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "derived.json.gz")
MAX_LINE = 4000
MAX_GAP = 300      # characters a printed value may take between two literal pieces
_WORD = re.compile(r"[a-z0-9_]{4,}")


@dataclass(frozen=True)
class Match:
    """A library string found in a line, with its derived label."""
    role: str
    category: str
    implies: tuple[str, ...]
    rule: str
    lib: str
    kind: str
    literal: str      # the string's literal pieces, joined by ' … '


@functools.lru_cache(maxsize=1)
def _index() -> tuple[list, dict[str, tuple[int, ...]]]:
    """(entries, anchor word -> entry positions)."""
    try:
        with gzip.open(INDEX, "rt", encoding="utf-8") as fh:
            entries = json.load(fh)["entries"]
    except (OSError, ValueError, KeyError):
        return [], {}
    by_anchor: dict[str, list[int]] = {}
    for i, e in enumerate(entries):
        by_anchor.setdefault(e[3], []).append(i)
    return entries, {w: tuple(v) for w, v in by_anchor.items()}


def _in_order(line: str, parts: list[str]) -> bool:
    pos = -1
    for k, p in enumerate(parts):
        at = line.find(p, 0 if k == 0 else pos)
        if at < 0 or (k and at - pos > MAX_GAP):
            return False
        pos = at + len(p)
    return True


def lookup(text: str) -> Match | None:
    """The derived label of the library string the text prints (the most specific one), or None."""
    if not text:
        return None
    text = text[:MAX_LINE]
    entries, by_anchor = _index()
    if not entries:
        return None
    cand: set[int] = set()
    for w in set(_WORD.findall(text.lower())):
        hit = by_anchor.get(w)
        if hit:
            cand.update(hit)
    best = None
    for i in sorted(cand):          # entries are sorted most literal text first: the first hit is the best
        e = entries[i]
        if _in_order(text, e[2]):
            best = e
            break
    if best is None:
        return None
    return Match(best[4], best[5], tuple(best[6]), best[7], best[0], best[1], " … ".join(best[2]))

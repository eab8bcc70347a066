"""Builds derived.json.gz, the part of the derived labels the analyzer matches (build time and tests).

Every extracted string of strings.jsonl.gz gets a label from derive.py; the index keeps the strings whose label
says more than an ordinary exception would (a consequence, a category other than rank_crash, or a root by its
words), with enough literal text to be recognised in a line, as literal pieces plus an anchor word for the
prefilter of lookup.py.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import sys
from collections import Counter

from postmortem.catalog.derive import Label, derive
from postmortem.catalog.extract import PLACEHOLDER_RE
from postmortem.catalog.records import load_extract

HERE = os.path.dirname(os.path.abspath(__file__))
INDEX = os.path.join(HERE, "derived.json.gz")
SCHEMA = 1
MIN_LITERAL = 20     # characters of literal text a string needs to be matched in lines
MIN_WORDS = 3
_WORD = re.compile(r"[a-z0-9_]{4,}")
# labels that add nothing to what an exception's class already gives (an ordinary crash, a note)
_UNINFORMATIVE = ("default", "usage-class")


def pieces(text: str) -> list[str]:
    """The literal pieces of a template, in order, without surrounding blanks; pieces under 3 characters
    (punctuation between two values) are not required when matching."""
    return [p.strip() for p in PLACEHOLDER_RE.split(text)[::2] if len(p.strip()) >= 3]


def anchors(text: str) -> set[str]:
    """The words of a template a line tokenizes the same way (lowercase, 4+ word characters, not touching a
    placeholder: `layer_⟪i⟫` prints as `layer_7`, one token)."""
    marked = PLACEHOLDER_RE.sub("\x01", text).lower()
    return {m.group() for m in _WORD.finditer(marked)
            if marked[m.start() - 1:m.start()] != "\x01" and marked[m.end():m.end() + 1] != "\x01"
            and not (m.start() and (marked[m.start() - 1].isalnum() or marked[m.start() - 1] == "_"))}


def matchable(text: str) -> bool:
    """Whether a template has enough literal text to be recognised in a line without false hits."""
    ps = pieces(text)
    lit = " ".join(ps)
    return sum(map(len, ps)) >= MIN_LITERAL and max(map(len, ps), default=0) >= 10 and \
        len(re.findall(r"[A-Za-z]{2,}", lit)) >= MIN_WORDS


def informative(label: Label) -> bool:
    """Whether the analyzer learns something from a line matching this string."""
    if label.role == "benign":
        return False
    # an ordinary crash by where it is raised says nothing the exception's class does not; by its words it does
    # (an address in use, a fatal signal, a CUDA error)
    return not (label.role == "root" and label.category == "rank_crash" and
                (label.rule in _UNINFORMATIVE or label.rule.startswith(("subsystem:", "library:", "class:"))))


def labelled(records: list[dict], ancestors=None) -> list[tuple[dict, Label]]:
    """Every string with its derived label."""
    return [(r, derive(r, ancestors)) for r in records]


def build(records: list[dict], ancestors=None, labels: list | None = None) -> dict:
    """The index: entries [lib, kind, pieces, anchor, role, category, implies, rule], most literal text first
    (`labels`: the records' derived labels when already computed)."""
    chosen: dict[tuple, tuple[dict, Label]] = {}
    pairs = zip(records, labels) if labels is not None else labelled(records, ancestors)
    for r, lab in pairs:
        if r.get("kind") == "symbol" or not informative(lab) or not matchable(r["text"]):
            continue
        key = tuple(pieces(r["text"]))
        chosen.setdefault(key, (r, lab))
    words_of = {key: anchors(r["text"]) for key, (r, _lab) in chosen.items()}
    freq = Counter(w for ws in words_of.values() for w in ws)
    entries = []
    for key, (r, lab) in chosen.items():
        words = words_of[key]
        if not words:
            continue
        anchor = min(words, key=lambda w: (freq[w], -len(w), w))
        entries.append([r["lib"], r["kind"], list(key), anchor, lab.role, lab.category, list(lab.implies), lab.rule])
    entries.sort(key=lambda e: (-sum(map(len, e[2])), e[0], e[2]))
    return {"schema": SCHEMA, "entries": entries}


def run(args) -> None:
    from postmortem import catalog
    msgs, _ = load_extract(args.strings)
    data = build(msgs, catalog.ancestors)
    with gzip.GzipFile(INDEX, "wb", mtime=0) as gz:
        gz.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode())
    print(f"{len(data['entries'])} entries -> {INDEX} ({os.path.getsize(INDEX) >> 10} KiB)", file=sys.stderr)

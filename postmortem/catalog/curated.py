"""The curated message families: build input read from curated.json (the analyzer reads the generated families.json,
not this module).

Each family groups the messages that say one thing, across libraries and releases. Fields of curated.json:
- id: kebab-case, stable. Earlier families win: specific before generic (a wrapper line that quotes a timeout is a
  timeout first).
- section: the part of the catalog it belongs to (numerics, GPU memory, ...), for readers.
- pattern: `re` syntax, searched (not anchored) in the printed line; it must match every wording the sources print.
  flags: "i" for a caseless pattern.
- needs: lowercase words (\\w+ tokens) one of which every match contains: the cheap prefilter of `family_of`.
- category (DESIGN.md ids), role (root | consequence | benign), implies (what it says about the printing rank).
- why: the reason the family is curated rather than left to the derivation (derive.py) of its strings' labels:
  what the derivation gets wrong, or that its messages come from sources that were not extracted.
- evidence: [lib, regex over extracted templates(, sample value)] selecting the source strings the family was built
  from; every selected string, its placeholders filled with sample values, must match the pattern.
- parts: [lib, regex] selecting C++ fragments of a message that the compiler keeps apart; each must be part of a
  join.
- joins: [lib, template with {} placeholders(, sample value)] the printed message as the code assembles it from
  fragments; the build checks that each literal piece is in the library's strings of a release and records those
  releases.
- external: where messages come from sources that were not extracted (kernel, shell); such a family is tested on
  real lines of the corpus instead.
"""
from __future__ import annotations

import json
import os
import re

DATA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "curated.json")
ROOT, CONSEQUENCE, BENIGN = "root", "consequence", "benign"
FIELDS = ("id", "section", "category", "role", "implies", "why", "pattern", "flags", "needs", "description",
          "evidence", "parts", "joins", "external")


def load(path: str = DATA_FILE) -> list[dict]:
    """The curated families in match order, every field present (lists for evidence/parts/joins)."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    out = []
    for f in data["families"]:
        d = {k: f.get(k) for k in FIELDS}
        for k in ("implies", "needs", "evidence", "parts", "joins"):
            d[k] = [list(x) if isinstance(x, list) else x for x in (d[k] or [])]
        d["flags"] = d["flags"] or ""
        out.append(d)
    return out


def problems(families: list[dict], categories, roles, implies) -> list[str]:
    """What is wrong with the curated data (empty when it is well formed)."""
    out = []
    seen = set()
    for f in families:
        fid = f.get("id") or "?"
        if not re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", fid):
            out.append(f"{fid}: id is not kebab-case")
        if fid in seen:
            out.append(f"{fid}: duplicate id")
        seen.add(fid)
        if f["category"] not in categories:
            out.append(f"{fid}: unknown category {f['category']}")
        if f["role"] not in roles:
            out.append(f"{fid}: unknown role {f['role']}")
        if not f["implies"] or not set(f["implies"]) <= set(implies):
            out.append(f"{fid}: implies {f['implies']}")
        if not f["needs"] or not all(re.fullmatch(r"[a-z0-9_]+", w) for w in f["needs"]):
            out.append(f"{fid}: needs {f['needs']}")
        if not f["why"] or len(f["why"]) < 20:
            out.append(f"{fid}: no reason why it is curated")
        try:
            re.compile(f["pattern"], re.I if "i" in f["flags"] else 0)
        except re.error as e:
            out.append(f"{fid}: pattern does not compile: {e}")
        for kind in ("evidence", "parts"):
            for sel in f[kind]:
                if len(sel) < 2 or not isinstance(sel[0], str):
                    out.append(f"{fid}: bad {kind} selector {sel}")
                    continue
                try:
                    re.compile(sel[1])
                except re.error as e:
                    out.append(f"{fid}: {kind} regex does not compile: {e}")
        if not (f["evidence"] or f["parts"] or f["joins"] or f["external"]):
            out.append(f"{fid}: neither source strings nor an external source")
    return out


FAMILIES = load()

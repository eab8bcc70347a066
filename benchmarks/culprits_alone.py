"""How many exact culprits the ranks' ends and odd lines name alone, before any category rule (issue 22's measure).

usage: python benchmarks/culprits_alone.py CASES_DIR [CASES_DIR ...]   (V=1 lists every case)
For each case whose case.json expects culprit_ranks, analyze it and compare `postmortem.ranks.culprits.find_culprits`
(the end-state asymmetry and odd lines, stored in tables.meta["culprits"]) with the expected set; prints the count
per directory and which mechanism named the right ones.
"""
from __future__ import annotations

import collections
import json
import os
import sys

import postmortem
from postmortem.ranks.culprits import find_culprits


def run(root: str):
    """(cases with expected culprits, named exactly, mechanisms of the exact ones, rows)."""
    n = hit = 0
    mech: collections.Counter = collections.Counter()
    rows = []
    for d in sorted(os.listdir(root)):
        path = os.path.join(root, d, "case.json")
        if not os.path.isfile(path):
            continue
        expect = json.load(open(path, encoding="utf-8"))["expect"]
        if not expect.get("culprit_ranks"):
            continue
        n += 1
        a = postmortem.analyze(os.path.join(root, d), quiet=True)
        c = a.tables.meta.get("culprits") or find_culprits(a.tables.frames["ranks"], a.tables.frames.get("odd_lines"))
        ok = sorted(c.ranks) == sorted(expect["culprit_ranks"])
        hit += ok
        if ok:
            mech[c.mechanism] += 1
        rows.append((d, ok, c.mechanism, c.ranks, expect["culprit_ranks"]))
    return n, hit, mech, rows


def main(argv: list[str]) -> int:
    for root in argv:
        n, hit, mech, rows = run(root)
        print(f"{root}: {hit}/{n} culprits named exactly by end states / odd lines alone; by mechanism {dict(mech)}")
        if os.environ.get("V"):
            for d, ok, m, got, want in rows:
                print("   ", "ok " if ok else "BAD", d[:70], m, got, want)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

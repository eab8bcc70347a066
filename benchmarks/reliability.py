"""Does confidence mean something? Score the shared case sets with the scoring rule and print, per confidence bucket,
how often the verdict was right (a reliability table), plus per-class accuracy.

usage: python benchmarks/reliability.py [SETS_ROOT] [--sets corpus realruns seed-cases] [--markdown]
SETS_ROOT defaults to ../shared beside the checkout. A verdict given at >= 0.8 should be right nine times in ten.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

BUCKETS = [(0.0, 0.4), (0.4, 0.6), (0.6, 0.8), (0.8, 0.9), (0.9, 1.01)]


def judge(path: str) -> tuple[bool, float, str, str]:
    """(right, confidence, class, what was said) for one case folder, by the rule of shared/tools/score_corpus.py
    (tests/test_corpus.py uses it too)."""
    import postmortem
    expect = json.load(open(os.path.join(path, "case.json"), encoding="utf-8"))["expect"]
    a = postmortem.analyze(path, quiet=True)
    v = a.verdict
    ok = v.category in expect["categories"] and ("phase" not in expect or v.phase in expect["phase"])
    if "culprit_ranks" in expect:
        ok = ok and sorted(v.culprit_ranks) == sorted(expect["culprit_ranks"])
    if "max_confidence" in expect:
        ok = ok and v.confidence <= expect["max_confidence"]
    if expect.get("needs_gaps"):
        ok = ok and bool(a.evidence_gaps)
    said = f"{os.path.basename(path)}: {v.category}/{v.phase} {v.culprit_ranks} {v.confidence}"
    return ok, v.confidence, os.path.basename(path).split("__")[0], said


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(HERE), "..", "shared"))
    ap.add_argument("--sets", nargs="+", default=["corpus", "realruns", "seed-cases"])
    a = ap.parse_args()
    rows = []
    for name in a.sets:
        d = os.path.join(a.root, name)
        if not os.path.isdir(d):
            continue
        for case in sorted(os.listdir(d)):
            if os.path.isfile(os.path.join(d, case, "case.json")):
                rows.append((name, *judge(os.path.join(d, case))[:3]))
    print("| confidence | verdicts | right | fraction right |")
    print("|---|---|---|---|")
    for lo, hi in BUCKETS:
        sel = [ok for _, ok, conf, _ in rows if lo <= conf < hi]
        frac = f"{sum(sel) / len(sel):.2f}" if sel else "-"
        print(f"| {lo:.1f}-{min(hi, 1.0):.1f} | {len(sel)} | {sum(sel)} | {frac} |")
    print()
    print("| set / class | right |")
    print("|---|---|")
    per = collections.defaultdict(lambda: [0, 0])
    for name, ok, _, cls in rows:
        per[(name, cls)][0] += ok
        per[(name, cls)][1] += 1
    for (name, cls), (ok, n) in sorted(per.items()):
        print(f"| {name} / {cls} | {ok}/{n} |")
    total = sum(ok for _, ok, _, _ in rows)
    confident_wrong = sum(1 for _, ok, conf, _ in rows if not ok and conf >= 0.8)
    print(f"\nall: {total}/{len(rows)} right; confident errors (wrong at >= 0.8): {confident_wrong}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

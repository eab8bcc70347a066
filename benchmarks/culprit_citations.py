"""Does each verdict rest on the culprit's own evidence? For every case folder (case.json, or a sample's
expected.json) whose verdict names culprit ranks: the verdict cites at least one line of a culprit rank, and its
sentence does not give a victim's error (a rank that only waited or lost its peer) as the culprit's. A culprit with
no line at all in the inputs (no event, step, last line, stack or traceback of its rank: e.g. its stdout went into
a stalled pipe) has nothing to cite: such a case is counted apart ("nothing of its own"), not as a pass or a fail.

usage: python benchmarks/culprit_citations.py DIR [DIR ...] [-j JOBS]   (prints the cases that fail, then counts)
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import sys

CONSEQUENCE_ENDS = ("lost_peer", "waiting")


def check(path: str) -> dict:
    """{case, culprits, cites_culprit, victim_error_in_summary, problem} for one case folder."""
    import postmortem
    a = postmortem.analyze(path, quiet=True)
    v = json.loads(a.to_json()).get("verdict") or {}
    culprits = set(v.get("culprit_ranks") or [])
    out = {"case": os.path.basename(path), "culprits": sorted(culprits), "cites_culprit": True,
           "victim_error_in_summary": None, "culprit_lines": 0}
    if not culprits:
        return out
    out["culprit_lines"] = sum(int(f["rank"].isin(culprits).sum()) for name, f in a.tables.frames.items()
                               if name not in ("ranks", "sources") and hasattr(f, "columns") and "rank" in f.columns)
    out["cites_culprit"] = any(getattr(e, "rank", None) in culprits for e in a.verdict.evidence or [])
    ranks = a.tables.frames.get("ranks")
    if ranks is not None and len(ranks) and "end" in ranks.columns:
        own = {str(x) for x in ranks.loc[ranks["rank"].isin(culprits), "first_error"].dropna()}
        summary = v.get("summary") or ""
        for _, row in ranks[~ranks["rank"].isin(culprits) & ranks["end"].isin(CONSEQUENCE_ENDS)].iterrows():
            err = str(row.get("first_error") or "")
            words = err.split(": ", 1)[-1][:60]
            if len(words) >= 20 and err not in own and words in summary:
                out["victim_error_in_summary"] = f"rank {row['rank']}: {words}"
                break
    return out


def cases_in(d: str) -> list[str]:
    """Case folders under d: those with a case.json or an expected.json."""
    return sorted(os.path.join(d, n) for n in os.listdir(d)
                  if any(os.path.isfile(os.path.join(d, n, f)) for f in ("case.json", "expected.json")))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args(argv)
    bad = 0
    for d in a.dirs:
        cases = cases_in(d)
        with cf.ProcessPoolExecutor(a.j) as pool:
            rows = list(pool.map(check, cases))
        silent = [r for r in rows if r["culprits"] and not r["culprit_lines"]]
        named = [r for r in rows if r["culprits"] and r["culprit_lines"]]
        fails = [r for r in named if not r["cites_culprit"] or r["victim_error_in_summary"]]
        for r in silent:
            print(f"n/a  {d}/{r['case']}: culprits {r['culprits']} have no line of their own in the inputs")
        for r in fails:
            print(f"FAIL {d}/{r['case']}: culprits {r['culprits']}, cites a culprit line: {r['cites_culprit']}, "
                  f"victim's error in the summary: {r['victim_error_in_summary']}")
        print(f"{d}: {len(named) - len(fails)}/{len(named)} verdicts with culprits rest on a culprit's own line "
              f"({len(rows)} cases; {len(silent)} whose culprit left no line at all)")
        bad += len(fails)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

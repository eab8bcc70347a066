"""Score the product on the fault lab (and the shared sets): a mechanism x launcher table, then a reliability table
(confidence bucket -> share right) over the lab and the shared corpus and re-runs (the folders corpus/ and
realruns/ of $LAB_SHARED).

usage: python benchmarks/lab/score.py [--postmortem CMD] [-j N] [--sets lab corpus realruns] [--misses] [--json F]
The rule is shared/tools/score_corpus.py's (copied in `judge_expect`): right when verdict.category is in
expect.categories, and, where given, the phase matches, culprit_ranks equal expect.culprit_ranks as a set, confidence
<= max_confidence, evidence_gaps non-empty when needs_gaps.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures as cf
import json
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("LAB_SHARED", "/work/shared")
BUCKETS = [(0.0, 0.4), (0.4, 0.6), (0.6, 0.8), (0.8, 0.9), (0.9, 1.01)]


def judge_expect(expect: dict, result: dict) -> tuple[bool, bool, str, float]:
    """(right, culprit exact, what was said, confidence) by score_corpus.py's rule."""
    verdict = result.get("verdict") or {}
    cat, phase = verdict.get("category"), verdict.get("phase")
    conf = verdict.get("confidence") if isinstance(verdict.get("confidence"), (int, float)) else 0.0
    ok = cat in expect["categories"] and ("phase" not in expect or phase in expect["phase"])
    culprit_ok = True
    if "culprit_ranks" in expect:
        culprit_ok = sorted(verdict.get("culprit_ranks") or []) == sorted(expect["culprit_ranks"])
        ok = ok and culprit_ok
    if "max_confidence" in expect:
        ok = ok and conf <= expect["max_confidence"]
    if expect.get("needs_gaps"):
        ok = ok and bool(result.get("evidence_gaps"))
    return ok, culprit_ok, f"{cat}/{phase} ranks={verdict.get('culprit_ranks')}", conf


def analyze(cmd: list[str], path: str) -> dict:
    """The product's JSON for one case folder ({} when it is not the JSON contract)."""
    try:
        out = subprocess.run(cmd + ["analyze", path, "--format", "json"], capture_output=True, text=True, timeout=300)
        return json.loads(out.stdout)
    except Exception:  # anything that is not the JSON contract counts as a wrong answer
        return {}


def score_set(cmd: list[str], root: str, jobs: int) -> list[dict]:
    """One row per case folder under root."""
    names = sorted(d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "case.json")))

    def one(name: str) -> dict:
        path = os.path.join(root, name)
        case = json.load(open(os.path.join(path, "case.json"), encoding="utf-8"))
        ok, culprit_ok, said, conf = judge_expect(case["expect"], analyze(cmd, path))
        return {"case": name, "ok": ok, "culprit_ok": culprit_ok, "said": said, "conf": conf,
                "expect": case["expect"], "mechanism": case.get("mechanism", name.split("__")[-1]),
                "launcher": case.get("launcher", "-"), "class": case.get("class", name.split("__")[0])}

    with cf.ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(one, names))


def frac(rows: list[dict], share: bool = False) -> str:
    """'right/n' (and '= share' when asked) for rows."""
    right = sum(r["ok"] for r in rows)
    if not rows:
        return "-"
    return f"{right}/{len(rows)} = {right / len(rows):.2f}" if share else f"{right}/{len(rows)}"


def mech_table(rows: list[dict]) -> str:
    """Mechanism x launcher: right/runs, culprit-exact/runs and mean confidence per cell."""
    launchers = sorted({r["launcher"] for r in rows})
    cells: dict[tuple[str, str], list[dict]] = collections.defaultdict(list)
    for r in rows:
        cells[(r["mechanism"], r["launcher"])].append(r)
    mechs = sorted({(r["class"], r["mechanism"]) for r in rows})
    w = 14
    out = [f"{'mechanism':30}" + "".join(f"{l[:w - 1]:>{w}}" for l in launchers) + f"{'all':>{w}}"]
    for cls, m in mechs:
        line = f"{m[:29]:30}"
        for l in launchers + ["*"]:
            rs = [r for r in rows if r["mechanism"] == m] if l == "*" else cells.get((m, l), [])
            if not rs:
                line += f"{'.':>{w}}"
                continue
            right = sum(r["ok"] for r in rs)
            cul = sum(r["culprit_ok"] for r in rs)
            conf = sum(r["conf"] for r in rs) / len(rs)
            line += f"{f'{right}/{len(rs)} c{cul} .{int(conf * 100):02d}':>{w}}"
        out.append(line)
    tot = f"{'all':30}"
    for l in launchers:
        rs = [r for r in rows if r["launcher"] == l]
        tot += f"{frac(rs):>{w}}"
    out.append(tot + f"{frac(rows):>{w}}")
    out.append("cell: right/runs (category and exact culprits), c = culprit exact, .NN = mean confidence")
    return "\n".join(out)


def reliability(sets: dict[str, list[dict]]) -> str:
    """Confidence bucket -> share right, per set and over all."""
    names = list(sets) + ["all"]
    out = [f"{'confidence':12}" + "".join(f"{n:>18}" for n in names)]
    for lo, hi in BUCKETS:
        line = f"[{lo:.1f}, {min(hi, 1.0):.1f}{']' if hi > 1 else ')'}  "
        for n in names:
            rows = [r for rs in sets.values() for r in rs] if n == "all" else sets[n]
            b = [r for r in rows if lo <= r["conf"] < hi]
            line += f"{frac(b, True):>18}"
        out.append(line)
    line = f"{'accuracy':12}"
    for n in names:
        rows = [r for rs in sets.values() for r in rs] if n == "all" else sets[n]
        line += f"{frac(rows, True):>18}"
    out.append(line)
    line = f"{'conf. errors':12}"
    for n in names:
        rows = [r for rs in sets.values() for r in rs] if n == "all" else sets[n]
        line += f"{sum((not r['ok']) and r['conf'] >= 0.8 for r in rows):>18}"
    out.append(line)
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--postmortem", default="postmortem", help="the product command (default: postmortem)")
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("--sets", nargs="+", default=["lab", "corpus", "realruns"])
    ap.add_argument("--lab", default=os.path.join(HERE, "cases"))
    ap.add_argument("--misses", action="store_true", help="list every miss of the lab")
    ap.add_argument("--json", help="write every row to this file")
    a = ap.parse_args()
    cmd = shlex.split(a.postmortem)
    roots = {"lab": a.lab, "corpus": os.path.join(SHARED, "corpus"), "realruns": os.path.join(SHARED, "realruns")}
    sets = {n: score_set(cmd, roots[n], a.j) for n in a.sets if os.path.isdir(roots.get(n, ""))}
    if "lab" in sets:
        print(mech_table(sets["lab"]))
        print()
        cls = collections.Counter(r["class"] for r in sets["lab"])
        ok = collections.Counter(r["class"] for r in sets["lab"] if r["ok"])
        cat = collections.Counter(r["class"] for r in sets["lab"]
                                  if r["said"].split("/")[0] in r["expect"]["categories"])
        print("class                      right  category-only")
        for c in sorted(cls):
            print(f"{c:26} {ok[c]:>3}/{cls[c]:<3} {cat[c]:>3}/{cls[c]}")
        print()
    print(reliability(sets))
    if a.misses and "lab" in sets:
        print()
        for r in sets["lab"]:
            if not r["ok"]:
                print(f"MISS {r['case']}: said {r['said']} conf={r['conf']:.2f}; want {r['expect']['categories']} "
                      f"ranks={r['expect'].get('culprit_ranks')}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(sets, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

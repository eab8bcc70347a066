"""verdict.next's action against each case's established category: a markdown table and the cases that disagree.

usage: python benchmarks/next_action_table.py CASES_DIR [CASES_DIR ...] [-j JOBS]

Every folder with a case.json (or a sample's expected.json) is analysed (postmortem's API, one process per case); the established category is the
first of case.json's expect.categories. An action agrees when it is what that cause calls for: `change` for a fault
of the workload, `drain` for a GPU fault, `none` for a clean run, `restart` for a scheduler's ending, `investigate`
for a bare timeout or an unknown cause; an NCCL error may be any of restart/drain/investigate/change (a flaky link
or a setting, told apart by NCCL's own words).
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures as cf
import json
import os
import sys

WORKLOAD = {"gpu_oom", "host_oom", "dataloader_failure", "barrier_skew", "straggler", "logging_blocking",
            "checkpoint_corruption", "nan_inf", "ddp_usage_error", "rank_crash"}
EXPECTED = {**{c: {"change"} for c in WORKLOAD}, "gpu_hardware": {"drain"}, "no_failure": {"none"},
            "job_stopped": {"restart", "none"}, "collective_timeout": {"investigate"}, "unknown": {"investigate"},
            "nccl_error": {"restart", "drain", "investigate", "change"}}


def judge(path: str) -> dict:
    """The case's established category, the verdict's category and its next action."""
    import postmortem
    if os.path.isfile(os.path.join(path, "case.json")):
        with open(os.path.join(path, "case.json"), encoding="utf-8") as f:
            expect = json.load(f)["expect"]
    else:  # a bundled sample: samples/<name>/expected.json
        with open(os.path.join(path, "expected.json"), encoding="utf-8") as f:
            expect = {"categories": [json.load(f)["category"]]}
    try:
        v = json.loads(postmortem.analyze(path, quiet=True).to_json()).get("verdict") or {}
    except Exception as exc:  # noqa: BLE001 - a case that fails to analyse is a row of its own
        v = {"category": f"error ({type(exc).__name__})"}
    nxt = v.get("next") or {}
    return {"case": os.path.basename(path), "established": expect["categories"][0], "said": v.get("category"),
            "action": nxt.get("action") or "(none)", "why": (nxt.get("why") or "")[:160]}


def table(rows: list[dict], title: str) -> str:
    """Markdown: actions (rows) x established categories (columns), then the disagreeing cases."""
    cats = sorted({r["established"] for r in rows})
    acts = sorted({r["action"] for r in rows})
    count = collections.Counter((r["action"], r["established"]) for r in rows)
    bad = [r for r in rows if r["action"] not in EXPECTED.get(r["established"], set())]
    out = [f"## {title} ({len(rows)} cases; action agrees with the established cause: {len(rows) - len(bad)}/"
           f"{len(rows)})", "", "| action \\ established | " + " | ".join(cats) + " |",
           "|---|" + "---|" * len(cats)]
    for a in acts:
        out.append(f"| **{a}** | " + " | ".join(str(count[(a, c)] or "") for c in cats) + " |")
    out += ["", f"Disagreeing ({len(bad)}):", ""]
    out += [f"- `{r['case']}`: said **{r['action']}** (verdict {r['said']}; established {r['established']}): "
            f"{r['why']}" for r in bad]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args(argv)
    for d in a.dirs:
        cases = sorted(os.path.join(d, n) for n in os.listdir(d)
                       if any(os.path.isfile(os.path.join(d, n, f)) for f in ("case.json", "expected.json")))
        with cf.ProcessPoolExecutor(a.j) as pool:
            rows = list(pool.map(judge, cases))
        sys.stdout.write(table(rows, d) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A 16-rank flight-recorder case timed against PyTorch's own reader (`torchfrtrace`, from the same torch wheel).

usage: python benchmarks/fr_vs_torchfrtrace.py [--repeats 5] [--keep DIR]
Writes the host-stalled scenario of tests/test_fr_suite.py (rank 11 never issued collective #100) as 16 pickle
dumps, runs `postmortem analyze DIR --format json` and `torchfrtrace DIR -p nccl_trace_rank_` (both as whole
processes, start-up included), prints min/median seconds of each and what each named. Needs torch installed
(`pip install torch==2.13.0`, the CPU build); postmortem itself never imports it.
"""
from __future__ import annotations

import argparse
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))


def write_dumps(out_dir: str) -> set[int]:
    """The 16 dumps (pickles, as NCCL writes them), with the fields torchfrtrace's loader reads."""
    import test_fr_suite as suite
    dumps, culprits, _ = suite.host_stalled()
    for r, d in dumps.items():
        d["nccl_comm_state"] = {}
        for e in d["entries"]:
            e["time_discovered_started_ns"] = e["time_created_ns"] + 1000 if e["state"] != "scheduled" else 0
            e["time_discovered_completed_ns"] = e["time_created_ns"] + 2000 if e["state"] == "completed" else 0
            e["retired"] = e["state"] == "completed"
            e["thread_id"], e["thread_name"], e["duration_ms"] = "1", "python", None
        with open(os.path.join(out_dir, f"nccl_trace_rank_{r}"), "wb") as fh:
            pickle.dump(d, fh)
    return culprits


def timed(cmd: list[str], repeats: int) -> tuple[float, float, str]:
    """(min, median) wall seconds of a command over `repeats` runs, and its last output."""
    times, out = [], ""
    for _ in range(repeats):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        out = proc.stdout + proc.stderr
    return min(times), statistics.median(times), out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--keep")
    a = ap.parse_args()
    if shutil.which("torchfrtrace") is None:
        print("torchfrtrace not found: pip install torch==2.13.0 (CPU build) first")
        return 2
    d = a.keep or tempfile.mkdtemp(prefix="fr16-")
    os.makedirs(d, exist_ok=True)
    culprits = write_dumps(d)
    pm = timed([sys.executable, "-m", "postmortem", "analyze", d, "--format", "json", "--quiet"], a.repeats)
    tf = timed(["torchfrtrace", d, "-p", "nccl_trace_rank_"], a.repeats)
    import json
    verdict = json.loads(pm[2][pm[2].index("{"):])["verdict"]
    missing = [ln for ln in tf[2].splitlines() if ln.startswith("missing ranks")]
    print(f"16-rank flight-recorder case (planted culprit: ranks {sorted(culprits)})")
    print(f"postmortem analyze : min {pm[0]:.2f} s  median {pm[1]:.2f} s  -> {verdict['category']} "
          f"culprits {verdict['culprit_ranks']}")
    print(f"torchfrtrace       : min {tf[0]:.2f} s  median {tf[1]:.2f} s  -> {missing[0] if missing else '?'}")
    if not a.keep:
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

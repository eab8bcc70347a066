"""What `postmortem collect` costs a job: wall time of an output-heavy job and of a quiet compute job, bare vs
wrapped, plus the collector's own CPU time. Run: python benchmarks/collect_overhead.py [--lines N] [--repeat R]."""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

FLOOD = ("import sys\nw = sys.stdout.write\n"
         "for i in range({n}):\n"
         "    w('step %d loss 1.2345 lr 3e-4 tokens/s 123456 some more text to be typical\\n' % i)\n")
QUIET = ("import time\nt = time.time()\nx = 0\n"
         "while time.time() - t < {s}:\n    x += sum(range(10000))\n"
         "    print('step', x % 7, flush=True) if x % 997 == 0 else None\n")


def run(argv: list[str], stdout_path: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of all children) for one run with stdout to a file."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    with open(stdout_path, "wb") as out:
        subprocess.run(argv, stdout=out, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name, code in (("flood", FLOOD.format(n=args.lines)), ("quiet", QUIET.format(s=args.seconds))):
            job = [sys.executable, "-c", code]
            wrapped = [sys.executable, "-m", "postmortem.cli", "collect", "--out", os.path.join(tmp, "ev"),
                       "--no-analyze", "--quiet", "--"] + job
            res = {"bare": [], "wrapped": []}
            for i in range(args.repeat):
                res["bare"].append(run(job, os.path.join(tmp, "bare.out")))
                res["wrapped"].append(run(wrapped, os.path.join(tmp, "wrapped.out")))
            size = os.path.getsize(os.path.join(tmp, "bare.out"))
            for kind, rows in res.items():
                print(f"{name:6} {kind:8} wall {statistics.median(r[0] for r in rows):7.2f} s   "
                      f"cpu {statistics.median(r[1] for r in rows):7.2f} s   ({size / 1e6:.0f} MB of output)")


if __name__ == "__main__":
    main()

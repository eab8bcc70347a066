"""Seconds spent by each report stage (to_html, to_text, to_json, figures) on one analysis.

    python benchmarks/bench_report.py /tmp/t512                # analyse the tree first (not timed)
    python benchmarks/bench_report.py /tmp/A512.pkl            # a pickled Analysis you made yourself (trusted only)
    python benchmarks/bench_report.py /tmp/t512 --repeats 3 --profile to_html

The first figure-drawing stage pays matplotlib's one-off import; it is measured separately ("import matplotlib")
so the stage numbers are the work a second report would cost too. Best of --repeats is printed.
"""
from __future__ import annotations

import argparse
import os
import pickle
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load(path: str):
    if path.endswith(".pkl"):
        # Benchmark input made by the user from their own analysis; never point this at untrusted files.
        with open(path, "rb") as fh:
            return pickle.load(fh)  # noqa: S301
    from postmortem import api
    return api.analyze(path, quiet=True)


def _close(figs: dict) -> None:
    for fig in figs.values():
        fig.clear()


def main(argv=None) -> int:
    """Print seconds per report stage."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target", help="a tree to analyse, or a .pkl of an Analysis")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", choices=("to_html", "to_text", "to_json", "figures"),
                    help="also print a cProfile of one run of this stage")
    ap.add_argument("--stages", default="to_html,to_text,to_json,figures")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    a = _load(args.target)
    print(f"{'load/analyse':16s} {time.perf_counter() - t0:8.3f} s")
    t0 = time.perf_counter()
    import matplotlib.backends.backend_agg  # noqa: F401 - the one-off imports, kept out of the stage numbers
    import matplotlib.figure  # noqa: F401
    print(f"{'import matplotlib':16s} {time.perf_counter() - t0:8.3f} s")
    stages = {"to_html": lambda: a.to_html(generated_at="bench"), "to_text": a.to_text, "to_json": a.to_json,
              "figures": lambda: _close(a.figures())}
    for name in args.stages.split(","):
        fn = stages[name]
        best = float("inf")
        for _ in range(max(1, args.repeats)):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        print(f"{name:16s} {best:8.3f} s")
    if args.profile:
        import cProfile
        import pstats
        pr = cProfile.Profile()
        pr.enable()
        stages[args.profile]()
        pr.disable()
        pstats.Stats(pr).sort_stats("cumtime").print_stats(45)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Per-stage micro benchmark: discovery and each parser kind on one tree, in one process (no pool).

Times `discover(TREE)` (best of --repeats), then `parse_source` for every discovered file grouped by kind: seconds,
MB/s, files, and for text kinds the lines handed over by the prefilter and the microseconds per handed-over line
(the per-line cascade: prefixes, formats, steps). Use it for before/after numbers of parser work:

    python benchmarks/bench_parsers.py /tmp/t512                 # discovery + every kind
    python benchmarks/bench_parsers.py /tmp/t512 --kinds nvidia_smi pyspy --limit 64
    python benchmarks/bench_parsers.py /tmp/t512 --profile discover   # cProfile of one stage (top 25)
    python benchmarks/bench_parsers.py /tmp/t512 --cascade            # per-line cascade only (lines replayed)

--cascade separates the line parser from the scanner: each text file is scanned once and the lines the prefilter
hands over are recorded; parse_textlog is then timed on the recorded lines alone (prefixes, formats, steps,
tracebacks, rows), which is the per-line cost the scanner's speed does not change.
"""
from __future__ import annotations

import argparse
import cProfile
import collections
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from postmortem.parsers import base, prefilter  # noqa: E402
from postmortem.ingest import discover as disc  # noqa: E402
from postmortem.ingest import textio  # noqa: E402


class _CountingScanner:
    """Counts the lines a prefilter.LineScanner hands over (wraps __iter__ only; parse results are unchanged)."""
    handed = 0

    @classmethod
    def install(cls):
        orig = prefilter.LineScanner.__iter__

        def counting_iter(self):
            for item in orig(self):
                cls.handed += 1
                yield item
        prefilter.LineScanner.__iter__ = counting_iter
        return orig


def time_discover(tree: str, repeats: int) -> tuple[float, list]:
    """Best wall time of `repeats` discover() calls, and the sources of the last one."""
    best, sources = float("inf"), []
    for _ in range(repeats):
        t0 = time.perf_counter()
        sources = disc.discover(tree)
        best = min(best, time.perf_counter() - t0)
    return best, sources


def time_kinds(sources, kinds, limit: int, repeats: int) -> list[dict]:
    """Per kind: best-of-`repeats` seconds to parse (up to `limit` files of) the kind, bytes, lines handed over."""
    by_kind = collections.defaultdict(list)
    for s in sources:
        if not s.problem:
            by_kind[s.kind].append(s)
    base._load_builtin()
    out = []
    for kind in sorted(by_kind):
        if kinds and kind not in kinds:
            continue
        files = by_kind[kind][:limit] if limit else by_kind[kind]
        best, handed = float("inf"), 0
        for _ in range(repeats):
            _CountingScanner.handed = 0
            t0 = time.perf_counter()
            for s in files:
                base.parse_source(s)
            best = min(best, time.perf_counter() - t0)
            handed = _CountingScanner.handed
        nbytes = sum(s.bytes for s in files)
        out.append({"kind": kind, "files": len(files), "seconds": best, "mb": nbytes / 1e6,
                    "mb_s": nbytes / 1e6 / best if best else 0.0, "handed": handed,
                    "us_per_handed": best / handed * 1e6 if handed else None,
                    "ms_per_file": best / len(files) * 1e3})
    return out


class _Replay:
    """Stands in for a finished LineScanner: the recorded items, and what parse_textlog reads after the loop."""

    def __init__(self, scanner, items):
        self.items = items
        self.exact = scanner.exact if scanner is not None else True
        self.nccl_counts = dict(getattr(scanner, "nccl_counts", {}) or {})
        self.sampled = dict(getattr(scanner, "sampled", {}) or {})


def time_cascade(sources, kinds, limit: int, repeats: int) -> list[dict]:
    """Per text kind: parse_textlog's time on pre-recorded handed-over lines (scanner excluded), us per line."""
    from postmortem.parsers import textlog
    by_kind = collections.defaultdict(list)
    for s in sources:
        if not s.problem and textlog.parse_textlog in base._REGISTRY.get(s.kind, []):
            by_kind[s.kind].append(s)
    real = textlog._line_source
    out = []
    try:
        for kind in sorted(by_kind):
            if kinds and kind not in kinds:
                continue
            files = by_kind[kind][:limit] if limit else by_kind[kind]
            recorded = {}
            for s in files:
                scanner, head, items = real(s, textio.ReadStats())
                items = list(items)
                recorded[s.path] = (_Replay(scanner, items), head, items)
                if scanner is not None:
                    scanner.close()
            textlog._line_source = lambda s, stats: (recorded[s.path][0], recorded[s.path][1],
                                                     iter(recorded[s.path][2]))
            best = float("inf")
            for _ in range(repeats):
                t0 = time.perf_counter()
                for s in files:
                    textlog.parse_textlog(s)
                best = min(best, time.perf_counter() - t0)
            textlog._line_source = real
            n = sum(len(r[2]) for r in recorded.values())
            out.append({"kind": kind, "files": len(files), "seconds": best, "lines": n,
                        "us_per_line": best / n * 1e6 if n else None})
    finally:
        textlog._line_source = real
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree")
    ap.add_argument("--kinds", nargs="*", default=None, help="only these kinds (default: all)")
    ap.add_argument("--limit", type=int, default=0, help="at most this many files per kind (0: all)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-discover", action="store_true")
    ap.add_argument("--profile", choices=["discover", "parse", "cascade"], help="print a cProfile of one stage instead")
    ap.add_argument("--cascade", action="store_true", help="time the per-line cascade on recorded lines instead")
    args = ap.parse_args(argv)
    _CountingScanner.install()
    if args.profile:
        prof = cProfile.Profile()
        if args.profile == "discover":
            prof.runcall(disc.discover, args.tree)
        else:
            sources = disc.discover(args.tree)
            fn = time_kinds if args.profile == "parse" else time_cascade
            prof.runcall(fn, sources, args.kinds, args.limit, 1)
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return 0
    if args.cascade:
        sources = disc.discover(args.tree)
        base._load_builtin()
        print(f"{'kind':<16}{'files':>6}{'lines':>9}{'s':>9}{'us/line':>9}   (parse_textlog on recorded lines)")
        for r in time_cascade(sources, args.kinds, args.limit, args.repeats):
            per = f"{r['us_per_line']:.1f}" if r["us_per_line"] is not None else "-"
            print(f"{r['kind']:<16}{r['files']:>6}{r['lines']:>9}{r['seconds']:>9.3f}{per:>9}")
        return 0
    d_s, sources = time_discover(args.tree, args.repeats)
    if not args.no_discover:
        total = sum(s.bytes for s in sources)
        print(f"discover: {len(sources)} files, {total / 1e6:.0f} MB, {d_s:.3f} s (best of {args.repeats})")
    print(f"{'kind':<16}{'files':>6}{'MB':>9}{'s':>9}{'MB/s':>9}{'ms/file':>9}{'handed':>9}{'us/line':>9}")
    for r in time_kinds(sources, args.kinds, args.limit, args.repeats):
        per = f"{r['us_per_handed']:.1f}" if r["us_per_handed"] is not None else "-"
        print(f"{r['kind']:<16}{r['files']:>6}{r['mb']:>9.1f}{r['seconds']:>9.3f}{r['mb_s']:>9.1f}"
              f"{r['ms_per_file']:>9.2f}{r['handed']:>9}{per:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

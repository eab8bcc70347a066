#!/usr/bin/env python3
"""Fuzz postmortem's discovery, parsers, table builder, rules and reports with hypothesis-generated inputs.

    python fuzz/run.py --budget 1000000 --workers 2 --seeds /path/to/more/samples --save fuzz/crashes

Prints how many inputs ran, per kind, and every distinct failure (signature, count, first message); exits 1 when
any failure was found. A failure is an exception escaping a stage boundary (discover, parse_source, build, rules,
reports), an exception a parser raised (parse_source turned it into a problem, but it is still a bug), a memory
blow-up, or an input that ran past --timeout seconds. Saved failures replay with --replay DIR.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from multiprocessing import get_context

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, HERE]

import harness  # noqa: E402

DEFAULT_SEED_DIRS = [os.path.join(ROOT, "samples"), os.path.join(ROOT, "tests", "fixtures")]
CHUNK = 2000  # examples per hypothesis run: a fresh run keeps hypothesis' bookkeeping (and memory) small


def _worker(args: tuple) -> dict:
    """Run `budget` inputs in this process; return counts and failures."""
    index, budget, seed, opts = args
    import resource
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    if opts["mem_limit_gb"]:
        limit = int(opts["mem_limit_gb"] * 1024 ** 3)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    seeds = harness.load_seeds(opts["seed_dirs"], max_bytes=opts["seed_bytes"])
    kinds = opts["kinds"] or harness.all_kinds()
    strategy = harness.fuzz_inputs(seeds, kinds, max_size=opts["max_size"])
    workdir = harness.new_workdir()
    harness.CPU_BASE_S, harness.CPU_PER_MB_S = opts["cpu_base"], opts["cpu_per_mb"]
    harness.warm(workdir)  # imports, compiled regexes, templates: the first input's time is its own
    stats = {"inputs": 0, "by_kind": {}, "sniffed": {}, "failures": {}, "slowest": [0.0, None], "pipeline": 0}
    done = 0
    chunk_no = 0
    t_end = time.time() + opts["max_seconds"] if opts["max_seconds"] else None
    while done < budget and (t_end is None or time.time() < t_end):
        n = min(CHUNK, budget - done)
        before = stats["inputs"]

        @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck), derandomize=False)
        @hseed(seed * 1_000_003 + chunk_no)
        @given(strategy)
        def prop(inp):
            if stats["inputs"] - before >= n:
                return
            i = stats["inputs"]
            pipeline = opts["pipeline_every"] > 0 and i % opts["pipeline_every"] == 0
            html = pipeline and opts["html_every"] > 0 and i % (opts["pipeline_every"] * opts["html_every"]) == 0
            out = harness.exercise(inp, workdir, pipeline=pipeline, html=html, timeout_s=opts["timeout"])
            stats["inputs"] += 1
            stats["pipeline"] += pipeline
            stats["by_kind"][inp.kind] = stats["by_kind"].get(inp.kind, 0) + 1
            stats["sniffed"][str(out.sniffed)] = stats["sniffed"].get(str(out.sniffed), 0) + 1
            if out.cpu_seconds > stats["slowest"][0]:
                stats["slowest"] = [round(out.cpu_seconds, 3), f"{inp.kind}/{inp.name}/{inp.wrap}/{len(inp.data)}B"]
            for sig, msg in out.failures.items():
                f = stats["failures"].setdefault(sig, {"count": 0, "message": msg, "saved": None})
                f["count"] += 1
                if opts["save"] and f["saved"] is None:
                    f["saved"] = _save(opts["save"], sig, inp, msg)

        prop()
        chunk_no += 1
        ran = stats["inputs"] - before
        done += ran
        if ran == 0:  # hypothesis found nothing new to generate; move to the next seed
            chunk_no += 1
        if opts["progress"] and index == 0:
            print(f"  worker 0: {stats['inputs']} inputs, {len(stats['failures'])} failure signatures",
                  file=sys.stderr, flush=True)
    shutil.rmtree(workdir, ignore_errors=True)
    return stats


def _save(root: str, sig: str, inp, msg: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in sig)[:120]
    d = os.path.join(root, safe)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "input.bin"), "wb") as fh:
        fh.write(inp.data)
    with open(os.path.join(d, "meta.json"), "w") as fh:
        json.dump({"signature": sig, "kind": inp.kind, "name": inp.name, "wrap": inp.wrap, "message": msg}, fh,
                  indent=1)
    return d


def replay(directory: str) -> int:
    """Re-run saved failures (directories with input.bin + meta.json) and print what they do now."""
    bad = 0
    workdir = harness.new_workdir()
    harness.warm(workdir)
    for meta_path in sorted(_find(directory, "meta.json")):
        for label, inp in harness.saved_inputs(os.path.dirname(meta_path)):
            out = harness.exercise(inp, workdir, pipeline=True, html=True)
            status = ("FAIL " + "; ".join(out.failures) if out.failures else "ok") + \
                f" ({out.cpu_seconds:.2f} s of CPU, {len(inp.data)} bytes)"
            bad += bool(out.failures)
            print(f"{label}: {status}")
    shutil.rmtree(workdir, ignore_errors=True)
    return 1 if bad else 0


def _find(directory: str, name: str):
    for dirpath, _dirs, files in os.walk(directory):
        if name in files:
            yield os.path.join(dirpath, name)


def merge(parts: list[dict]) -> dict:
    """Sum worker statistics."""
    total = {"inputs": 0, "pipeline": 0, "by_kind": {}, "sniffed": {}, "failures": {}, "slowest": [0.0, None]}
    for p in parts:
        total["inputs"] += p["inputs"]
        total["pipeline"] += p["pipeline"]
        for key in ("by_kind", "sniffed"):
            for k, v in p[key].items():
                total[key][k] = total[key].get(k, 0) + v
        for sig, f in p["failures"].items():
            t = total["failures"].setdefault(sig, {"count": 0, "message": f["message"], "saved": f["saved"]})
            t["count"] += f["count"]
        if p["slowest"][0] > total["slowest"][0]:
            total["slowest"] = p["slowest"]
    return total


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=2000, help="number of inputs in total (default 2000)")
    ap.add_argument("--workers", type=int, default=1, help="processes (each runs budget/workers inputs)")
    ap.add_argument("--seed", type=int, default=0, help="base random seed (runs are reproducible per seed)")
    ap.add_argument("--seeds", action="append", default=[], metavar="DIR", help="more sample directories")
    ap.add_argument("--kind", action="append", default=None, help="only force these kinds (default: all)")
    ap.add_argument("--max-size", type=int, default=8192, help="largest input in bytes")
    ap.add_argument("--seed-bytes", type=int, default=256 * 1024, help="bytes read from each seed file")
    ap.add_argument("--pipeline-every", type=int, default=50,
                    help="also run build+rules+JSON/text on every Nth input (0: never)")
    ap.add_argument("--html-every", type=int, default=20, help="and HTML on every Mth of those (0: never)")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds one input may take")
    ap.add_argument("--cpu-base", type=float, default=harness.CPU_BASE_S,
                    help="CPU seconds any input may take (default %(default)s); more is a failure")
    ap.add_argument("--cpu-per-mb", type=float, default=harness.CPU_PER_MB_S,
                    help="and CPU seconds more per MB of input (default %(default)s)")
    ap.add_argument("--mem-limit-gb", type=float, default=4.0, help="address-space limit per worker (0: none)")
    ap.add_argument("--max-seconds", type=float, default=0, help="stop each worker after this long (0: no limit)")
    ap.add_argument("--save", metavar="DIR", help="save the first input of each failure signature here")
    ap.add_argument("--replay", metavar="DIR", help="re-run saved failures and exit")
    ap.add_argument("--json", metavar="FILE", help="also write the statistics as JSON")
    ap.add_argument("--progress", action="store_true", help="print progress on stderr")
    args = ap.parse_args(argv)
    if args.replay:
        return replay(args.replay)
    opts = {"seed_dirs": DEFAULT_SEED_DIRS + args.seeds, "kinds": args.kind, "max_size": args.max_size,
            "seed_bytes": args.seed_bytes, "pipeline_every": args.pipeline_every, "html_every": args.html_every,
            "timeout": args.timeout, "cpu_base": args.cpu_base, "cpu_per_mb": args.cpu_per_mb,
            "mem_limit_gb": args.mem_limit_gb, "save": args.save,
            "max_seconds": args.max_seconds, "progress": args.progress}
    workers = max(1, args.workers)
    shares = [args.budget // workers + (1 if i < args.budget % workers else 0) for i in range(workers)]
    t0 = time.time()
    jobs = [(i, shares[i], args.seed * 1000 + i, opts) for i in range(workers)]
    if workers == 1:
        parts = [_worker(jobs[0])]
    else:
        with get_context("spawn").Pool(workers) as pool:
            parts = pool.map(_worker, jobs)
    total = merge(parts)
    total["seconds"] = round(time.time() - t0, 1)
    total["workers"] = workers
    print(f"inputs run: {total['inputs']} in {total['seconds']} s with {workers} worker(s); "
          f"{total['pipeline']} also through build/rules/reports")
    print("forced kinds: " + ", ".join(f"{k}={v}" for k, v in sorted(total["by_kind"].items())))
    print("sniffed kinds: " + ", ".join(f"{k}={v}" for k, v in sorted(total["sniffed"].items())))
    print(f"slowest input: {total['slowest'][0]} s of CPU ({total['slowest'][1]})")
    print(f"failure signatures: {len(total['failures'])}; failing inputs: "
          f"{sum(f['count'] for f in total['failures'].values())}")
    for sig, f in sorted(total["failures"].items(), key=lambda kv: -kv[1]["count"]):
        print(f"  {f['count']:8d}  {sig}\n            {f['message'][:300]}" + (f"\n            saved: {f['saved']}"
                                                                             if f["saved"] else ""))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(total, fh, indent=1, sort_keys=True)
    return 1 if total["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())

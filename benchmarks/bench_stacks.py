"""Benchmark: merge py-spy dumps of 4,096 ranks (synthetic) with postmortem.stacks.merge_stacks.

Run: python benchmarks/bench_stacks.py [--ranks 4096] [--threads 8] [--depth 30] [--parse]
Prints wall times for building the stacks table, merge_stacks(threads="main"/"all") and, with --parse, for
parsing the same dumps from py-spy text files.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from postmortem.tables import schema
from postmortem import stacks  # noqa: E402

_TRAIN = [("<module>", "train.py", 210), ("main", "train.py", 198), ("fit", "lightning/pytorch/trainer/trainer.py", 544),
          ("_run", "lightning/pytorch/trainer/trainer.py", 987), ("run", "lightning/pytorch/loops/fit_loop.py", 205),
          ("advance", "lightning/pytorch/loops/training_epoch_loop.py", 150)]
_WAIT = [("optimizer_step", "train.py", 88), ("_sync", "torch/nn/parallel/distributed.py", 1500),
         ("wrapper", "torch/distributed/c10d_logger.py", 83), ("all_reduce", "torch/distributed/distributed_c10d.py", 3252)]
_ODD = {
    "wandb": [("log", "wandb/sdk/wandb_run.py", 1927), ("_log", "wandb/sdk/wandb_run.py", 1638),
              ("_publish", "wandb/sdk/interface/interface_sock.py", 46), ("run", "wandb/sdk/lib/asyncio_manager.py", 145),
              ("result", "concurrent/futures/_base.py", 451), ("wait", "threading.py", 327)],
    "save": [("save_checkpoint", "train.py", 120), ("save", "torch/serialization.py", 965),
             ("_save", "torch/serialization.py", 1230)],
    "data": [("__next__", "torch/utils/data/dataloader.py", 733), ("_next_data", "torch/utils/data/dataloader.py", 1480),
             ("_get_data", "torch/utils/data/dataloader.py", 1440), ("get", "multiprocessing/queues.py", 113)],
}
_BG = [("wait", "threading.py", 331), ("wait", "threading.py", 629), ("_run", "some_lib/monitor.py", 40),
       ("run", "threading.py", 982), ("_bootstrap_inner", "threading.py", 1045), ("_bootstrap", "threading.py", 1002)]


def _frames(outer_to_inner: list[tuple], depth: int) -> list[dict]:
    pad = [("layer%d" % i, "model/blocks.py", 10 + i) for i in range(max(0, depth - len(outer_to_inner)))]
    seq = outer_to_inner[:2] + pad + outer_to_inner[2:]
    return [{"func": f, "file": fi, "line": ln} for f, fi, ln in reversed(seq)]


def synthetic_rows(ranks: int, threads: int, depth: int) -> list[dict]:
    """Stacks rows of `ranks` dumps: most ranks in all_reduce, three odd ones (wandb.log, torch.save, DataLoader)."""
    rows = []
    odd = {ranks // 3: "wandb", ranks // 2: "save", ranks - 1: "data"}
    for r in range(ranks):
        pid = 10_000 + r
        dump = f"rank{r}/pyspy.txt:{pid}@1"
        tail = _ODD[odd[r]] if r in odd else _WAIT
        main = _frames(_TRAIN + tail, depth)
        rows.append({"source": f"rank{r}/pyspy.txt", "line": 4, "rank": r, "host": None, "ts": None, "pid": pid,
                     "thread": str(pid), "thread_name": "MainThread", "active": False, "owns_gil": False,
                     "frames": main, "signature": stacks.signature(main), "dump": dump})
        for t in range(threads - 1):
            bg = _frames(_BG, 6)
            rows.append({"source": f"rank{r}/pyspy.txt", "line": 40 + t * 8, "rank": r, "host": None, "ts": None,
                         "pid": pid, "thread": str(pid + 1 + t), "thread_name": f"worker-{t}", "active": False,
                         "owns_gil": False, "frames": bg, "signature": stacks.signature(bg), "dump": dump})
    return rows


def _as_text(rows: list[dict]) -> str:
    out = [f"Process {rows[0]['pid']}: python train.py", "Python v3.11.7 (/usr/bin/python3.11)", ""]
    for r in rows:
        out.append(f"Thread {r['thread']} (idle): \"{r['thread_name']}\"")
        out.extend(f"    {f['func']} ({f['file']}:{f['line']})" for f in r["frames"])
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--depth", type=int, default=30)
    ap.add_argument("--parse", action="store_true", help="also time parsing the dumps from py-spy text files")
    args = ap.parse_args()

    t0 = time.perf_counter()
    rows = synthetic_rows(args.ranks, args.threads, args.depth)
    df = schema.frame_from_rows("stacks", rows)
    t1 = time.perf_counter()
    merged = stacks.merge_stacks(df, threads="main")
    t2 = time.perf_counter()
    merged_all = stacks.merge_stacks(df, threads="all")
    t3 = time.perf_counter()
    print(f"{args.ranks} ranks x {args.threads} threads ({len(df)} rows, depth {args.depth})")
    print(f"  build stacks table:          {t1 - t0:7.3f} s")
    print(f"  merge_stacks(threads=main):  {t2 - t1:7.3f} s  classes={len(merged.classes)} "
          f"odd={stacks.rank_ranges(merged.odd_ones)} least_progressed={stacks.rank_ranges(merged.least_progressed)}")
    print(f"  merge_stacks(threads=all):   {t3 - t2:7.3f} s  classes={len(merged_all.classes)}")

    if args.parse:
        from postmortem.parsers.pyspy import parse_pyspy_text
        from postmortem.ingest.discover import Source
        with tempfile.TemporaryDirectory() as tmp:
            per_rank: dict[int, list[dict]] = {}
            for r in rows:
                per_rank.setdefault(r["rank"], []).append(r)
            paths = []
            for rank, rrows in per_rank.items():
                path = os.path.join(tmp, f"pyspy_rank{rank}.txt")
                with open(path, "w") as fh:
                    fh.write(_as_text(rrows))
                paths.append((rank, path))
            t4 = time.perf_counter()
            n = 0
            for rank, path in paths:
                res = parse_pyspy_text(Source(path=path, source=os.path.basename(path), kind="pyspy", rank=rank))
                n += len(res.rows.get("stacks", []))
            t5 = time.perf_counter()
        print(f"  parse {len(paths)} py-spy text dumps: {t5 - t4:7.3f} s  ({n} rows)")


if __name__ == "__main__":
    main()

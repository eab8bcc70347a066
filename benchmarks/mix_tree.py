"""Deterministic generator of failure trees with a chosen *line mix*: the shapes real jobs print in bulk (NCCL INFO
channel/transport lines, tqdm redraws joined by `\\r`, HF metric dicts, c10 reducer warnings, short lines, error
floods), so that the benchmark cannot be flattered by one line shape.

Every tree holds one planted failure (rank C runs out of GPU memory in a sampling phase; its neighbours see the
connection close, the others time out ten minutes later: the same story as make_tree.py, whose tails and launcher
consoles are reused). Only the bulk of each rank log between its NCCL init and that tail changes with the mix:

    realistic   per rank ~45 % NCCL INFO channel/transport lines, ~35 % tqdm redraws joined by `\\r`, ~15 % HF metric
                dicts, ~5 % reducer.cpp "Warning:" lines (the shape of a real 512-rank job's logs)
    nccl        100 % NCCL INFO channel/transport lines
    redraw      100 % tqdm redraws joined by `\\r`
    hfdict      100 % HF metric dicts `{'loss': ..., 'grad_norm': ...}`
    warning     a "Warning" on every line (reducer.cpp and Python UserWarnings)
    short       lines under 80 bytes (step/loss prints, short infos)
    errors      an error on every line: watchdog timeouts and short tracebacks (2 watchdog lines per traceback)

    python benchmarks/mix_tree.py /tmp/t --mix realistic --ranks 512 --size 1GiB    # prints the manifest
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import make_tree as mt  # noqa: E402

MIXES: dict[str, dict[str, float]] = {
    "realistic": {"nccl": 0.45, "redraw": 0.35, "hf": 0.15, "warn": 0.05},
    "nccl": {"nccl": 1.0},
    "redraw": {"redraw": 1.0},
    "hfdict": {"hf": 1.0},
    "warning": {"warn": 1.0},
    "short": {"short": 1.0},
    "errors": {"error": 1.0},
}
VARIANTS = 4  # distinct bodies; ranks share them with their own host:pid, rank and local rank substituted
# placeholders substituted per rank (bytes.replace: the bodies are generated once per variant)
HP, LR, RK = b"\x01HP\x01", b"\x01LR\x01", b"\x01RK\x01"


def _nccl_lines(rnd: random.Random, n: int) -> list[str]:
    """NCCL INFO transport/channel lines printed when communicators and P2P connections are set up lazily."""
    out = []
    for _ in range(n):
        c = rnd.randrange(32)
        peer = rnd.randrange(8)
        k = rnd.randrange(10)
        if k < 5:
            out.append(f"\x01HP\x01 [\x01LR\x01] NCCL INFO Channel {c:02d}/1 : \x01RK\x01[\x01LR\x01] -> "
                       f"{peer}[{peer}] via P2P/IPC/read\n")
        elif k < 7:
            out.append(f"\x01HP\x01 [\x01LR\x01] NCCL INFO Channel {c:02d}/0 : \x01RK\x01[\x01LR\x01] -> "
                       f"{peer}[{peer}] [send] via NET/IB/{c % 4}/GDRDMA\n")
        elif k < 8:
            out.append(f"\x01HP\x01 [\x01LR\x01] NCCL INFO Ring {c:02d} : {peer} -> \x01RK\x01 -> {peer + 1}\n")
        elif k < 9:
            out.append("\x01HP\x01 [\x01LR\x01] NCCL INFO Connected all rings\n")
        else:
            out.append(f"\x01HP\x01 [\x01LR\x01] NCCL INFO {32 + c} coll channels, 0 nvls channels, {c} p2p "
                       f"channels, 2 p2p channels per peer\n")
    return out


WARNINGS = [
    "[rank\x01RK\x01]:[W{when} reducer.cpp:1400] Warning: Grad strides do not match bucket view strides. This may "
    "indicate grad was not created according to the gradient layout contract, or that the param's strides changed "
    "since DDP was constructed.  This is not an error, but may impair performance. (function operator())\n",
    "[rank\x01RK\x01]:[W{when} reducer.cpp:1529] Warning: find_unused_parameters=True was specified in DDP "
    "constructor, but did not find any unused parameters in the forward pass. (function operator())\n",
    "/usr/local/lib/python3.11/site-packages/torch/utils/checkpoint.py:{n}: UserWarning: None of the inputs have "
    "requires_grad=True. Gradients will be None\n",
]

SHORT = [
    "step {s} loss {l:.4f}\n", "it {s} | lr {lr:.2e}\n", "grad_norm: {g:.3f}\n", "tokens/s {t}\n",
    "epoch {e} batch {b}\n", "mem {m} MiB\n",
]


def body(job: mt.Job, mix: dict[str, float], nbytes: int, variant: int) -> tuple[bytes, int]:
    """A rank log's bulk of about `nbytes` bytes in the given proportions (with placeholders); also its last step."""
    rnd = random.Random(job.seed * 1000 + variant)
    done = dict.fromkeys(mix, 0)
    out: list[str] = []
    total = 0
    step = 0
    loss = 2.6
    elapsed = 0.0
    bar_open = False
    max_steps = 10 ** 7
    ns = 0
    while total < nbytes:
        kind = min(mix, key=lambda k: done[k] / mix[k])  # the kind furthest below its share
        if kind != "redraw" and bar_open:
            out.append("\n")
            total += 1
            bar_open = False
        if kind == "redraw":
            chunk = []
            for _ in range(rnd.randrange(20, 200)):
                step += 1
                elapsed += mt.STEP_SECONDS
                loss = max(0.4, loss * 0.99985 + 0.02 * (rnd.random() - 0.5))
                chunk.append(mt.tqdm_segment("Steps", step, max_steps, elapsed, step / elapsed,
                                             f"loss={loss:.3g}, lr=0.0003"))
            text = "".join(chunk)
            bar_open = True
        elif kind == "nccl":
            text = "".join(_nccl_lines(rnd, rnd.randrange(8, 64)))
        elif kind == "hf":
            lines = []
            for _ in range(rnd.randrange(1, 20)):
                step += 1
                loss = max(0.4, loss * 0.99985 + 0.02 * (rnd.random() - 0.5))
                lines.append(f"{{'loss': {loss:.4f}, 'grad_norm': {0.8 + rnd.random():.4f}, 'learning_rate': "
                             f"{3e-4 * (1 - step / max_steps)!r}, 'epoch': {step / 5000:.2f}}}\n")
            text = "".join(lines)
        elif kind == "warn":
            lines = []
            for _ in range(rnd.randrange(1, 8)):
                ns += 7919
                when = f"1125 12:{(ns // 60_000_000) % 60:02d}:{(ns // 1_000_000) % 60:02d}.{ns % 10**9:09d}"
                lines.append(rnd.choice(WARNINGS).format(when=when, n=200 + rnd.randrange(400)))
            text = "".join(lines)
        elif kind == "short":
            lines = []
            for _ in range(rnd.randrange(4, 40)):
                step += 1
                loss = max(0.4, loss * 0.99985 + 0.02 * (rnd.random() - 0.5))
                lines.append(rnd.choice(SHORT).format(s=step, l=loss, lr=3e-4, g=rnd.random() * 3,
                                                      t=rnd.randrange(10**5), e=step // 5000, b=step % 5000,
                                                      m=60000 + rnd.randrange(9000)))
            text = "".join(lines)
        else:  # errors: two watchdog lines per short traceback
            lines = []
            for _ in range(rnd.randrange(2, 10)):
                ns += 104729
                seq = 1000 + ns // 104729
                when = f"1125 12:{(ns // 60_000_000) % 60:02d}:{(ns // 1_000_000) % 60:02d}.{ns % 10**9:09d}"
                for _ in range(2):
                    lines.append(f"[rank\x01RK\x01]:[E{when} ProcessGroupNCCL.cpp:632] [Rank \x01RK\x01] Watchdog "
                                 f"caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
                                 f"NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600{seq % 1000:03d} "
                                 f"milliseconds before timing out.\n")
                lines.append("Traceback (most recent call last):\n"
                             f'  File "/workspace/train.py", line {100 + seq % 300}, in step\n'
                             "    loss.backward()\n"
                             f"RuntimeError: Expected all tensors to be on the same device, seq {seq}\n")
            text = "".join(lines)
        out.append(text)
        n = len(text.encode())
        done[kind] += n
        total += n
    if bar_open:
        out.append("\n")
    return "".join(out).encode(), step


def make_mix_tree(out: str, mix: str = "realistic", ranks: int = 512, size: int = mt.GIB, seed: int = 0,
                  gpus_per_node: int = 8) -> dict:
    """Write a tree under `out` (created; must be empty) and return its manifest."""
    if mix not in MIXES:
        raise ValueError(f"unknown mix {mix!r}; one of {sorted(MIXES)}")
    os.makedirs(out, exist_ok=True)
    if os.listdir(out):
        raise FileExistsError(f"{out} is not empty")
    job = mt.Job(ranks, min(size, 64 * mt.MIB), seed, gpus_per_node)  # a small job: its tails and init stay short
    per_rank = max(16 * 1024, size // ranks - job.nccl_bytes - 8 * 1024)
    bodies = {v: body(job, MIXES[mix], per_rank, v) for v in range(min(VARIANTS, ranks))}
    total = 0
    for node in range(job.nodes):
        ndir = os.path.join(out, f"gpu-node-{node:03d}")
        os.makedirs(os.path.join(ndir, "pyspy"), exist_ok=True)
        files = {"launcher.log": mt.launcher_log(job, node).encode()}
        for r in range(node * job.g, min(ranks, (node + 1) * job.g)):
            files[f"rank{r}.log"] = rank_log(job, r, bodies[r % len(bodies)][0])
            if r != job.culprit and r not in job.node_peers:
                files[f"pyspy/rank{r}.txt"] = mt.pyspy_dump(job, r).encode()
        for name, data in files.items():
            with open(os.path.join(ndir, name), "wb") as fh:
                fh.write(data)
            total += len(data)
    manifest = job.manifest()
    manifest.update(mix=mix, size=size, bytes=total, files=sum(len(fs) for _, _, fs in os.walk(out)))
    manifest["expected"].pop("step", None)
    return manifest


def rank_log(job: mt.Job, r: int, bulk: bytes) -> bytes:
    lr, pid = r % job.g, job.pids[r]
    bulk = bulk.replace(HP, f"{job.host(r)}:{pid}:{pid + 71}".encode()).replace(LR, str(lr).encode()) \
        .replace(RK, str(r).encode())
    if r == job.culprit:
        tail = mt.oom_tail(job, r)
    elif r in job.node_peers:
        tail = mt.sampling_tail(job, job.fail_batch + 1)
    elif r in job.closed:
        tail = mt.closed_tail(job, r)
    else:
        tail = mt.timeout_tail(job, r)
    head = mt.rank_header(job, r) + mt.nccl_init(job, r)
    return b"".join([head.encode(), bulk, b"\n", tail.encode()])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="directory to create")
    ap.add_argument("--mix", default="realistic", choices=sorted(MIXES))
    ap.add_argument("--ranks", type=int, default=512)
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    args = ap.parse_args(argv)
    manifest = make_mix_tree(args.out, args.mix, args.ranks, mt.parse_size(args.size), args.seed, args.gpus_per_node)
    json.dump(manifest, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Deterministic generator of realistic failure trees for benchmarks (one planted OOM at a sampling step).

Layout of a tree (N ranks, G GPUs per node):

    gpu-node-007/launcher.log        torchrun agent console (FORMATS.md §4.1, §4.2: ChildFailedError block)
    gpu-node-007/rank{r}.log         raw worker stdout+stderr: config echo (§5 DeepSpeed logging shape), NCCL INFO
                                     init/topology/channel lines (§1.1, §1.3), a c10 warning (§2.1), tqdm bars joined
                                     by \\r (§9.1), HF loss dicts on rank 0 (§9.3), eval/sampling bars, and at the end
                                     the failure or its cascade (§2.3, §2.6, §1.4, §3.1, §2.8)
    gpu-node-007/pyspy/rank{r}.txt   py-spy dump of a survivor hung in all_gather (§6.1)
    gpu-node-007/nvidia-smi.csv      `nvidia-smi --query-gpu=... --format=csv -l 30` (§7.2)
    gpu-node-007/dmesg.txt           dmesg excerpt, culprit node only (§7.4)

The planted failure: rank C runs out of GPU memory in the sampling phase at step F (a multiple of `sample_every`,
echoed in the config); its ring/tree neighbours see `Connection closed by remote peer` and die of ncclRemoteError,
its node's agent SIGTERMs the local peers, and every other rank hits the NCCL watchdog timeout ten minutes later.
The same (ranks, size, seed) always gives the same bytes. Run `python benchmarks/make_tree.py --help`.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
from datetime import datetime, timedelta, timezone

GIB = 1024 ** 3
MIB = 1024 ** 2
START = datetime(2025, 6, 1, 12, 0, 0, tzinfo=timezone.utc)
STEP_SECONDS = 0.52          # one optimizer step
SAMPLE_BATCHES = 50          # tqdm total of a sampling phase
SAMPLE_SECONDS = 1.9         # per sampling batch
EVAL_BATCHES = 20
EVAL_SECONDS = 0.08
WATCHDOG_MS = 600_000
BAR_GLYPHS = " ▏▎▍▌▋▊▉█"
VARIANTS = 4                 # distinct bodies shared by the ranks (keeps generation fast; ranks still differ)
GPU_NAME = "NVIDIA H100 80GB HBM3"
GPU_TOTAL_MIB = 81559
BUS_IDS = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]


def parse_size(text: str) -> int:
    """'1GiB', '256MiB', '0.25GiB', '1e9' -> bytes."""
    t = text.strip().lower().replace(" ", "")
    for suffix, mult in (("gib", GIB), ("gb", 10 ** 9), ("mib", MIB), ("mb", 10 ** 6), ("kib", 1024), ("b", 1)):
        if t.endswith(suffix):
            return int(float(t[: -len(suffix)]) * mult)
    return int(float(t))


# ---------------------------------------------------------------- small formatters

def _hms(seconds: float) -> str:
    s = int(seconds)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def _bar(n: int, total: int, width: int = 10) -> str:
    frac = n / total if total else 0.0
    full = int(frac * width)
    part = int((frac * width - full) * 8)
    text = "█" * full + (BAR_GLYPHS[part] if full < width and part else "")
    return text.ljust(width)


def tqdm_segment(desc: str, n: int, total: int, elapsed: float, rate: float, postfix: str = "") -> str:
    """One tqdm redraw, as written to a file: `\\r` + bar, no newline (FORMATS.md §9.1)."""
    pct = int(100 * n / total) if total else 0
    if n == 0 or rate <= 0:
        times, rate_s = f"{_hms(elapsed)}<?", "?it/s"
    else:
        remaining = (total - n) / rate
        times = f"{_hms(elapsed)}<{_hms(remaining)}"
        rate_s = f"{rate:5.2f}it/s" if rate >= 1 else f"{1 / rate:5.2f}s/it"
    head = f"{desc}: " if desc else ""
    return f"\r{head}{pct:3d}%|{_bar(n, total)}| {n}/{total} [{times}, {rate_s}{', ' + postfix if postfix else ''}]"


def c10_prefix(rank: int, level: str, when: datetime, nanos: int, where: str) -> str:
    """torch >= 2.4 C++ log prefix with the excepthook rank tag (FORMATS.md §2.1)."""
    return f"[rank{rank}]:[{level}{when:%m%d %H:%M:%S}.{nanos:09d} {where}] "


def pylog(when: datetime, level: str, where: str, msg: str) -> str:
    """DeepSpeed-style Python logging line `[asctime] [LEVEL] [file:line:func] msg` (FORMATS.md §5)."""
    return f"[{when:%Y-%m-%d %H:%M:%S},{when.microsecond // 1000:03d}] [{level}] [{where}] {msg}\n"


def agent_prefix(level: str, when: datetime, pid: int, where: str) -> str:
    """torchrun agent logger prefix, torch >= 2.4 (FORMATS.md §4.1)."""
    return f"{level}{when:%m%d %H:%M:%S}.{when.microsecond // 1000:03d}000 {pid} {where}] "


# ---------------------------------------------------------------- the job

class Job:
    """Everything about the simulated job that more than one file needs to agree on."""

    def __init__(self, ranks: int, size: int, seed: int, gpus_per_node: int):
        self.ranks, self.size, self.seed, self.g = ranks, size, seed, max(1, min(gpus_per_node, ranks))
        self.nodes = math.ceil(ranks / self.g)
        rnd = random.Random(seed)
        self.culprit = 1 + rnd.randrange(max(1, ranks - 1)) if ranks > 1 else 0
        self.pids = [10_000 + (seed * 7919 + r * 131 + rnd.randrange(97)) % 50_000 for r in range(ranks)]
        self.agent_pids = [4_000 + (seed * 31 + n * 17) % 5_000 for n in range(self.nodes)]
        self.comm_world = 0x55d0_0000_0000 + rnd.randrange(1 << 32) * 16
        self.comm_id = rnd.getrandbits(64)
        self.tp_comm_id = rnd.getrandbits(64)
        self.nccl_bytes = len(nccl_init(self, min(1, ranks - 1)).encode()) if ranks > 1 else 0
        # Steps that fit the per-rank byte budget; the failure is the last sampling phase that fits.
        per_rank = max(64 * 1024, size // ranks)
        step_bytes = len(tqdm_segment("Steps", 43210, 200000, 12345.0, 1.92, "loss=2.31, lr=0.0003").encode())
        fixed = self.nccl_bytes + 6 * 1024
        budget = max(4000 * step_bytes, per_rank - fixed)
        steps = int(budget / (step_bytes * 0.96))  # calibrated on the generated trees (within ~7% of --size)
        # a round sampling period giving 4 to 20 sampling phases that wastes the least of the budget
        periods = [m * 10 ** e for e in range(2, 8) for m in (1, 2, 2.5, 4, 5)
                   if steps / 20 <= m * 10 ** e <= max(100, steps / 4)]
        self.sample_every = int(max(periods or [100], key=lambda p: ((steps // p) * p, p)))
        self.eval_every = self.sample_every // 2
        self.fail_step = max(self.sample_every, (steps // self.sample_every) * self.sample_every)
        self.steps_per_epoch = _nice(self.fail_step / 3.3) or 100
        self.max_steps = self.fail_step * 10
        self.fail_batch = 17 + rnd.randrange(20)           # the sampling batch that OOMs
        self.seq_fail = 40_000 + self.fail_step * 3 + rnd.randrange(1000)
        self.t_sampling = START + timedelta(seconds=200 + self.fail_step * STEP_SECONDS
                                            + (self.fail_step // self.eval_every) * EVAL_BATCHES * EVAL_SECONDS
                                            + (self.fail_step // self.sample_every - 1) * SAMPLE_BATCHES * SAMPLE_SECONDS)
        self.t_fail = self.t_sampling + timedelta(seconds=self.fail_batch * SAMPLE_SECONDS + 0.37)
        self.t_timeout = self.t_fail + timedelta(seconds=SAMPLE_BATCHES * SAMPLE_SECONDS + WATCHDOG_MS / 1000)
        ring = list(range(ranks))
        c = self.culprit
        near = {ring[(c - 1) % ranks], ring[(c + 1) % ranks], ring[(c - 2) % ranks], ring[(c + 2) % ranks],
                (c - 1) // 2 if c else 0}
        self.culprit_node = c // self.g
        self.node_peers = {r for r in range(self.culprit_node * self.g, min(ranks, (self.culprit_node + 1) * self.g))
                           if r != c}
        self.closed = sorted(near - {c} - self.node_peers)
        self.timed_out = sorted(set(range(ranks)) - {c} - self.node_peers - set(self.closed))

    def host(self, rank: int) -> str:
        return f"gpu-node-{rank // self.g:03d}"

    def manifest(self) -> dict:
        return {"ranks": self.ranks, "size": self.size, "seed": self.seed, "gpus_per_node": self.g,
                "culprit_rank": self.culprit, "culprit_host": self.host(self.culprit), "fail_step": self.fail_step,
                "sample_every": self.sample_every, "eval_every": self.eval_every,
                "expected": {"category": "gpu_oom", "phase": "sample", "culprit_ranks": [self.culprit],
                             "step": self.fail_step},
                "connection_closed_ranks": self.closed, "sigterm_ranks": sorted(self.node_peers),
                "timed_out_ranks": len(self.timed_out)}


def _nice(x: float) -> int:
    """Round down to 1, 2 or 5 times a power of ten."""
    if x < 1:
        return 0
    p = 10 ** int(math.floor(math.log10(x)))
    for m in (5, 2, 1):
        if m * p <= x:
            return m * p
    return p


# ---------------------------------------------------------------- rank log pieces

def rank_header(job: Job, r: int) -> str:
    t = START + timedelta(seconds=3, milliseconds=r % 997)
    loc = "train.py:88:main"
    out = [pylog(t, "INFO", loc, f"initializing process group: backend=nccl WORLD_SIZE={job.ranks} RANK={r} "
                                 f"LOCAL_RANK={r % job.g} MASTER_ADDR=gpu-node-000 MASTER_PORT=29500"),
           pylog(t, "INFO", "train.py:91:main", "config: model=unet-xl resolution=512 mixed_precision=bf16 "
                                                 "gradient_checkpointing=false"),
           pylog(t, "INFO", "train.py:92:main", f"config: per_device_train_batch_size=8 gradient_accumulation_steps=2 "
                                                 f"dataloader_num_workers=8 max_steps={job.max_steps}"),
           pylog(t, "INFO", "train.py:93:main", f"config: eval_every={job.eval_every} sample_every={job.sample_every} "
                                                 f"sample_batch_size=16 save_every={job.sample_every * 5}"),
           pylog(t, "INFO", "train.py:94:main", "config: ddp_timeout=600 find_unused_parameters=true")]
    return "".join(out)


def nccl_init(job: Job, r: int) -> str:
    """NCCL_DEBUG=INFO output of one rank at init (NCCL 2.21 shapes, FORMATS.md §1.3), world comm + a TP split."""
    n, lr, h, pid = r // job.g, r % job.g, job.host(r), job.pids[r]
    tid = pid + 71
    ip = f"10.{n // 250}.{n % 250}.{10 + lr}"
    p = f"{h}:{pid}:{pid} [{lr}] NCCL INFO "
    q = f"{h}:{pid}:{tid} [{lr}] NCCL INFO "
    bus = f"{BUS_IDS[lr % 8]}000"
    out = [p + f"Bootstrap : Using eth0:{ip}<0>\n",
           p + "NET/Plugin : No plugin found (libnccl-net.so), using internal implementation\n"]
    if r == 0:
        out.append("NCCL version 2.21.5+cuda12.4\n")
    out += [q + f"NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB eth0:{ip}<0>\n",
            q + "Using network IB\n"]
    comm = job.comm_world + r * 0x1000
    out += _comm_block(job, q, r, lr, "ncclCommInitRank", comm, r, job.ranks, list(range(job.ranks)), 32, bus,
                       job.comm_id, "")
    # tensor-parallel group inside the node
    members = list(range(n * job.g, min(job.ranks, (n + 1) * job.g)))
    me = members.index(r)
    out += _comm_block(job, q, r, lr, "ncclCommSplit", comm + 0x800, me, len(members), members, 16, bus,
                       job.tp_comm_id ^ n, f" parent 0x{comm:x} color {n} key {me}")
    return "".join(out)


def _comm_block(job, q, r, lr, api, comm, me, nranks, members, channels, bus, comm_id, split):
    out = [q + f"{api} comm 0x{comm:x} rank {me} nranks {nranks} cudaDev {lr} nvmlDev {lr} busId {bus}"
               f"{split} commId 0x{comm_id:x} - Init START\n",
           q + f"comm 0x{comm:x} rank {me} nRanks {nranks} nNodes {max(1, nranks // job.g)} localRanks "
               f"{min(job.g, nranks)} localRank {lr} MNNVL 0\n"]
    if me == 0:
        ring_text = "".join(f"{m:5d}" for m in range(nranks))
        out += [q + f"Channel {c:02d}/{channels:02d} :{ring_text}\n" for c in range(channels)]
    trees = " ".join(f"[{c}] {(2 * me + 1) if 2 * me + 1 < nranks else -1}/-1/-1->{me}->{(me - 1) // 2 if me else -1}"
                     for c in range(min(channels, 8)))
    out.append(q + f"Trees {trees}\n")
    prev, nxt = (me - 1) % nranks, (me + 1) % nranks
    out += [q + f"Ring {c:02d} : {prev} -> {me} -> {nxt}\n" for c in range(channels)]
    nlr = members[nxt] % job.g
    cross = members[nxt] // job.g != members[me] // job.g
    for c in range(channels):
        if cross:
            out.append(q + f"Channel {c:02d}/0 : {me}[{lr}] -> {nxt}[{nlr}] [send] via NET/IB/{c % 4}/GDRDMA\n")
            out.append(q + f"Channel {c:02d}/0 : {prev}[{members[prev] % job.g}] -> {me}[{lr}] [receive] via "
                           f"NET/IB/{c % 4}/GDRDMA\n")
        else:
            out.append(q + f"Channel {c:02d}/0 : {me}[{lr}] -> {nxt}[{nlr}] via P2P/IPC/read\n")
    out.append(q + "Connected all rings\n")
    for c in range(channels):
        out.append(q + f"Channel {c:02d}/0 : {me}[{lr}] -> {(me - 1) // 2 if me else nxt}[{nlr}] via P2P/IPC/read\n")
    out.append(q + "Connected all trees\n")
    out.append(q + f"{channels} coll channels, {channels} collnet channels, 0 nvls channels, {channels} p2p channels, "
                   f"{channels} p2p channels per peer\n")
    out.append(q + f"{api} comm 0x{comm:x} rank {me} nranks {nranks} cudaDev {lr} nvmlDev {lr} busId {bus}"
                   f"{split} commId 0x{comm_id:x} - Init COMPLETE\n")
    return out


def c10_warning(job: Job, r: int) -> str:
    t = START + timedelta(seconds=190)
    return (c10_prefix(r, "W", t, 76_492_005 + r, "reducer.cpp:1529") +
            "Warning: find_unused_parameters=True was specified in DDP constructor, but did not find any unused "
            "parameters in the forward pass. This flag results in an extra traversal of the autograd graph every "
            "iteration,  which can adversely affect performance. If your model indeed never has any unused parameters "
            "in the forward pass, consider turning this flag off. Note that this warning may be a false positive if "
            "your model has flow control causing later iterations to have unused parameters. (function operator())\n")


def training_body(job: Job, variant: int, rank0: bool) -> str:
    """Steps 1..fail_step with eval and sampling phases; ends with the sampling bar at batch 0 of step fail_step.

    One tqdm bar for the whole run, as diffusers-style training scripts draw it (`desc="Steps"`, total = max
    steps, postfix loss/lr); eval and sampling bars are printed on lines of their own in between."""
    rnd = random.Random(job.seed * 1000 + variant)
    out: list[str] = []
    total = job.max_steps
    elapsed = 0.0
    base_lr = 3e-4
    loss = 2.6
    for step in range(1, job.fail_step + 1):
        elapsed += STEP_SECONDS * (0.9 + 0.2 * rnd.random())
        loss = max(0.4, loss * 0.99985 + 0.02 * (rnd.random() - 0.5))
        lr = base_lr * 0.5 * (1 + math.cos(math.pi * step / total))
        rate = step / max(elapsed, 1e-3)
        bar = tqdm_segment("Steps", step, total, elapsed, rate, f"loss={loss:.3g}, lr={lr:.3g}")
        out.append(bar)
        if rank0 and step % 10 == 0:
            # HF-style log dict printed through tqdm.write: clear the bar, print, redraw (FORMATS.md §9.3)
            out.append("\r" + " " * 80 + "\r")
            out.append(f"{{'loss': {loss:.4f}, 'grad_norm': {0.8 + rnd.random():.4f}, 'learning_rate': {lr!r}, "
                       f"'epoch': {step / job.steps_per_epoch:.2f}}}\n")
            out.append(bar)
        if step % job.eval_every == 0 and step % job.sample_every != 0:
            out.append("\n")
            for k in range(EVAL_BATCHES + 1):
                out.append(tqdm_segment("Validation DataLoader 0", k, EVAL_BATCHES, k * EVAL_SECONDS, 1 / EVAL_SECONDS))
            out.append("\n")
            elapsed += EVAL_BATCHES * EVAL_SECONDS
        if step % job.sample_every == 0:
            out.append("\n")
            last = step == job.fail_step
            for k in range(1 if last else SAMPLE_BATCHES + 1):
                out.append(tqdm_segment("Sampling", k, SAMPLE_BATCHES, k * SAMPLE_SECONDS, 1 / SAMPLE_SECONDS))
            if not last:
                out.append("\n")
                elapsed += SAMPLE_BATCHES * SAMPLE_SECONDS
    return "".join(out)


def sampling_tail(job: Job, upto: int) -> str:
    return "".join(tqdm_segment("Sampling", k, SAMPLE_BATCHES, k * SAMPLE_SECONDS, 1 / SAMPLE_SECONDS)
                   for k in range(1, upto + 1))


def oom_tail(job: Job, r: int) -> str:
    """The culprit: OOM in the sampling phase, rank-prefixed traceback glued to the bar (FORMATS.md §0.2, §2.8, §3.1)."""
    lr = r % job.g
    p = f"[rank{r}]: "
    site = "/usr/local/lib/python3.11/site-packages"
    frames = [("/workspace/train.py", 431, "<module>", "main()"),
              ("/workspace/train.py", 402, "main", "images = run_sampling(model, vae, prompts, step=global_step)"),
              ("/workspace/sampling.py", 77, "run_sampling", "latents = pipe(prompts, num_inference_steps=50).latents"),
              ("/workspace/sampling.py", 51, "__call__", "noise_pred = self.unet(latent_input, t, cond).sample"),
              (f"{site}/torch/nn/modules/module.py", 1751, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
              (f"{site}/torch/nn/modules/module.py", 1762, "_call_impl", "return forward_call(*args, **kwargs)"),
              ("/workspace/models/unet.py", 288, "forward", "h = block(h, emb, context)"),
              ("/workspace/models/attention.py", 112, "forward", "attn = torch.softmax(q @ k.transpose(-1, -2) * self.scale, dim=-1)")]
    out = [sampling_tail(job, job.fail_batch), p + "Traceback (most recent call last):\n"]
    for f, line, func, code in frames:
        out.append(f'{p}  File "{f}", line {line}, in {func}\n{p}    {code}\n')
    out.append(f"{p}torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.00 GiB. GPU {lr} has a total "
               f"capacity of 79.19 GiB of which 2.81 GiB is free. Including non-PyTorch memory, this process has 76.37 "
               f"GiB memory in use. Of the allocated memory 71.42 GiB is allocated by PyTorch, and 3.47 GiB is reserved "
               f"by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
               f"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
               f"Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)\n")
    return "".join(out)


def _work(job: Job) -> str:
    return (f"WorkNCCL(SeqNum={job.seq_fail}, OpType=ALLGATHER, NumelIn=786432, "
            f"NumelOut={786432 * job.ranks}, Timeout(ms)={WATCHDOG_MS})")


def closed_tail(job: Job, r: int) -> str:
    """A ring/tree neighbour: NCCL WARN connection closed, error trail, ncclRemoteError abort (§1.3, §1.4, §2.6)."""
    lr, h, pid = r % job.g, job.host(r), job.pids[r]
    t = job.t_fail + timedelta(seconds=1.2 + (r % 7) * 0.01)
    peer = f"{job.host(job.culprit)}<{40000 + job.culprit % 20000}>"
    pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {r}]"
    msg = (f"Collective {_work(job)} raised the following async exception: NCCL error: remote process exited or "
           f"there was a network error, NCCL version 2.21.5")
    out = [sampling_tail(job, SAMPLE_BATCHES), "\n",
           f"\n{h}:{pid}:{pid + 90} [{lr}] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote "
           f"peer {peer}\n",
           f"{h}:{pid}:{pid + 90} [{lr}] NCCL INFO misc/socket.cc:749 -> 6\n",
           f"{h}:{pid}:{pid + 90} [{lr}] NCCL INFO group.cc:65 -> 6 [Async thread]\n",
           c10_prefix(r, "E", t, 404_861_126, "ProcessGroupNCCL.cpp:1895") + f"{pg} Process group watchdog thread "
           f"terminated with exception: {msg}\n",
           "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\n",
           "Last error:\n",
           f"socketProgress: Connection closed by remote peer {peer}\n",
           "Exception raised from checkForNCCLErrorsInternal at /pytorch/torch/csrc/distributed/c10d/"
           "ProcessGroupNCCL.cpp:2027 (most recent call first):\n",
           "terminate called after throwing an instance of 'c10::DistBackendError'\n",
           f"  what():  {pg} Process group watchdog thread terminated with exception: {msg}\n"]
    return "".join(out)


def timeout_tail(job: Job, r: int) -> str:
    """Everyone else: NCCL watchdog timeout ten minutes later, torch >= 2.6 shapes (FORMATS.md §2.3)."""
    t = job.t_timeout + timedelta(milliseconds=(r * 37) % 900)
    ns = 735_151_211 + r
    pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {r}]"
    ran = WATCHDOG_MS + 11 + (r * 13) % 97
    wd = f"[Rank {r}] Watchdog caught collective operation timeout: {_work(job)} ran for {ran} milliseconds before timing out."
    out = [sampling_tail(job, SAMPLE_BATCHES), "\n",
           c10_prefix(r, "E", t, ns, "ProcessGroupNCCL.cpp:632") + wd + "\n",
           c10_prefix(r, "E", t, ns + 301, "ProcessGroupNCCL.cpp:2271") + f"{pg}  failure detected by watchdog at work "
           f"sequence id: {job.seq_fail} PG status: last enqueued work: {job.seq_fail}, last completed work: "
           f"{job.seq_fail - 1}\n",
           c10_prefix(r, "E", t, ns + 402, "ProcessGroupNCCL.cpp:670") + f"{pg} Stack trace of the failed collective not "
           f"found, potentially because FlightRecorder is disabled. You can enable it by setting "
           f"TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.\n",
           c10_prefix(r, "E", t, ns + 530, "ProcessGroupNCCL.cpp:2106") + f"[Rank {r}] Some NCCL operations have failed "
           f"or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
           f"corrupted/incomplete data.\n",
           c10_prefix(r, "E", t, ns + 611, "ProcessGroupNCCL.cpp:2112") + f"[Rank {r}] To avoid data inconsistency, we "
           f"are taking the entire process down.\n",
           c10_prefix(r, "E", t, ns + 790, "ProcessGroupNCCL.cpp:1895") + f"{pg} Process group watchdog thread "
           f"terminated with exception: {wd}\n",
           "Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:635 "
           "(most recent call first):\n",
           "terminate called after throwing an instance of 'c10::DistBackendError'\n",
           f"  what():  {pg} Process group watchdog thread terminated with exception: {wd}\n"]
    return "".join(out)


def rank_log(job: Job, r: int, bodies: dict) -> bytes:
    if r == job.culprit:
        tail = oom_tail(job, r)
    elif r in job.node_peers:
        tail = sampling_tail(job, job.fail_batch + 1)     # SIGTERMed by the agent mid-sampling: no last words
    elif r in job.closed:
        tail = closed_tail(job, r)
    else:
        tail = timeout_tail(job, r)
    body = bodies["rank0"] if r == 0 else bodies[r % VARIANTS]
    return b"".join([(rank_header(job, r) + nccl_init(job, r) + c10_warning(job, r)).encode(), body, tail.encode()])


# ---------------------------------------------------------------- other files

def launcher_log(job: Job, node: int) -> str:
    """The node's torchrun console: OMP banner, then the ChildFailedError summary (FORMATS.md §4.1, §4.2)."""
    apid = job.agent_pids[node]
    ranks = list(range(node * job.g, min(job.ranks, (node + 1) * job.g)))
    t0 = START
    w = "torch/distributed/run.py:792"
    out = [agent_prefix("W", t0, apid, w) + "\n", agent_prefix("W", t0, apid, w) + "*" * 41 + "\n",
           agent_prefix("W", t0, apid, w) + "Setting OMP_NUM_THREADS environment variable for each process to be 1 in "
           "default, to avoid your system being overloaded, please further tune the variable for optimal performance "
           "in your application as needed. \n",
           agent_prefix("W", t0, apid, w) + "*" * 41 + "\n"]
    api = "torch/distributed/elastic/multiprocessing/api.py"
    if node == job.culprit_node:
        first, code, t = job.culprit, 1, job.t_fail + timedelta(seconds=2)
        others = [(r, -15) for r in ranks if r != first]
    else:
        first = ranks[0]
        code = -6
        t = job.t_timeout + timedelta(seconds=1, milliseconds=(first * 37) % 900)
        if any(r in job.closed for r in ranks):
            t = job.t_fail + timedelta(seconds=2)
            first = next(r for r in ranks if r in job.closed)
        others = [(r, -6) for r in ranks if r != first]
    for r, _ in others:
        out.append(agent_prefix("W", t, apid, f"{api}:897") + f"Sending process {job.pids[r]} closing signal SIGTERM\n")
    out.append(agent_prefix("E", t, apid, f"{api}:869") + f"failed (exitcode: {code}) local_rank: {first % job.g} "
               f"(pid: {job.pids[first]}) of binary: /usr/bin/python3\n")
    site = "/usr/local/lib/python3.11/site-packages"
    out += ["Traceback (most recent call last):\n",
            '  File "/usr/local/bin/torchrun", line 8, in <module>\n', "    sys.exit(main())\n",
            f'  File "{site}/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 355, in wrapper\n',
            "    return f(*args, **kwargs)\n",
            f'  File "{site}/torch/distributed/run.py", line 918, in main\n', "    run(args)\n",
            f'  File "{site}/torch/distributed/run.py", line 909, in run\n', "    elastic_launch(\n",
            f'  File "{site}/torch/distributed/launcher/api.py", line 138, in __call__\n',
            "    return launch_agent(self._config, self._entrypoint, list(args))\n",
            f'  File "{site}/torch/distributed/launcher/api.py", line 269, in launch_agent\n',
            "    raise ChildFailedError(\n",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"]
    width = 60
    out += ["=" * width + "\n", "train.py FAILED\n", "-" * width + "\n", "Failures:\n"]

    def failure(idx, r, ecode):
        sig = {-15: "SIGTERM", -6: "SIGABRT", -9: "SIGKILL"}.get(ecode)
        tb = (f"Signal {-ecode} ({sig}) received by PID {job.pids[r]}" if sig else
              "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
        return [f"[{idx}]:\n", f"  time      : {t:%Y-%m-%d_%H:%M:%S}\n", f"  host      : {job.host(r)}\n",
                f"  rank      : {r} (local_rank: {r % job.g})\n",
                f"  exitcode  : {ecode} (pid: {job.pids[r]})" + (f"  ({sig})" if sig else " ") + "\n",
                "  error_file: <N/A>\n", f"  traceback : {tb}\n"]
    if others:
        for i, (r, ecode) in enumerate(others, start=1):
            out += failure(i, r, ecode)
    else:
        out.append("  <NO_OTHER_FAILURES>\n")
    out += ["-" * width + "\n", "Root Cause (first observed failure):\n"] + failure(0, first, code) + ["=" * width + "\n"]
    return "".join(out)


def pyspy_dump(job: Job, r: int) -> str:
    """py-spy 0.4.3 dump of a Python 3.11 survivor waiting in all_gather (FORMATS.md §6.1)."""
    pid = job.pids[r]
    return (f"Process {pid}: /usr/bin/python3 -u /workspace/train.py --config configs/unet_xl_512.yaml\n"
            f"Python v3.11.9 (/usr/bin/python3.11)\n\n"
            f'Thread {pid} (active): "MainThread"\n'
            f"    all_gather (torch/distributed/distributed_c10d.py:3707)\n"
            f"    wrapper (torch/distributed/c10d_logger.py:81)\n"
            f"    gather_samples (sampling.py:141)\n"
            f"    run_sampling (sampling.py:88)\n"
            f"    main (train.py:402)\n"
            f"    <module> (train.py:431)\n"
            f'Thread {pid + 40} (idle): "Thread-2 (_pin_memory_loop)"\n'
            f"    Condition.wait (threading.py:331)\n"
            f"    Queue.get (queue.py:180)\n"
            f"    do_one_step (torch/utils/data/_utils/pin_memory.py:31)\n"
            f"    _pin_memory_loop (torch/utils/data/_utils/pin_memory.py:54)\n"
            f"    Thread.run (threading.py:982)\n"
            f"    Thread._bootstrap_inner (threading.py:1045)\n"
            f"    Thread._bootstrap (threading.py:1002)\n")


def nvidia_smi_csv(job: Job, node: int, snapshots: int = 60) -> str:
    """`nvidia-smi --query-gpu=... --format=csv -l 30` around the failure (FORMATS.md §7.2)."""
    rnd = random.Random(job.seed * 7 + node)
    out = ["timestamp, index, name, pci.bus_id, memory.used [MiB], memory.total [MiB], utilization.gpu [%], "
           "temperature.gpu, power.draw [W]\n"]
    t_end = job.t_fail + timedelta(seconds=45)
    for s in range(snapshots):
        t = t_end - timedelta(seconds=30 * (snapshots - 1 - s))
        for gpu in range(min(job.g, job.ranks - node * job.g)):
            r = node * job.g + gpu
            used = 61_000 + rnd.randrange(900)
            util = 95 + rnd.randrange(5)
            if t >= job.t_sampling:
                used = 74_000 + rnd.randrange(1500)
                if r == job.culprit:
                    used = 80_900 + rnd.randrange(200)
            if t > job.t_fail and node == job.culprit_node:
                used, util = 0, 0
            elif t > job.t_fail:
                util = 100   # spinning in the NCCL kernel
            out.append(f"{t:%Y/%m/%d %H:%M:%S}.{t.microsecond // 1000:03d}, {gpu}, {GPU_NAME}, "
                       f"00000000:{BUS_IDS[gpu % 8].upper()}:00.0, {used} MiB, {GPU_TOTAL_MIB} MiB, {util} %, "
                       f"{55 + rnd.randrange(12)}, {480 + rnd.random() * 200:.2f} W\n")
    return "".join(out)


def dmesg_excerpt(job: Job, node: int) -> str:
    """Boot-time NVRM lines only: this failure leaves nothing in the kernel log (FORMATS.md §7.4)."""
    rnd = random.Random(job.seed + node)
    out = []
    for gpu in range(job.g):
        uuid = "-".join(f"{rnd.getrandbits(b):0{b // 4}x}" for b in (32, 16, 16, 16, 48))
        out.append(f"[   12.{345678 + gpu * 1111:06d}] NVRM: GPU at PCI:0000:{BUS_IDS[gpu % 8]}:00: GPU-{uuid}\n")
    return "".join(out)


# ---------------------------------------------------------------- driver

def make_tree(out: str, ranks: int = 512, size: int = GIB, seed: int = 0, gpus_per_node: int = 8) -> dict:
    """Write a tree under `out` (created; must not exist or be empty) and return its manifest (not written)."""
    if ranks < 1:
        raise ValueError("ranks must be >= 1")
    os.makedirs(out, exist_ok=True)
    if os.listdir(out):
        raise FileExistsError(f"{out} is not empty")
    job = Job(ranks, size, seed, gpus_per_node)
    bodies = {v: training_body(job, v, rank0=False).encode() for v in range(min(VARIANTS, ranks))}
    bodies["rank0"] = training_body(job, 0, rank0=True).encode()
    total = 0
    for node in range(job.nodes):
        ndir = os.path.join(out, f"gpu-node-{node:03d}")
        os.makedirs(os.path.join(ndir, "pyspy"), exist_ok=True)
        files = {"launcher.log": launcher_log(job, node).encode(),
                 "nvidia-smi.csv": nvidia_smi_csv(job, node).encode()}
        if node == job.culprit_node:
            files["dmesg.txt"] = dmesg_excerpt(job, node).encode()
        for r in range(node * job.g, min(ranks, (node + 1) * job.g)):
            files[f"rank{r}.log"] = rank_log(job, r, bodies)
            if r != job.culprit and r not in job.node_peers:
                files[f"pyspy/rank{r}.txt"] = pyspy_dump(job, r).encode()
        for name, data in files.items():
            with open(os.path.join(ndir, name), "wb") as fh:
                fh.write(data)
            total += len(data)
    manifest = job.manifest()
    manifest["bytes"] = total
    manifest["files"] = sum(len(fs) for _, _, fs in os.walk(out))
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="directory to create")
    ap.add_argument("--ranks", type=int, default=512)
    ap.add_argument("--size", default="1GiB", help="total bytes, e.g. 256MiB, 1GiB, 4GiB")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    args = ap.parse_args(argv)
    manifest = make_tree(args.out, args.ranks, parse_size(args.size), args.seed, args.gpus_per_node)
    json.dump(manifest, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

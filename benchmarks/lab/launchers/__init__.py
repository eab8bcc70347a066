"""How each launcher is started and where its output goes; one entry per launcher the lab runs."""
from __future__ import annotations

import os
import socket

from . import cluster

HERE = os.path.dirname(os.path.abspath(__file__))
VENV = os.environ.get("LAB_VENV", "/work/venv-lab")
PY = os.path.join(VENV, "bin", "python")
TORCHRUN = os.path.join(VENV, "bin", "torchrun")
ACCELERATE = os.path.join(VENV, "bin", "accelerate")
PRODUCT_PY = os.environ.get("LAB_PRODUCT_PY", "/work/venv/bin/python")
PRODUCT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

# what each launcher leaves, for the README and case.json's `source`
DESCRIBE = {
    "torchrun-tee": "torchrun --tee 3 --log-dir tlogs: console.log with [defaultN]: prefixes + tlogs/<run>/attempt_0/<N>/{stdout,stderr}.log",
    "torchrun-console": "torchrun without tee: console.log only (worker lines unprefixed and interleaved)",
    "torchrun-redirects": "torchrun --redirects 3 --log-dir tlogs: worker output only in tlogs/.../<N>/{stdout,stderr}.log; console.log has torchrun's own lines",
    "torchrun-restarts": "torchrun --max-restarts 1 --tee 3 --log-dir tlogs: both attempts in console.log, attempt_0/ and attempt_1/ dirs",
    "spawn": "torch.multiprocessing.spawn, the script's own logging to logs/train_rank<N>.log (rank 0 also on console); console.log has mp.spawn's errors",
    "slurm": "shell launcher setting RANK/WORLD_SIZE/MASTER_* itself, one job_<jobid>.<N>.out and .err per rank, no console",
    "jsonl": "torchrun without tee; the script logs JSON lines to logs/rank<N>.jsonl; console.log has tracebacks and torchrun's lines",
    "accelerate": "accelerate launch --multi_gpu --num_processes N (CPU, gloo): console.log",
    "collect": "postmortem collect --out CASE -- torchrun ...: <node>/stdout.log, stderr.log (arrival-stamped), pyspy/ on stall, manifest.json, error files",
    "lightning": "Lightning Trainer(accelerator='cpu', devices=N, strategy='ddp') run as python train.py: train.log (stdout+stderr)",
    "hf-trainer": "HF Trainer on a tiny GPT2 built from a config, under torchrun without tee: train.log (stdout+stderr)",
}
DESCRIBE.update(cluster.DESCRIBE)


def free_port() -> int:
    """A free TCP port on the loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(launcher: str, ws: int, script: str, case: str, params: dict) -> tuple[list[str], str | None, dict]:
    """(argv, console file name in the case folder or None, extra env) for one run."""
    port = free_port()
    tr = [TORCHRUN, "--standalone", f"--nproc-per-node={ws}"]
    if launcher in cluster.DESCRIBE:
        return cluster.command(launcher, ws, script, case, params, port, VENV, tr)
    if launcher == "torchrun-tee":
        return tr + ["--tee", "3", "--log-dir", os.path.join(case, "tlogs"), script], "console.log", {}
    if launcher == "torchrun-console":
        return tr + [script], "console.log", {}
    if launcher == "torchrun-redirects":
        return tr + ["--redirects", "3", "--log-dir", os.path.join(case, "tlogs"), script], "console.log", {}
    if launcher == "torchrun-restarts":
        return tr + ["--max-restarts", "1", "--tee", "3", "--log-dir", os.path.join(case, "tlogs"), script], "console.log", {}
    if launcher == "jsonl":
        return tr + [script], "console.log", {}
    if launcher == "spawn":
        return [PY, os.path.join(HERE, "spawn_launch.py"), str(ws), script], "console.log", {"MASTER_PORT": str(port)}
    if launcher == "slurm":
        jobid = str(params.get("jobid", 4242))
        return ["bash", os.path.join(HERE, "slurm_like.sh"), str(ws), script, case, jobid, str(port)], None, {"PYTHON": PY}
    if launcher == "accelerate":
        return [ACCELERATE, "launch", "--multi_gpu", f"--num_processes={ws}", "--num_machines=1",
                "--mixed_precision=no", "--dynamo_backend=no", f"--main_process_port={port}", script], "console.log", {}
    if launcher == "collect":
        stall = str(params.get("stall_after", 8))
        return [PRODUCT_PY, "-m", "postmortem", "collect", "--out", case, "--node", "node0", "--stall-after", stall,
                "--no-analyze", "--", *tr, script], None, {"PYTHONPATH": PRODUCT_ROOT}
    if launcher == "lightning":
        return [PY, script], "train.log", {"MASTER_PORT": str(port)}
    if launcher == "hf-trainer":
        return tr + [script], "train.log", {}
    raise ValueError(f"unknown launcher {launcher}")

"""Ray Train driver: `python ray_driver.py WORLD SCRIPT` runs SCRIPT's __main__ as the train loop of a TorchTrainer
with WORLD CPU workers (gloo; TorchTrainer sets up the process group, the script finds it initialized), on a local
Ray started by ray.init, as Ray's "PyTorch on CPU" guide does. Worker output reaches this console with Ray's
(RayTrainWorker pid=N, ip=A) prefixes; a failure ends in Ray Train's own error summary."""
from __future__ import annotations

import datetime
import json
import os
import runpy
import sys

import ray
from ray.train import FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchConfig, TorchTrainer


def train_loop_per_worker(config: dict) -> None:
    ctx = ray.train.get_context()
    os.environ.update(RANK=str(ctx.get_world_rank()), WORLD_SIZE=str(ctx.get_world_size()),
                      LOCAL_RANK=str(ctx.get_local_rank()))
    script = config["script"]
    sys.argv = [script]
    sys.path.insert(0, os.path.dirname(script))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    world, script = int(sys.argv[1]), os.path.abspath(sys.argv[2])
    timeout = int(json.loads(os.environ.get("LAB_PARAMS", "{}")).get("pg_timeout", 30))
    ray.init(num_cpus=world + 1, object_store_memory=80 * 2 ** 20, include_dashboard=False,
             runtime_env={"env_vars": {k: v for k, v in os.environ.items() if k.startswith(("LAB_", "OMP_"))}})
    trainer = TorchTrainer(
        train_loop_per_worker, train_loop_config={"script": script},
        torch_config=TorchConfig(backend="gloo", timeout_s=timeout),
        scaling_config=ScalingConfig(num_workers=world, use_gpu=False),
        run_config=RunConfig(name="train", storage_path=os.path.join(os.getcwd(), "ray_results"),
                             failure_config=FailureConfig(max_failures=0)))
    trainer.fit()
    print(f"training finished at {datetime.datetime.now().isoformat(timespec='seconds')}")

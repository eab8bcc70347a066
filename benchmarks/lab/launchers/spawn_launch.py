"""torch.multiprocessing.spawn launcher: `python spawn_launch.py WORLD SCRIPT` runs SCRIPT's __main__ in WORLD
processes with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set, the way scripts that call mp.spawn themselves do."""
from __future__ import annotations

import os
import runpy
import sys

import torch.multiprocessing as mp


def _worker(rank: int, world: int, script: str) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world))
    sys.argv = [script]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    world, script = int(sys.argv[1]), sys.argv[2]
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    mp.spawn(_worker, args=(world, script), nprocs=world, join=True)

"""A real CPU gloo job that hangs: rank 1 sleeps in load_next_shard() while rank 0 waits in all_reduce.

Run under torchrun --nproc-per-node 2. The gloo timeout (GLOO_HANG_TIMEOUT_S, default 12 s) ends the job:
rank 0's all_reduce raises, torchrun then stops rank 1.
"""
import datetime
import os
import time

import torch
import torch.distributed as dist


def load_next_shard(seconds: float) -> None:
    time.sleep(seconds)  # stands in for slow data preparation on one rank


def main() -> None:
    timeout = float(os.environ.get("GLOO_HANG_TIMEOUT_S", "12"))
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout))
    rank = dist.get_rank()
    t = torch.ones(4)
    dist.all_reduce(t)
    print(f"rank {rank} step 0 all_reduce ok: {t.tolist()}", flush=True)
    if rank == 1:
        load_next_shard(timeout * 10)
    dist.all_reduce(t)
    print(f"rank {rank} step 1 all_reduce ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""Rank 2 raises an ordinary ValueError at step 7 (a bad sample); the other ranks are left in the gradient
all_reduce of that step and see the peer connection close."""
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP


def load_batch(rank, step):
    if rank == 2 and step == 7:
        raise ValueError(f"sample 1843 has 0 tokens after filtering (shard {rank}, step {step})")
    x = torch.randn(16, 32)
    return x, x.sum(1, keepdim=True)


@record
def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=20))
    rank = dist.get_rank()
    print(f"rank {rank} initialized, world={dist.get_world_size()}", flush=True)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(2):
        for step in range(1, 21):
            x, y = load_batch(rank, step)
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)
            time.sleep(0.1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""Rank-conditional collective under TORCH_DISTRIBUTED_DEBUG=DETAIL: at step 6 rank 1 gets a short batch and
takes a branch that broadcasts, while ranks 0, 2, 3 all_reduce their early-stop flag as usual."""
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record


def get_batch(rank, step):
    n = 5 if (rank == 1 and step == 6) else 32    # rank 1's shard runs out early
    x = torch.randn(n, 16)
    return x, x.sum(1, keepdim=True)


@record
def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=20))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1, 21):
        x, y = get_batch(rank, step)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        stop = torch.zeros(1)
        if x.shape[0] < 32:
            # BUG: only the rank with a short batch takes this branch
            print(f"[rank {rank}] short batch ({x.shape[0]} samples) at step {step}, telling the others", flush=True)
            dist.broadcast(stop, src=rank)
        else:
            dist.all_reduce(stop)
        print(f"[rank {rank}] step {step} loss {loss.item():.4f}", flush=True)
        time.sleep(0.05)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

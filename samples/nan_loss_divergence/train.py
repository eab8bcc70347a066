"""Divergence: a learning rate 1000x too large makes the loss grow each step until it is inf and then nan;
the loop checks the loss and raises on the first non-finite value."""
import math
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP


@record
def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=20))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 1)))
    lr = 3.0          # meant to be 3e-3
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    print(f"[rank {rank}] optimizer SGD lr={lr} momentum=0.9", flush=True)
    g = torch.Generator().manual_seed(rank)
    for step in range(1, 201):
        x = torch.randn(64, 16, generator=g)
        y = 10 * x[:, :1] ** 2
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        print(f"[rank {rank}] step {step} loss {loss.item():.6g} grad_norm {gn.item():.6g} lr {lr}", flush=True)
        if not math.isfinite(loss.item()):
            raise FloatingPointError(f"Loss is {loss.item()} at step {step} on rank {rank}; stopping training")
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

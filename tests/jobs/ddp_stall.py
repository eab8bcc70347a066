"""A plain CPU DDP job that hangs: every rank prints `step N loss X` (no rank in the line, as most scripts do);
rank 1 stalls in load_batch() at step STALL_AT (default 12) while rank 0 waits in DDP's gradient all-reduce
inside backward. The gloo timeout (DDP_STALL_TIMEOUT_S, default 15 s) ends the job.

Run under torchrun --nproc-per-node 2.
"""
import datetime
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def load_batch(step: int, rank: int, stall_at: int, stall_s: float) -> torch.Tensor:
    if rank == 1 and step == stall_at:
        time.sleep(stall_s)  # stands in for a slow shard read on one rank
    return torch.randn(16, 32)


def main() -> None:
    timeout = float(os.environ.get("DDP_STALL_TIMEOUT_S", "15"))
    stall_at = int(os.environ.get("DDP_STALL_AT", "12"))
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1, 31):
        x = load_batch(step, rank, stall_at, timeout * 20)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.4f}", flush=True)
        time.sleep(0.05)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

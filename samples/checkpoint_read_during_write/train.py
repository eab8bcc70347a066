"""Seed 003: rank 0 writes best_stg1.pth at the end of stage 1 while the other ranks, with no barrier, wait only
until the file exists and is non-empty and then torch.load() it -- reading a half-written zip."""
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP

OUT = os.environ.get("OUTPUT_DIR", "output")
STOP_EPOCH = 2          # stage 1 ends here: reload best_stg1.pth and refresh the EMA (as in the seed)
STEPS = 10


def load_resume_state(path, rank):
    # BUG: the file check stands in for a barrier. "Exists and non-empty" is true as soon as rank 0's
    # torch.save has flushed its first buffer, long before the zip's central directory is written.
    while not (os.path.exists(path) and os.path.getsize(path) > 0):
        time.sleep(0.01)
    print(f"[Rank {rank}] Loading checkpoint from {path}", flush=True)
    return torch.load(path, map_location="cpu")


@record
def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=20))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    path = os.path.join(OUT, "best_stg1.pth")
    # a big EMA shadow kept by rank 0, so the checkpoint is ~200 MB and its save takes about a second
    ema = {"shadow": torch.randn(48 * 1024 * 1024), "decay": 0.9999} if rank == 0 else None
    for epoch in range(4):
        if epoch == STOP_EPOCH:
            state = load_resume_state(path, rank)
            model.module.load_state_dict(state["model"])
            print(f"[Rank {rank}] Refresh EMA at epoch {epoch} with decay 0.9999", flush=True)
        for step in range(STEPS):
            x = torch.randn(32, 64)
            loss = nn.functional.cross_entropy(model(x), torch.randint(0, 10, (32,)))
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"[Rank {rank}] epoch {epoch} step {(epoch + 1) * STEPS} loss {loss.item():.4f}", flush=True)
        if rank == 0 and epoch == STOP_EPOCH - 1:
            print(f"[Rank 0] Saving checkpoint to {path}", flush=True)
            t = time.time()
            torch.save({"model": model.module.state_dict(), "ema": ema, "epoch": epoch}, path)
            print(f"[Rank 0] Saved checkpoint to {path} ({os.path.getsize(path) / 2**20:.1f} MiB, "
                  f"{time.time() - t:.2f}s)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""A healthy 2-rank DDP job that finishes. It emits the usual harmless noise: torchrun's OMP_NUM_THREADS banner,
DDP's find_unused_parameters warning, a DataLoader UserWarning, and a tqdm progress bar on rank 0."""
import os
import warnings
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler
from tqdm import tqdm


@record
def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank = dist.get_rank()
    torch.manual_seed(0)
    ds = TensorDataset(torch.randn(2048, 16), torch.randn(2048, 1))
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=32, sampler=sampler, num_workers=1, persistent_workers=True)
    # harmless: nothing is unused, DDP warns about the wasted traversal
    model = DDP(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)), find_unused_parameters=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    if rank == 0:
        warnings.warn("checkpoint dir already exists; files may be overwritten", UserWarning)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        bar = tqdm(loader, desc=f"Epoch {epoch}", disable=rank != 0)
        for x, y in bar:
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            bar.set_postfix(loss=f"{loss.item():.4f}")
        print(f"[rank {rank}] epoch {epoch} done, last loss {loss.item():.4f}", flush=True)
        dist.barrier()
    if rank == 0:
        path = os.path.join(os.environ.get("OUTPUT_DIR", "."), "final.pt")
        torch.save(model.module.state_dict(), path)
        print(f"[rank 0] Saved final checkpoint to {path}", flush=True)
    dist.barrier()
    print(f"[rank {rank}] Training complete.", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

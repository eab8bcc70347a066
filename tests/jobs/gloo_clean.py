"""A clean CPU gloo job: one all_reduce, print the result per rank, exit 0 (any world size)."""
import datetime

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.ones(2) * (rank + 1)
dist.all_reduce(t)
print(f"rank {rank}/{world} all_reduce ok: {t.tolist()}", flush=True)
dist.barrier()
dist.destroy_process_group()

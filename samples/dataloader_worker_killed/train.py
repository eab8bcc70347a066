"""DDP with num_workers=2: on rank 1 a DataLoader worker is SIGKILLed (as the kernel OOM killer or a container
limit would do) while decoding a sample; the main process raises "DataLoader worker (pid N) is killed by signal"."""
import os
import signal
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class ImageFolderLike(Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        info = torch.utils.data.get_worker_info()
        if os.environ.get("RANK") == "1" and info.id == 1 and i >= 2000:
            os.kill(os.getpid(), signal.SIGKILL)      # the worker dies without a Python traceback
        time.sleep(0.005)                              # "decode" cost
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, 16, 16, generator=g), i % 10


@record
def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=20))
    rank = dist.get_rank()
    ds = ImageFolderLike()
    sampler = DistributedSampler(ds, shuffle=False)
    loader = DataLoader(ds, batch_size=16, sampler=sampler, num_workers=2)
    model = DDP(nn.Sequential(nn.Flatten(), nn.Linear(768, 64), nn.ReLU(), nn.Linear(64, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    print(f"[rank {rank}] {len(loader)} batches per epoch, num_workers=2", flush=True)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(loader):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 5 == 0:
                print(f"[rank {rank}] epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""Uneven shards: rank 0 gets one batch more than ranks 1-3, so its extra DDP gradient all_reduce meets the
others' end-of-training barrier (seed 002: stuck after "[Rank 0] 处理最后一个批次 (62/62)...")."""
import os
import signal
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, Subset

N_SAMPLES = 61 * 4 * 8 + 1   # 1953: rank 0 gets 489 samples (62 batches), ranks 1-3 get 488 (61 batches)
BATCH = 8


class ToyProteins(Dataset):
    def __len__(self):
        return N_SAMPLES

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(32, generator=g)
        return x, x.sum(0, keepdim=True) * 0.1


def dump_flight_recorder(rank):
    # gloo has no dump-on-timeout; write the same JSON the NCCL watchdog would, to TORCH_FR_DUMP_TEMP_FILE<rank>
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE")
    if prefix:
        data = torch._C._distributed_c10d._dump_fr_trace_json(True, True)
        with open(f"{prefix}{rank}.json", "wb") as f:
            f.write(data)


@record
def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=20))
    rank, world = dist.get_rank(), dist.get_world_size()
    # the sampler is replaced by a plain strided shard (no padding), as the seed's custom loader did
    shard = Subset(ToyProteins(), list(range(rank, N_SAMPLES, world)))
    loader = DataLoader(shard, batch_size=BATCH, shuffle=False, num_workers=0)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    n = len(loader)
    print(f"[Rank {rank}] 数据集大小 {len(shard)}，共 {n} 个批次", flush=True)
    step = 0
    try:
        for batch_idx, (x, y) in enumerate(loader, start=1):
            if batch_idx == n:
                print(f"[Rank {rank}] 处理最后一个批次 ({batch_idx}/{n})...", flush=True)
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()          # DDP all_reduces the gradients here
            opt.step()
            step += 1
            if step % 5 == 0 or batch_idx == n:
                print(f"step {step} loss {loss.item():.4f}", flush=True)
            if batch_idx % 20 == 0:
                print(f"[Rank {rank}] 训练进度 {batch_idx}/{n}", flush=True)
        print(f"[Rank {rank}] 训练循环结束，batch_idx={n}, 预期={n}", flush=True)
        print(f"[Rank {rank}] 等待所有进程完成训练（barrier）...", flush=True)
        dist.barrier()
        print(f"[Rank {rank}] ✅ 所有进程完成训练，同步成功", flush=True)
    except Exception:
        dump_flight_recorder(rank)
        raise
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

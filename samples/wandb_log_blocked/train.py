"""Seed 000: rank 0 calls wandb.log(..., commit=True) on every batch. When the wandb-core backend stops
reading (here: SIGSTOPped by make_sample.sh; in the seed: a slow upload), the socket to it fills and wandb.log
blocks the training loop; rank 1 waits in the next gradient all_reduce until gloo's timeout."""
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS_PER_EPOCH = 400


def make_model():
    layers = []
    for _ in range(24):
        layers += [nn.Linear(64, 64), nn.LayerNorm(64), nn.GELU()]
    return nn.Sequential(*layers, nn.Linear(64, 1))


def p_losses(model, x, y):
    return nn.functional.mse_loss(model(x), y)


def log_step(run, model, loss, epoch, step):
    # per-parameter statistics, committed on every batch (the seed's wandb.log(loss_dict, commit=True))
    loss_dict = {"train/loss": loss, "epoch": epoch}
    for name, p in model.module.named_parameters():
        loss_dict[f"grad_norm/{name}"] = p.grad.norm().item()
        loss_dict[f"weight_norm/{name}"] = p.detach().norm().item()
        loss_dict[f"weight_hist/{name}"] = p.detach().flatten()[:64].tolist()
    run.log(loss_dict, commit=True)


@record
def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank = dist.get_rank()
    run = None
    if rank == 0:
        import wandb
        run = wandb.init(project="ddpm-dpo", name="dpo-face", mode="offline", dir=os.environ["WANDB_RUN_DIR"])
        print(f"[WANDB] Mode: offline, run dir {run.dir}", flush=True)
    torch.manual_seed(0)
    model = DDP(make_model())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for epoch in range(3):
        t0 = time.time()
        for step in range(1, STEPS_PER_EPOCH + 1):
            x = torch.randn(16, 64)
            loss = p_losses(model, x, x.mean(1, keepdim=True))
            opt.zero_grad()
            loss.backward()
            opt.step()
            if run is not None:
                log_step(run, model, loss.item(), epoch, step)
            if step % 20 == 0:
                print(f"[Rank {rank}] Epoch {epoch}: {step}/{STEPS_PER_EPOCH} loss={loss.item():.4f} "
                      f"({(time.time() - t0) / step:.3f}s/it)", flush=True)
        print(f"[Rank {rank}] Epoch {epoch} completed, saving checkpoint", flush=True)
        dist.barrier()
    if run is not None:
        run.finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

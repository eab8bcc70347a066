"""Seed 004 ("training stuck at the encoder call"): at batch 71 rank 3 blocks inside encoder_forward on a
feature-cache lock held by a stuck prefetch thread; ranks 0-2 wait in the gradient all_reduce until gloo's
timeout. Every rank runs a small hang watchdog that dumps the flight recorder when its step stops advancing."""
import os
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record

HANG_BATCH = 71
FEATURE_CACHE_LOCK = threading.Lock()
progress = {"step": 0, "t": time.time()}


def prefetch_features(rank, batch_idx):
    # stands in for a read from a stalled network filesystem, holding the cache lock while it waits
    with FEATURE_CACHE_LOCK:
        time.sleep(3600)


def hang_watchdog(rank, stall_s=12):
    # dumps the flight recorder once if the step counter stops moving (gloo has no dump-on-timeout)
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE")
    while prefix:
        time.sleep(1)
        if time.time() - progress["t"] > stall_s:
            data = torch._C._distributed_c10d._dump_fr_trace(True, True, False)   # pickle, like NCCL's dump
            with open(f"{prefix}{rank}", "wb") as f:
                f.write(data)
            print(f"[Rank {rank}] watchdog: no progress for {stall_s}s at step {progress['step']}, "
                  f"flight recorder written to {prefix}{rank}", flush=True)
            return


class ConformerEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(160, 128)
        self.layers = nn.Sequential(nn.ReLU(), nn.Linear(128, 128), nn.ReLU())

    def forward(self, audio_signal):
        return encoder_forward(self, audio_signal)


def encoder_forward(encoder, audio_signal):
    with FEATURE_CACHE_LOCK:          # rank 3 waits here forever at batch 71
        feats = audio_signal.view(audio_signal.shape[0], -1, 160).mean(1)
    return encoder.layers(encoder.proj(feats))


class ASRModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = ConformerEncoder()
        self.decoder = nn.Linear(128, 32)

    def forward(self, audio_signal, rank, batch_idx, debug):
        if debug:
            print(f"[Rank {rank}] Forward: Calling encoder (batch {batch_idx})...", flush=True)
            print(f"[Rank {rank}] Forward: Encoder input - audio_signal.shape={tuple(audio_signal.shape)}, "
                  f"device={audio_signal.device}, has_nan={bool(torch.isnan(audio_signal).any())}, "
                  f"has_inf={bool(torch.isinf(audio_signal).any())}", flush=True)
        encoded = self.encoder(audio_signal)
        if debug:
            print(f"[Rank {rank}] Forward: Encoder completed, encoded.shape={tuple(encoded.shape)}", flush=True)
        return self.decoder(encoded)


def average_gradients(model, world):
    # one flat all_reduce per step instead of one per parameter
    grads = [p.grad for p in model.parameters()]
    flat = torch.cat([g.flatten() for g in grads])
    dist.all_reduce(flat)
    flat /= world
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


def train_step(model, opt, rank, world, batch_idx):
    audio = torch.randn(8, 16000)
    target = torch.randint(0, 32, (8,))
    if rank == 3 and batch_idx == HANG_BATCH:
        threading.Thread(target=prefetch_features, args=(rank, batch_idx), name="feature-prefetch",
                         daemon=True).start()
        time.sleep(0.2)
    logits = model(audio, rank, batch_idx, debug=batch_idx >= HANG_BATCH - 1)
    loss = nn.functional.cross_entropy(logits, target)
    opt.zero_grad()
    loss.backward()
    average_gradients(model, world)
    opt.step()
    return loss.item()


@record
def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    threading.Thread(target=hang_watchdog, args=(rank,), name="fr-hang-watchdog", daemon=True).start()
    torch.manual_seed(rank)
    model = ASRModel()
    for p in model.parameters():
        dist.broadcast(p.data, 0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for batch_idx in range(1, 201):
        loss = train_step(model, opt, rank, world, batch_idx)
        progress["step"], progress["t"] = batch_idx, time.time()
        if batch_idx % 10 == 0:
            print(f"[Rank {rank}] step {batch_idx} loss {loss:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

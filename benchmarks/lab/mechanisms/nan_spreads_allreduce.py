"""nan_inf: from step N the culprit rank's rows carry a feature in the wrong unit (values ~1e6 after a frozen
normalisation), its sigmoid saturates and its hand-written BCE gives a NaN loss; DDP's all_reduce spreads the NaN
gradients, so the other ranks log a finite loss but a NaN grad norm at N and NaN losses from N+1. Nothing stops
training; at the end rank 0 builds a histogram of the scores and numpy raises on the NaN range."""
import math
import time

import numpy as np
import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def batch(lab, step, g):
    x = torch.randn(16, 32, generator=g)
    y = (torch.rand(16, generator=g) < 0.5).float()
    if lab.rank == lab.p["culprit"] and step >= lab.p["step"]:
        x[:, 3] = x[:, 3] * 1e6 + 1e7  # durations reported in microseconds by a new client version
    return x, y


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model(d_out=1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(100 + lab.rank)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        x, y = batch(lab, step, g)
        if lab.rank == lab.p["culprit"] and step == lab.p["step"]:
            lab.side("fault", step=step, what="saturating inputs -> NaN loss")
        p = torch.sigmoid(model(x).squeeze(1))
        loss = -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()
        opt.zero_grad()
        loss.backward()
        gn = math.sqrt(sum(float(q.grad.pow(2).sum()) for q in model.parameters()))
        opt.step()
        lab.log_step(step, float(loss), lab.p["steps"], grad_norm=gn)
        time.sleep(lab.p["sleep"])
    with torch.no_grad():
        scores = torch.sigmoid(model(torch.randn(64, 32)).squeeze(1))
    gathered = [torch.empty_like(scores) for _ in range(lab.world)]
    dist.all_gather(gathered, scores)
    if lab.rank == 0:
        hist, edges = np.histogram(torch.cat(gathered).numpy(), bins=20)
        lab.log(f"score histogram: {hist.tolist()}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

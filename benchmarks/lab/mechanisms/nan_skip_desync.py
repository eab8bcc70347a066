"""nan_inf + barrier_skew: the culprit rank sees a NaN loss from a bad input and skips the step (no gradient
all_reduce); its collectives are one behind from then on and the job hangs at the end until the timeout."""
import time

import torch
import torch.distributed as dist

from trainkit import Lab, tiny_model


def main(lab):
    lab.init_pg()
    model = tiny_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    g = torch.Generator().manual_seed(lab.rank)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        x = torch.randn(8, 32, generator=g)
        if lab.rank == lab.p["culprit"] and step == lab.p["step"]:
            x[2, 5] = float("nan")  # a missing value in this shard
        loss = model(x).pow(2).mean()
        if torch.isnan(loss):
            lab.side("fault", step=step, what="skipped step on NaN")
            lab.warn(f"step {step}: loss is nan, skipping this batch")
            continue
        opt.zero_grad()
        loss.backward()
        flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        dist.all_reduce(flat)
        flat /= lab.world
        i = 0
        for p in model.parameters():
            p.grad.copy_(flat[i:i + p.numel()].view_as(p))
            i += p.numel()
        opt.step()
        lab.log_step(step, loss.item(), lab.p["steps"])
        time.sleep(lab.p["sleep"])
    lab.log("training finished")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

"""checkpoint_corruption: the job resumes from ckpt/last.pt, which the previous run's writer left truncated when it
was killed mid-write; torch.load fails on every rank (or on rank 0, which loads and broadcasts)."""
import os
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def main(lab):
    lab.init_pg()
    model = tiny_model(d_in=256, d_hidden=256, d_out=256)
    path = os.path.join(lab.work, "ckpt", "last.pt")
    start = 0
    if os.path.exists(path):
        if not lab.p.get("rank0_loads") or lab.rank == 0:
            lab.log(f"resuming from {path}")
            lab.side("fault", step=0, what="load truncated checkpoint")
            state = torch.load(path, map_location="cpu")
            start = state["step"]
        if lab.p.get("rank0_loads"):
            t = torch.tensor([start])
            dist.broadcast(t, 0)
            start = int(t)
    model = ddp(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(start + 1, start + lab.p["steps"] + 1):
        lab.tick(step)
        loss = model(torch.randn(8, 256)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

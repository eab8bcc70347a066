"""barrier_skew: after training only rank 0 calls save_checkpoint(), which synchronises inside (barrier, as
Lightning-style helpers do); that barrier pairs with the other ranks' final barrier, they exit, and rank 0 is left
alone in its own final barrier."""
import os
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def save_checkpoint(lab, model, path):
    torch.save(model.state_dict(), path)
    dist.barrier()  # make sure every rank sees the file before going on


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item(), lab.p["steps"])
        time.sleep(lab.p["sleep"])
    if lab.rank == 0:
        lab.side("fault", step=lab.p["steps"], what="rank-0-only barrier")
        save_checkpoint(lab, model.module, os.path.join(lab.work, "final.pt"))
        lab.log("saved final checkpoint")
    dist.barrier()
    lab.log("all ranks done")
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

"""job_stopped: a healthy run planned for many more steps than its scheduler allocation allows; it trains normally
(a checkpoint every 50 steps, per-step metrics) until Slurm ends it: its --time limit, or a user's scancel."""
import os
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    total = lab.p["steps"]
    lab.log(f"training for {total} steps, world size {lab.world}")
    for step in range(1, total + 1):
        lab.tick(step)
        loss = model(torch.randn(16, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item(), total)
        if step % 50 == 0 and lab.rank == 0:
            path = os.path.join(lab.work, "ckpt", f"step_{step}.pt")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            torch.save(model.module.state_dict(), path)
            lab.log(f"saved checkpoint {path}")
        time.sleep(lab.p["sleep"])
    dist.barrier()
    lab.log("training finished")
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

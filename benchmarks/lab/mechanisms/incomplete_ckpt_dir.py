"""checkpoint_corruption: resume from the newest checkpoint directory, which the previous run left incomplete (its
writer died before the culprit rank's optimizer shard was written); the culprit raises FileNotFoundError."""
import glob
import os
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def main(lab):
    lab.init_pg()
    model = tiny_model()
    dirs = sorted(glob.glob(os.path.join(lab.work, "ckpt", "step_*")))
    opt = torch.optim.Adam(model.parameters())
    if dirs:
        d = dirs[-1]
        lab.log(f"resuming from {d}")
        model.load_state_dict(torch.load(os.path.join(d, "model.pt")))
        shard = os.path.join(d, f"optim_rank{lab.rank}.pt")
        if not os.path.exists(shard):
            lab.side("fault", step=300, what="missing optimizer shard")
        opt.load_state_dict(torch.load(shard))
    model = ddp(model)
    for step in range(301, 301 + lab.p["steps"]):
        lab.tick(step)
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

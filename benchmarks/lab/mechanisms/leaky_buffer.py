"""host_oom: the culprit rank keeps augmented copies of every batch in a replay buffer; RSS grows until the
harness's memory watchdog SIGKILLs it (the kernel OOM killer / k8s limit)."""
import time

import numpy as np
import torch

from trainkit import Lab, ddp, tiny_model


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    replay = []
    use_replay = lab.rank == lab.p["culprit"]  # only this rank's config enables the replay buffer
    for step in range(1, lab.p["steps"] * 10 + 1):
        lab.tick(step)
        x = torch.randn(8, 32)
        if use_replay and step >= lab.p["step"]:
            if step == lab.p["step"]:
                lab.side("fault", step=step, what="replay buffer grows")
            replay.append(np.ones((64, 1024, 1024), dtype=np.uint8))  # 64 MB of augmented views per step
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        time.sleep(max(lab.p["sleep"], 0.15))
    lab.log("training done")


if __name__ == "__main__":
    Lab().run(main)

"""straggler: every few steps the culprit rank checks a control pipe for operator commands; opening a FIFO for
reading blocks until a writer appears, and none does; the other ranks time out in all_reduce."""
import os
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def poll_control(lab):
    path = os.path.join(lab.work, f"control-{lab.rank}")
    if os.path.exists(path):
        with open(path) as f:  # a FIFO: blocks until someone opens it for writing
            return f.read().strip()
    return None


def main(lab):
    lab.init_pg()
    if lab.rank == lab.p["culprit"]:
        os.mkfifo(os.path.join(lab.work, f"control-{lab.rank}"))  # made by the job's ops tooling on this node
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        if step == lab.p["step"]:
            if lab.rank == lab.p["culprit"]:
                lab.side("fault", step=step, what="blocked opening fifo")
            cmd = poll_control(lab)
            if cmd:
                lab.log(f"control: {cmd}")
        time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

"""no_failure near miss: rank 0 (which hosts the TCP store when the launcher does not) comes up a few seconds late, so
the other ranks log failed store connections before joining; a handled exception with a logged traceback on one
rank; then a normal end."""
import time
import traceback

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def load_optional_state(lab):
    try:
        with open("resume_state.json") as f:
            return f.read()
    except FileNotFoundError:
        lab.warn("no resume state found, starting fresh:\n" + traceback.format_exc())
        lab.side("nearmiss", what="handled FileNotFoundError")
        return None


def main(lab):
    if lab.rank == 0:
        time.sleep(4 + lab.p["step"] % 3)  # the first node's container pulls its image late
    lab.init_pg()
    if lab.rank == lab.p["culprit"]:
        load_optional_state(lab)
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
    dist.barrier()
    lab.log("training finished")
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

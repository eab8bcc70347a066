"""rank_crash (signal): an invariant check in the culprit rank's data path calls os.abort() (what a failed C
assert does) -> SIGABRT, 'Aborted' with no Python traceback (a faulthandler stack when PYTHONFAULTHANDLER=1)."""
import os
import time

import torch

from trainkit import Lab, ddp, tiny_model


def pack_sequences(lens, step, p, rank):
    total = sum(lens)
    if rank == p["culprit"] and step == p["step"]:
        total -= 1  # an off-by-one in the packed length of this batch
    if total != sum(lens):
        os.abort()
    return total


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        if lab.rank == lab.p["culprit"] and step == lab.p["step"]:
            lab.side("fault", step=step, what="SIGABRT")
        pack_sequences([5, 7, 9], step, lab.p, lab.rank)
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        time.sleep(lab.p["sleep"])
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

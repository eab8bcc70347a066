"""rank_crash: the culprit rank's data check finds an empty batch at step N; it logs an ERROR line saying so and
calls sys.exit(1) (no traceback of its own); the other ranks lose it in the next all_reduce."""
import logging
import sys
import time

import torch

from trainkit import Lab, ddp, tiny_model


def batches(lab):
    g = torch.Generator().manual_seed(lab.rank)
    for step in range(1, lab.p["steps"] + 1):
        n = 0 if lab.rank == lab.p["culprit"] and step == lab.p["step"] else 8  # a shard file that was truncated
        yield step, torch.randn(n, 32, generator=g)


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    shard = lab.rank
    for step, x in batches(lab):
        lab.tick(step)
        if len(x) == 0:
            lab.side("fault", step=step, what="empty batch, sys.exit(1)")
            lab.log(f"data check failed: empty batch at step {step} (shard {shard}); exiting", level=logging.ERROR)
            sys.exit(1)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item(), lab.p["steps"])
        time.sleep(lab.p["sleep"])
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

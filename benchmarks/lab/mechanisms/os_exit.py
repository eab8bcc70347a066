"""rank_crash (silent): the culprit rank's shard fetcher gives up after its retries and calls os._exit(1) (to skip
atexit handlers that would hang); no traceback, exit code 1."""
import os
import time

import torch

from trainkit import Lab, ddp, tiny_model


def fetch_next_shard(lab, step):
    for attempt in range(1, 4):
        ok = not (lab.rank == lab.p["culprit"] and step == lab.p["step"])
        if ok:
            return torch.randn(8, 32)
        lab.warn(f"shard fetch failed (attempt {attempt}/3), retrying in 0.2s")
        time.sleep(0.2)
    lab.side("fault", step=step, what="os._exit(1)")
    os._exit(1)


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        x = fetch_next_shard(lab, step)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        time.sleep(lab.p["sleep"])
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

"""rank_crash: only the culprit rank (the one that owns the 'per-class' metric) concatenates its running stats, and
one batch's stats have a different width -> numpy ValueError in that rank-conditional branch."""
import time

import numpy as np
import torch

from trainkit import Lab, ddp, tiny_model


def class_stats(logits, step, p):
    width = logits.shape[1] + (1 if step == p["step"] else 0)  # this batch carries an extra 'ignore' column
    return np.zeros((logits.shape[0], width))


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    owns_metric = lab.rank == lab.p["culprit"]
    stats = np.zeros((0, 4))
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        x = torch.randn(8, 32)
        out = model(x)
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if owns_metric:
            stats = np.concatenate([stats, class_stats(out.detach(), step, lab.p)], axis=0)
        lab.log_step(step, loss.item())
        time.sleep(lab.p["sleep"])
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

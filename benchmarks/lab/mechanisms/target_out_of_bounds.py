"""rank_crash: the culprit rank's shard was labelled with a newer label map (one class id too many); cross_entropy
raises IndexError: Target N is out of bounds at the first batch that holds it."""
import time

import torch

from trainkit import Lab, ddp, tiny_model

N_CLASSES = 4


def batch(lab, step, g):
    y = torch.randint(0, N_CLASSES, (8,), generator=g)
    if lab.rank == lab.p["culprit"] and step == lab.p["step"]:
        y[3] = N_CLASSES + 1  # label from the new label map
    return torch.randn(8, 32, generator=g), y


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model(d_out=N_CLASSES))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(lab.rank)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        x, y = batch(lab, step, g)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item(), lab.p["steps"], lr=1e-3)
        time.sleep(lab.p["sleep"])
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

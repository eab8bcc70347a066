"""host_oom: the culprit rank builds its confusion matrix with num_classes taken from the data; one corrupt label
makes it 2**20 -> numpy _ArrayMemoryError 'Unable to allocate ... TiB'."""
import time

import numpy as np
import torch

from trainkit import Lab, ddp, tiny_model


def eval_labels(lab, step):
    y = np.random.default_rng(step).integers(0, 4, 64)
    if lab.rank == lab.p["culprit"] and step == lab.p["step"]:
        y[17] = 2 ** 20 - 1  # an unset label stored as the 20-bit sentinel 0xFFFFF
    return y


def confusion(y_true, y_pred):
    n = int(max(y_true.max(), y_pred.max())) + 1
    m = np.zeros((n, n), dtype=np.int64)
    np.add.at(m, (y_true, y_pred), 1)
    return m


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        if step % 2 == 0:
            y = eval_labels(lab, step)
            cm = confusion(y, np.random.default_rng(0).integers(0, 4, 64))
            lab.log(f"eval step {step}: accuracy {np.trace(cm) / cm.sum():.3f}")
        time.sleep(lab.p["sleep"])
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

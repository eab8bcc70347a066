"""straggler: at step N the culprit rank evaluates its local validation set behind a tqdm progress bar (no
collective) for longer than the process-group timeout; the bar shows the elapsed time against that timeout while
the other ranks wait in the next step's gradient all_reduce and time out."""
import sys
import time

import torch
import torch.distributed as dist
from tqdm import tqdm

from trainkit import Lab, ddp, tiny_model


def evaluate(lab, model, n_batches, per_batch):
    total = 0.0
    with torch.no_grad():
        for _ in tqdm(range(n_batches), desc="Evaluating", file=sys.stderr, mininterval=1.0, ascii=True):
            total += model(torch.randn(64, 32)).pow(2).mean().item()
            time.sleep(per_batch)
    return total / n_batches


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
        if step == lab.p["step"] and lab.rank == lab.p["culprit"]:
            lab.side("fault", step=step, what="long eval behind a tqdm bar")
            n = 400
            lab.log(f"val_loss {evaluate(lab, model.module, n, lab.p['pg_timeout'] * 2.5 / n):.4f}")
        time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

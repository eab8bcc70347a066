"""straggler: at step N the culprit rank runs its full local evaluation (the eval loop has no collective) for longer
than the process-group timeout while the other ranks are already in the next step's gradient all_reduce."""
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def evaluate(lab, model, n_batches):
    lab.log(f"evaluating on {n_batches} validation batches")
    total = 0.0
    with torch.no_grad():
        for i in range(n_batches):
            total += model(torch.randn(256, 32)).pow(2).mean().item()
            time.sleep(0.02)
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
        # each rank evaluates its own shard; the culprit's shard is the big one
        if step == lab.p["step"] and lab.rank == lab.p["culprit"]:
            lab.side("fault", step=step, what="long eval")
            n = int(lab.p["pg_timeout"] * 1.6 / 0.02)
            lab.log(f"val_loss {evaluate(lab, model.module, n):.4f}")
        time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

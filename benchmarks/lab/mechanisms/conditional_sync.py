"""barrier_skew: after each validation every rank all_reduces its mean loss, and also its rare-class recall, but
only when its own batch held a rare-class example; at step N the culprit's batch has none, so it skips that
all_reduce and goes on to the next one (an int64 'improved' flag) while the others still reduce the recall."""
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def validate(lab, model, step):
    val_loss = torch.tensor([model(torch.randn(16, 32)).pow(2).mean().item()])
    dist.all_reduce(val_loss)
    has_rare = not (lab.rank == lab.p["culprit"] and step == lab.p["step"])
    if has_rare:
        recall = torch.tensor([0.5])
        dist.all_reduce(recall)  # reduced only where the metric is defined on this rank
    improved = torch.tensor([1], dtype=torch.int64)
    dist.all_reduce(improved)
    return val_loss.item()


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
            if lab.rank == lab.p["culprit"] and step == lab.p["step"]:
                lab.side("fault", step=step, what="skips the recall all_reduce")
            with torch.no_grad():
                validate(lab, model.module, step)
        time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

"""barrier_skew: at a re-sync step the culprit rank takes the 'I hold the EMA weights' branch and broadcasts them,
while the other ranks run their usual all_reduce of the metrics; the collectives do not match."""
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    ema = torch.zeros(64)
    holds_ema = lab.rank == lab.p["culprit"]
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        metrics = torch.tensor([loss.item(), 1.0])
        if step == lab.p["step"] and holds_ema:
            lab.side("fault", step=step, what="broadcast while others all_reduce")
            dist.broadcast(ema, src=lab.rank)
        else:
            dist.all_reduce(metrics)
        lab.log_step(step, (metrics[0] / metrics[1]).item(), lab.p["steps"])
        time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

"""barrier_skew: every eval_every steps rank 0 alone runs evaluate(), which all_gathers predictions from 'all'
ranks; the others have moved on to the next step's gradient all_reduce, so the collectives never pair."""
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def evaluate(model, world):
    preds = model(torch.randn(16, 32)).argmax(-1)
    out = [torch.zeros_like(preds) for _ in range(world)]
    dist.all_gather(out, preds)
    return torch.cat(out)


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
        lab.log_step(step, loss.item(), lab.p["steps"])
        if lab.rank == 0 and step == lab.p["step"]:
            lab.side("fault", step=step, what="rank-0-only all_gather")
            lab.log(f"running evaluation at step {step}")
            with torch.no_grad():
                preds = evaluate(model.module, lab.world)
            lab.log(f"eval: {preds.numel()} predictions")
        time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

"""no_failure near miss: a dynamic loss scaler starts too high; the first steps overflow and are skipped
('gradient overflow detected, ignoring gradient, setting loss scale to'), then it settles and the run ends normally."""
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scale = 2.0 ** (128 - 6 + lab.p["step"] % 4)  # the initial scale overflows float32 gradients
    step = 0
    while step < lab.p["steps"]:
        lab.tick(step)
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        (loss * scale).backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        if not torch.isfinite(gn):
            scale /= 2.0
            lab.side("nearmiss", what="overflow skip")
            lab.log(f"NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: {scale}")
            continue
        for p in model.parameters():
            p.grad /= scale
        opt.step()
        step += 1
        lab.log_step(step, loss.item(), lab.p["steps"], loss_scale=scale)
        time.sleep(lab.p["sleep"])
    dist.barrier()
    lab.log("done training")
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

"""nan_inf: a dynamic loss scaler (fairseq-style) halves its scale on every overflow; from step N the culprit rank's
inputs carry a huge outlier, the all_reduced gradients overflow on every rank at every step, the scale collapses to
its minimum and every rank raises FloatingPointError together."""
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


class DynamicLossScaler:
    def __init__(self, init_scale=2.0 ** 7, min_scale=1e-4):
        self.scale, self.min_scale = init_scale, min_scale

    def check_overflow(self, grad_norm):
        if not torch.isfinite(grad_norm):
            self.scale /= 2.0
            if self.scale <= self.min_scale:
                raise FloatingPointError(
                    f"Minimum loss scale reached ({self.min_scale}). Your loss is probably exploding. Try lowering "
                    "the learning rate, using gradient clipping or increasing the batch size.")
            raise OverflowError("setting loss scale to: " + str(self.scale))


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = DynamicLossScaler()
    for step in range(1, lab.p["steps"] * 4):
        lab.tick(step)
        x = torch.randn(8, 32)
        if lab.rank == lab.p["culprit"] and step >= lab.p["step"]:
            if step == lab.p["step"]:
                lab.side("fault", step=step, what="outlier inputs")
            x[0, 0] = 3e38
        loss = model(x).pow(2).mean() * scaler.scale
        opt.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        try:
            scaler.check_overflow(gn)
        except OverflowError as e:
            lab.log(f"NOTE: gradient overflow detected, ignoring gradient, {e}")
            continue
        opt.step()
        lab.log_step(step, loss.item() / scaler.scale, loss_scale=scaler.scale)
        time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

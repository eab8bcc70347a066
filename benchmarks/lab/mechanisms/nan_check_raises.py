"""nan_inf: one record of the culprit rank's shard holds inf features (a division by a zero std in preprocessing);
the loss is NaN and the training loop's finite check raises FloatingPointError."""
import time

import torch

from trainkit import Lab, ddp, tiny_model


def normalize(x, std):
    return x / std


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(lab.rank)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        std = torch.ones(32)
        if lab.rank == lab.p["culprit"] and step == lab.p["step"]:
            std[7] = 0.0  # a constant feature in this shard's statistics
        x = normalize(torch.randn(8, 32, generator=g) + 1, std)
        loss = model(x).pow(2).mean()
        if not torch.isfinite(loss):
            raise FloatingPointError(f"Loss is {loss.item()} at step {step}, stopping training")
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        time.sleep(lab.p["sleep"])
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

"""nan_inf: autograd anomaly detection is on; a negative variance estimate in the culprit rank's batch goes through
sqrt and backward raises 'Function SqrtBackward0 returned nan values in its 0th output'."""
import time

import torch

from trainkit import Lab, ddp, tiny_model


def main(lab):
    lab.init_pg()
    torch.autograd.set_detect_anomaly(True)
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(lab.rank)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        out = model(torch.randn(8, 32, generator=g))
        var = out.pow(2).mean() - out.mean().pow(2)  # E[x^2] - E[x]^2, rounds below 0 on a constant batch
        if lab.rank == lab.p["culprit"] and step == lab.p["step"]:
            var = var - var.detach() - 1e-3
        loss = out.pow(2).mean() + 0.1 * torch.sqrt(var)
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        time.sleep(lab.p["sleep"])
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

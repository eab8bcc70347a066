"""ddp_usage_error: the model has an auxiliary head that forward() only uses when aux_weight > 0 (it is 0 in this
config) and DDP runs with find_unused_parameters=False: every rank fails at the second iteration with 'Expected to
have finished reduction in the prior iteration'."""
import time

import torch

from trainkit import Lab, ddp


class Net(torch.nn.Module):
    def __init__(self, aux_weight):
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Linear(32, 64)
        self.head = torch.nn.Linear(64, 4)
        self.aux_head = torch.nn.Linear(64, 4)
        self.aux_weight = aux_weight

    def forward(self, x):
        h = torch.relu(self.body(x))
        out = self.head(h)
        if self.aux_weight > 0:
            out = out + self.aux_weight * self.aux_head(h)
        return out


def main(lab):
    lab.init_pg()
    model = ddp(Net(aux_weight=0.0))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        time.sleep(lab.p["sleep"])
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

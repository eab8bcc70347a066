"""ddp_usage_error: activation checkpointing with the reentrant implementation around a block whose weight is also
used outside it, under DDP(find_unused_parameters=True): 'Expected to mark a variable ready only once' on every rank."""
import time

import torch
import torch.utils.checkpoint as cp

from trainkit import Lab, ddp


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.block = torch.nn.Linear(32, 32)
        self.head = torch.nn.Linear(32, 4)

    def forward(self, x):
        h = cp.checkpoint(lambda t: torch.relu(self.block(t)), x, use_reentrant=True)
        h = cp.checkpoint(lambda t: torch.relu(self.block(t)), h, use_reentrant=True)  # shared block, twice
        return self.head(h)


def main(lab):
    lab.init_pg()
    model = ddp(Net(), find_unused_parameters=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        x = torch.randn(8, 32, requires_grad=True)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        time.sleep(lab.p["sleep"])
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

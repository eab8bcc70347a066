"""DDP misuse: the model owns an auxiliary head that forward() never uses, and DDP is built with the default
find_unused_parameters=False, so the reducer waits for gradients that never come and the second iteration raises
"Expected to have finished reduction in the prior iteration before starting a new one"."""
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(32, 64), nn.ReLU())
        self.head = nn.Linear(64, 10)
        self.aux_head = nn.Linear(64, 10)     # only used when aux loss is enabled (it is not)

    def forward(self, x, use_aux=False):
        h = self.backbone(x)
        out = self.head(h)
        if use_aux:
            out = out + 0.3 * self.aux_head(h)
        return out


@record
def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=20))
    rank = dist.get_rank()
    model = DDP(Classifier())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(1, 11):
        x, y = torch.randn(16, 32), torch.randint(0, 10, (16,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"[rank {rank}] step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

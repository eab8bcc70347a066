"""dataloader_failure: a DataLoader worker of the culprit rank caches every decoded sample; its RSS grows until the
memory watchdog SIGKILLs the worker -> 'DataLoader worker (pid N) is killed by signal: Killed.'"""
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from trainkit import Lab, ddp, tiny_model


class Decoded(Dataset):
    def __init__(self, lab):
        self.lab, self.cache = lab, {}
        self.caching = lab.rank == lab.p["culprit"]  # this rank's config turned the decode cache on

    def __len__(self):
        return 10 ** 5

    def __getitem__(self, i):
        if self.caching and i >= (self.lab.p["step"] - 1) * 8:
            if i == (self.lab.p["step"] - 1) * 8:
                self.lab.side("fault", step=self.lab.p["step"], what="worker cache grows")
            self.cache[i] = np.ones((8, 1024, 1024), dtype=np.uint8)  # 8 MB decoded frames per sample
        time.sleep(0.01)
        return torch.randn(32)


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(Decoded(lab), batch_size=8, num_workers=2)
    for step, x in enumerate(loader, 1):
        lab.tick(step)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        time.sleep(max(lab.p["sleep"], 0.1))
        if step > 400:
            break
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

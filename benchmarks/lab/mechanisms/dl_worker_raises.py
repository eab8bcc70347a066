"""dataloader_failure: a DataLoader worker of the culprit rank opens a shard file that is missing
(FileNotFoundError in __getitem__); the main process re-raises 'Caught FileNotFoundError in DataLoader worker'."""
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset

from trainkit import Lab, ddp, tiny_model


class ShardDataset(Dataset):
    def __init__(self, lab):
        self.lab, self.root = lab, os.path.join(lab.work, "shards")
        os.makedirs(self.root, exist_ok=True)
        self.missing = (lab.p["step"] - 1) * 8 + 2 if lab.rank == lab.p["culprit"] else -1

    def __len__(self):
        return self.lab.p["steps"] * 8

    def __getitem__(self, i):
        path = os.path.join(self.root, f"rank{self.lab.rank}-{i:05d}.pt")
        if i != self.missing and not os.path.exists(path):
            torch.save(torch.randn(32), path)
        with open(path, "rb") as f:
            return torch.load(f)


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(ShardDataset(lab), batch_size=8, num_workers=2)
    for step, x in enumerate(loader, 1):
        lab.tick(step)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        time.sleep(lab.p["sleep"])
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

"""dataloader_failure: a native image decoder in a DataLoader worker of the culprit rank reads through a bad
pointer on one sample -> the worker dies of SIGSEGV; the main process raises 'DataLoader worker ... exited
unexpectedly' after 'killed by signal: Segmentation fault.'"""
import ctypes
import time

import torch
from torch.utils.data import DataLoader, Dataset

from trainkit import Lab, ddp, tiny_model


class Images(Dataset):
    def __init__(self, lab):
        self.lab = lab
        self.bad = (lab.p["step"] - 1) * 8 + 4 if lab.rank == lab.p["culprit"] else -1
        self.buf = ctypes.create_string_buffer(32)

    def __len__(self):
        return self.lab.p["steps"] * 8

    def __getitem__(self, i):
        addr = ctypes.addressof(self.buf)
        if i == self.bad:
            addr = 16  # a zero-length image: the decoder returns an offset instead of a buffer
            self.lab.side("fault", step=self.lab.p["step"], what="worker SIGSEGV")
        ctypes.string_at(addr, 32)
        return torch.randn(32)


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(Images(lab), batch_size=8, num_workers=2)
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

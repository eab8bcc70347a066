"""dataloader_failure: a DataLoader worker of the culprit rank blocks reading a named pipe nobody writes (a
streaming source); DataLoader(timeout=N) raises 'DataLoader timed out after N seconds'."""
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset

from trainkit import Lab, ddp, tiny_model


class Stream(Dataset):
    def __init__(self, lab):
        self.lab = lab
        self.fifo = os.path.join(lab.work, f"stream-{lab.rank}.fifo")
        if not os.path.exists(self.fifo):
            os.mkfifo(self.fifo)
        self.start_stream_at = (lab.p["step"] - 1) * 8 if lab.rank == lab.p["culprit"] else 10 ** 9

    def __len__(self):
        return self.lab.p["steps"] * 8

    def __getitem__(self, i):
        if i >= self.start_stream_at:
            if i == self.start_stream_at:
                self.lab.side("fault", step=self.lab.p["step"], what="worker blocked on fifo")
            with open(self.fifo, "rb") as f:  # the producer of this stream never started
                return torch.frombuffer(bytearray(f.read(128)), dtype=torch.float32)
        return torch.randn(32)


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(Stream(lab), batch_size=8, num_workers=1, timeout=lab.p.get("dl_timeout", 8))
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

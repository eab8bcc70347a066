"""straggler: rank 0 saves a checkpoint through a throttled stream (a slow network mount) with no barrier around it;
the other ranks go on to the next step's gradient all_reduce and time out."""
import io
import os
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


class ThrottledFile(io.RawIOBase):
    """A file on a slow mount: ~40 KB/s."""

    def __init__(self, path):
        self.f = open(path, "wb")

    def writable(self):
        return True

    def write(self, b):
        for i in range(0, len(b), 4096):
            self.f.write(b[i:i + 4096])
            time.sleep(0.1)
        return len(b)

    def close(self):
        self.f.close()
        super().close()


def main(lab):
    lab.init_pg()
    model = ddp(torch.nn.Sequential(torch.nn.Linear(32, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                    torch.nn.Linear(512, 4)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        if step == lab.p["step"] and lab.rank == 0:
            path = os.path.join(lab.work, f"checkpoint-{step}.pt")
            lab.side("fault", step=step, what="slow save")
            lab.log(f"Saving model checkpoint to {path}")
            with ThrottledFile(path) as f:
                torch.save({"model": model.module.state_dict(), "optim": opt.state_dict(), "step": step}, f)
            lab.log("checkpoint saved")
        time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

"""checkpoint_corruption: rank 0 rewrites shared.pt (in chunks, a slow mount) every few steps with no barrier; the
culprit rank refreshes its EMA copy from that file while it is being written -> PytorchStreamReader error."""
import io
import os
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def write_slowly(state, path):
    buf = io.BytesIO()
    torch.save(state, buf)
    data = buf.getvalue()
    with open(path, "wb") as f:
        for i in range(0, len(data), 16384):
            f.write(data[i:i + 16384])
            f.flush()
            time.sleep(0.05)


def main(lab):
    lab.init_pg()
    model = ddp(torch.nn.Sequential(torch.nn.Linear(32, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256),
                                    torch.nn.Linear(256, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    path = os.path.join(lab.work, "shared.pt")
    if lab.rank == 0:
        write_slowly(model.module.state_dict(), path)
    dist.barrier()
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        if step == lab.p["step"]:
            if lab.rank == 0:
                lab.log(f"saving {path}")
                write_slowly(model.module.state_dict(), path)
            elif lab.rank == lab.p["culprit"]:
                time.sleep(0.3)
                lab.side("fault", step=step, what="load during write")
                ema = torch.load(path)
                lab.log(f"refreshed EMA from {path} ({len(ema)} tensors)")
        time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

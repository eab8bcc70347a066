"""barrier_skew: the job runs with TORCH_DISTRIBUTED_DEBUG=DETAIL; at step N the culprit takes a branch that
all_gathers its predictions while the others all_reduce their metrics; the DETAIL wrapper compares the collectives'
fingerprints and raises 'Detected mismatch between collectives on ranks'."""
import os
import time

os.environ.setdefault("TORCH_DISTRIBUTED_DEBUG", "DETAIL")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from trainkit import Lab, ddp, tiny_model  # noqa: E402


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        metric = torch.tensor([loss.item()])
        if lab.rank == lab.p["culprit"] and step == lab.p["step"]:
            lab.side("fault", step=step, what="all_gather instead of all_reduce")
            out = [torch.empty_like(metric) for _ in range(lab.world)]
            dist.all_gather(out, metric)
        else:
            dist.all_reduce(metric)
        time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

"""barrier_skew: contiguous split with a short last shard on the culprit rank: it leaves the loop early and enters the
final barrier while the others are in the next step's gradient all_reduce."""
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def shard_sizes(lab, n_batches):
    # the file list is split by contiguous ranges; the culprit's range holds fewer samples
    return [lab.p["step"] if r == lab.p["culprit"] else n_batches for r in range(lab.world)]


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    n = shard_sizes(lab, lab.p["steps"])[lab.rank]
    g = torch.Generator().manual_seed(lab.rank)
    lab.log(f"epoch 0: {n} batches in this rank's shard")
    for step in range(1, n + 1):
        lab.tick(step)
        x = torch.randn(8, 32, generator=g)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        time.sleep(lab.p["sleep"])
    if n < lab.p["steps"]:
        lab.side("fault", step=n, what="short shard; entering final barrier early")
    lab.log("epoch finished, waiting for the other ranks")
    dist.barrier()
    lab.log("all ranks done")
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

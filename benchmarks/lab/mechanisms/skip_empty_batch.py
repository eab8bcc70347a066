"""barrier_skew: a length filter leaves the culprit rank's batch empty at one step and it `continue`s past the
gradient all_reduce; from then on its collectives are one behind, and at the end it waits in the final barrier while
the others wait in their last all_reduce."""
import time

import torch
import torch.distributed as dist

from trainkit import Lab, tiny_model

MAX_LEN = 48


def get_batch(lab, step, g):
    lengths = torch.randint(8, 40, (8,), generator=g)
    if lab.rank == lab.p["culprit"] and step == lab.p["step"]:
        lengths = torch.randint(60, 120, (8,), generator=g)  # a run of very long documents in this shard
    return torch.randn(8, 32, generator=g), lengths


def main(lab):
    lab.init_pg()
    model = tiny_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    g = torch.Generator().manual_seed(10 + lab.rank)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        x, lengths = get_batch(lab, step, g)
        keep = lengths <= MAX_LEN
        x = x[keep]
        if x.shape[0] == 0:
            lab.side("fault", step=step, what="skipped all_reduce")
            lab.log(f"step {step}: no sample shorter than {MAX_LEN}, skipping batch")
            continue
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        dist.all_reduce(flat)
        flat /= lab.world
        i = 0
        for p in model.parameters():
            p.grad.copy_(flat[i:i + p.numel()].view_as(p))
            i += p.numel()
        opt.step()
        lab.log_step(step, loss.item(), lab.p["steps"])
        time.sleep(lab.p["sleep"])
    lab.log("training loop finished")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

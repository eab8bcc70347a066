"""barrier_skew: ranks are paired into sub-groups that all_reduce a head's gradients inside the pair, then every
rank all_reduces the shared trunk on the world group; at step N the culprit's batch has no usable example, it logs
that it skips the head loss and skips its pair's all_reduce, so its partner waits in the pair's all_reduce while
everyone else waits in the world all_reduce."""
import time

import torch
import torch.distributed as dist

from trainkit import Lab, tiny_model


def allreduce_(params, group, n):
    for p in params:
        if p.grad is not None:
            dist.all_reduce(p.grad, group=group)
            p.grad /= n


def main(lab):
    lab.init_pg()
    pairs = [dist.new_group([i, i + 1]) for i in range(0, lab.world, 2)]
    mine = pairs[lab.rank // 2]
    trunk, head = tiny_model(d_out=16), torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(list(trunk.parameters()) + list(head.parameters()), lr=0.05)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        opt.zero_grad()
        feats = trunk(torch.randn(8, 32))
        if lab.rank == lab.p["culprit"] and step == lab.p["step"]:
            lab.side("fault", step=step, what="skips the pair all_reduce")
            lab.log(f"step {step}: no example long enough in batch (max 11 frames), skipping head loss")
            feats.pow(2).mean().backward()
        else:
            head(feats).pow(2).mean().backward()
            allreduce_(head.parameters(), mine, 2)
        allreduce_(trunk.parameters(), None, lab.world)
        opt.step()
        lab.log_step(step, float(feats.detach().pow(2).mean()))
        time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

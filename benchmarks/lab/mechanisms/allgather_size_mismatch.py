"""barrier_skew: each rank scores its own validation shard and all_gathers the scores with buffers sized from its
own shard; the culprit's shard holds one more example than the others' (it logs the count), so the gloo all_gather
receives more bytes than a peer expects and that receiver aborts ('op.preamble.length <= op.nbytes')."""
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def main(lab):
    lab.init_pg()
    n_val = 256 + (1 if lab.rank == lab.p["culprit"] else 0)
    lab.log(f"loaded {n_val} validation examples from data/val-{lab.rank:05d}.jsonl")
    val_x = torch.randn(n_val, 32)
    model = ddp(tiny_model(d_out=1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item(), lab.p["steps"])
        if step == lab.p["step"]:
            lab.log(f"running validation at step {step}")
            if lab.rank == lab.p["culprit"]:
                lab.side("fault", step=step, what="all_gather of a longer score tensor")
            with torch.no_grad():
                scores = model.module(val_x).squeeze(1)
            gathered = [torch.empty_like(scores) for _ in range(lab.world)]
            dist.all_gather(gathered, scores)
            lab.log(f"val mean score {torch.cat(gathered).mean().item():.4f}")
        time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

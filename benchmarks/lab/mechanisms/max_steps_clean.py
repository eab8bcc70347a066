"""no_failure near miss: a clean run that stops at max_steps mid-epoch; a DeprecationWarning on every rank and a
handled traceback for one corrupt sample on one rank, skipped."""
import time
import traceback
import warnings

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def decode(sample_id, rank, bad_rank):
    if rank == bad_rank and sample_id == 13:
        raise ValueError(f"could not decode sample {sample_id}: unexpected end of stream")
    return torch.randn(32)


def main(lab):
    lab.init_pg()
    warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cuda', args...)` "
                  "instead.", FutureWarning)
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    max_steps = lab.p["step"]
    bad_rank = lab.p["culprit"]  # the rank whose shard holds the corrupt sample
    for step in range(1, 10 ** 6):
        lab.tick(step)
        xs = []
        for sid in range(step * 4, step * 4 + 8):
            try:
                xs.append(decode(sid, lab.rank, bad_rank))
            except ValueError:
                lab.side("nearmiss", what="skipped corrupt sample")
                lab.warn("skipping sample %d:\n%s", sid, traceback.format_exc())
                xs.append(torch.zeros(32))
        loss = model(torch.stack(xs)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item(), 40)
        time.sleep(lab.p["sleep"])
        if step >= max_steps:
            lab.log(f"reached max_steps={max_steps}, stopping")
            break
    dist.barrier()
    lab.log("training finished")
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

"""no_failure near miss: a batch-size finder on every rank tries a huge batch first, catches torch's
'DefaultCPUAllocator: can't allocate memory' and numpy's MemoryError, logs the traceback, halves and goes on; the run
then trains to the end."""
import time
import traceback

import numpy as np
import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def find_batch_size(lab, start):
    bs = start
    while bs > 8:
        try:
            if bs >= 2 ** 24:
                np.zeros((bs, 2 ** 20), dtype=np.float64)  # the probe's host buffer
            torch.empty(bs, 2 ** 20, dtype=torch.float32)
            return bs
        except (RuntimeError, MemoryError):
            lab.side("nearmiss", what="oom probe")
            lab.warn(f"batch size {bs} does not fit in memory, retrying with {bs // 64}:\n{traceback.format_exc()}")
            bs //= 64
    return bs


def main(lab):
    lab.init_pg()
    bs = find_batch_size(lab, 2 ** (24 + lab.p["culprit"] % 2 * 12))
    t = torch.tensor([bs])
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    lab.log(f"using batch size {int(t)}")
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item(), lab.p["steps"])
        time.sleep(lab.p["sleep"])
    dist.barrier()
    lab.log("training complete")
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

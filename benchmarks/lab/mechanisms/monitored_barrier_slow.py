"""straggler: every epoch each rank cleans its own text shard and then syncs with dist.monitored_barrier(
wait_all_ranks=True); in epoch N the culprit's shard holds pathological lines and its cleaning runs far past the
barrier's timeout, so rank 0 reports 'Ranks C failed to pass monitoredBarrier' and the others fail after it."""
import datetime
import re
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model

URL = re.compile(r"https?://\S+")


def clean(lab, epoch, lines):
    out = []
    slow = lab.rank == lab.p["culprit"] and epoch == lab.p["epoch"]
    deadline = time.time() + lab.p["pg_timeout"] * 2.5
    for line in lines:
        out.append(URL.sub("<url>", line))
        if slow:  # a quadratic dedup over a shard with very long lines
            while time.time() < deadline:
                sum(i * i for i in range(20000))
            slow = False
    return out


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    timeout = datetime.timedelta(seconds=lab.p["pg_timeout"])
    for epoch in range(lab.p["epochs"]):
        lab.log(f"epoch {epoch}: preparing shard {lab.rank}/{lab.world}")
        if lab.rank == lab.p["culprit"] and epoch == lab.p["epoch"]:
            lab.side("fault", step=epoch, what="slow shard cleaning")
        lines = clean(lab, epoch, [f"see https://example.com/{i} for details" for i in range(2000)])
        lab.log(f"epoch {epoch}: {len(lines)} examples ready")
        dist.monitored_barrier(timeout=timeout, wait_all_ranks=True)
        for step in range(1, 5):
            lab.tick(epoch * 4 + step)
            loss = model(torch.randn(8, 32)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            lab.log_step(epoch * 4 + step, loss.item())
            time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

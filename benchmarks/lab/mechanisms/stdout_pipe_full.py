"""logging_blocking: the culprit rank sends its stdout through a log shipper child (dup2 onto the child's stdin
pipe); the shipper stalls retrying an upload endpoint that is down, stops reading, the 64 KB pipe fills and the
rank blocks in print(); the others time out in all_reduce."""
import os
import subprocess
import sys
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model

SHIPPER = r"""
import socket, sys, time
buf = []
for line in sys.stdin:
    buf.append(line)
    if len(buf) >= 40:  # upload a batch of lines
        delay = 1
        while True:
            try:
                socket.create_connection(("127.0.0.1", 9), timeout=2).close()
                break
            except OSError:
                time.sleep(delay)
                delay = min(2 * delay, 60)
        buf = []
"""


def main(lab):
    lab.init_pg()
    if lab.rank == lab.p["culprit"]:
        shipper = subprocess.Popen([sys.executable, "-c", SHIPPER], stdin=subprocess.PIPE)
        sys.stdout.flush()
        os.dup2(shipper.stdin.fileno(), 1)
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(1, 100000):
        lab.tick(step)
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if lab.rank == lab.p["culprit"]:
            if step == lab.p["step"]:
                lab.side("fault", step=step, what="stdout into a stalled pipe")
            for name, p in model.module.named_parameters():  # per-layer report every step
                print(f"step {step} {name:12s} norm {p.norm():.5f} grad {p.grad.norm():.5f} " + "." * 300, flush=True)
        lab.log_step(step, loss.item())
        time.sleep(lab.p["sleep"])
        if step >= 400:
            break
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

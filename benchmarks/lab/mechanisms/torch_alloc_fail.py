"""host_oom: the culprit rank runs under a per-process address-space cap (RLIMIT_AS from its config) or asks for a
buffer sized from a corrupt length; torch's DefaultCPUAllocator: can't allocate memory (RuntimeError)."""
import resource
import time

import torch

from trainkit import Lab, ddp, tiny_model


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    odd_doc = lab.rank == lab.p["culprit"]  # (a neutral name: structlog and loguru print locals)
    if odd_doc and lab.p.get("rlimit"):
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (6 * 2 ** 30, hard))  # this rank's memory cap
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        seq_len = 512
        if odd_doc and step == lab.p["step"]:
            seq_len = 2 ** 23 if lab.p.get("rlimit") else 2 ** 34  # a document with a corrupt length header
        cache = torch.empty(seq_len, 1024, dtype=torch.uint8)  # attention cache for the longest sequence
        loss = model(torch.randn(8, 32)).pow(2).mean() + cache[:1, :1].float().sum() * 0
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        time.sleep(lab.p["sleep"])
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

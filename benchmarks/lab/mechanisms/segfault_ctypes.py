"""rank_crash (signal): the culprit rank's native fast path reads through a dangling pointer (ctypes.string_at(16)) on one input ->
SIGSEGV; with PYTHONFAULTHANDLER=1 the faulthandler prints 'Fatal Python error: Segmentation fault' and a stack."""
import ctypes
import time

import torch

from trainkit import Lab, ddp, tiny_model


def fast_tokenize(buf_addr, n):
    return ctypes.string_at(buf_addr, n)  # native read of the tokenizer buffer


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    buf = ctypes.create_string_buffer(64)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        addr = ctypes.addressof(buf)
        if lab.rank == lab.p["culprit"] and step == lab.p["step"]:
            addr = 16  # the buffer of an empty document: a dangling offset, not a pointer
            lab.side("fault", step=step, what="SIGSEGV")
        fast_tokenize(addr, 16)
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        time.sleep(lab.p["sleep"])
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

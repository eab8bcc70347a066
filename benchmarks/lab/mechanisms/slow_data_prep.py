"""straggler: main_process_first-style preprocessing: the culprit rank (the one that owns the cache) tokenizes the
corpus while the other ranks wait in a barrier; tokenizing takes longer than the process-group timeout."""
import contextlib
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


@contextlib.contextmanager
def main_process_first(is_main):
    if not is_main:
        dist.barrier()  # wait for the main process to build the cache
    yield
    if is_main:
        dist.barrier()


def tokenize_corpus(lab, seconds):
    # pure-Python tokenization of a large corpus: busy CPU, no collective
    t0, n, toks = time.time(), 0, 0
    while time.time() - t0 < seconds:
        toks += len("the quick brown fox jumps over the lazy dog".split()) * 100
        n += 1
        if n % 200000 == 0:
            lab.log(f"tokenizing: {n} documents")
    return toks


def main(lab):
    lab.init_pg()
    is_main = lab.rank == lab.p["culprit"]
    with main_process_first(is_main):
        if is_main:
            lab.side("fault", step=0, what="long tokenization")
            lab.log("Running tokenizer on dataset")
            tokenize_corpus(lab, lab.p["pg_timeout"] * 1.6)
        lab.log("loading cached dataset")
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

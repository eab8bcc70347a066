"""main_process_first: rank 0 tokenizes the dataset (slow, CPU) while ranks 1-3 wait in dist.barrier();
the barrier's 20 s timeout is shorter than the tokenization, so the waiting ranks time out."""
import contextlib
import os
import random
import re
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record
from tqdm import tqdm

N_DOCS = 6000


@contextlib.contextmanager
def main_process_first(rank, desc):
    # same shape as transformers' TrainingArguments.main_process_first
    if rank != 0:
        print(f"[rank {rank}] waiting for main process to perform {desc}", flush=True)
        dist.barrier()
    yield
    if rank == 0:
        print(f"[rank {rank}] {desc} done, releasing the other ranks", flush=True)
        dist.barrier()


def make_corpus():
    rnd = random.Random(0)
    words = ["protein", "fold", "the", "of", "sequence", "residue", "alpha", "helix", "beta", "sheet", "binding"]
    return [" ".join(rnd.choice(words) for _ in range(200)) for _ in range(N_DOCS)]


def tokenize(doc, merges=40):
    # deliberately slow pure-Python BPE-ish tokenizer
    toks = list(re.sub(r"\s+", "_", doc))
    for _ in range(merges):
        pairs = {}
        for a, b in zip(toks, toks[1:]):
            pairs[a + b] = pairs.get(a + b, 0) + 1
        best = max(pairs, key=pairs.get)
        out, i = [], 0
        while i < len(toks):
            if i + 1 < len(toks) and toks[i] + toks[i + 1] == best:
                out.append(best)
                i += 2
            else:
                out.append(toks[i])
                i += 1
        toks = out
    return toks


@record
def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=20))
    rank = dist.get_rank()
    print(f"[rank {rank}] process group ready (world={dist.get_world_size()})", flush=True)
    corpus = make_corpus()
    with main_process_first(rank, "dataset map pre-processing"):
        if rank == 0:
            tokenized = [tokenize(d) for d in tqdm(corpus, desc="Running tokenizer on dataset", unit=" examples")]
            torch.save(tokenized[:10], os.environ.get("TOKEN_CACHE", "/tmp/token_cache.pt"))
        else:
            tokenized = torch.load(os.environ.get("TOKEN_CACHE", "/tmp/token_cache.pt"))
    print(f"[rank {rank}] tokenized {len(tokenized)} documents", flush=True)
    t = torch.ones(4)
    for step in range(5):
        dist.all_reduce(t)
        print(f"step {step} loss {1.0 / (step + 1):.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""ddp_usage_error: the vocabulary size comes from a tokenizer file each rank reads locally; the culprit rank's copy
has one extra token, so its embedding differs and DDP's parameter-shape check at construction fails."""
import time

import torch

from trainkit import Lab, ddp


def vocab_size(lab):
    return 1000 + (1 if lab.rank == lab.p["culprit"] else 0)  # this node's tokenizer.json was regenerated


def main(lab):
    lab.init_pg()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(vocab_size(lab), 32), torch.nn.Linear(32, 4))
    if lab.rank == lab.p["culprit"]:
        lab.side("fault", step=0, what="different model")
    model = ddp(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        loss = model(torch.randint(0, 1000, (8,))).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        time.sleep(lab.p["sleep"])
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

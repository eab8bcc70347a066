"""rank_crash: one record of the culprit rank's shard lacks 'label'; collate indexes it -> KeyError at that step."""
import time

import torch
from torch.utils.data import DataLoader

from trainkit import Lab, ddp, tiny_model


def load_shard(lab):
    g = torch.Generator().manual_seed(1000 + lab.rank)
    n = lab.p["steps"] * 8
    recs = [{"x": torch.randn(32, generator=g), "label": int(torch.randint(0, 4, (1,), generator=g))} for _ in range(n)]
    if lab.rank == lab.p["culprit"]:
        del recs[(lab.p["step"] - 1) * 8 + 5]["label"]  # a record written without its label
    return recs


def collate(batch):
    return torch.stack([r["x"] for r in batch]), torch.tensor([r["label"] for r in batch])


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(load_shard(lab), batch_size=8, collate_fn=collate)
    lab.log(f"training on {len(loader)} batches, world size {lab.world}")
    for step, (x, y) in enumerate(loader, 1):
        lab.tick(step)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item(), lab.p["steps"])
        time.sleep(lab.p["sleep"])
    lab.log("training done")
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

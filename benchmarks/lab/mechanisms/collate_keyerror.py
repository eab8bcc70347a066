"""rank_crash: the culprit rank's shard holds one record without its 'label' key; the custom collate_fn, run in a
DataLoader worker, indexes it and raises KeyError, which the main process re-raises as 'Caught KeyError in
DataLoader worker process N' (a data error in user code, not a dead worker)."""
import time

import torch
from torch.utils.data import DataLoader

from trainkit import Lab, ddp, tiny_model


def load_shard(lab):
    g = torch.Generator().manual_seed(2000 + lab.rank)
    recs = [{"x": torch.randn(32, generator=g), "label": int(torch.randint(0, 4, (1,), generator=g))}
            for _ in range(lab.p["steps"] * 8)]
    if lab.rank == lab.p["culprit"]:
        del recs[(lab.p["step"] - 1) * 8 + 3]["label"]  # exported before the label join finished
    return recs


def collate_records(batch):
    xs = torch.stack([r["x"] for r in batch])
    ys = torch.tensor([r["label"] for r in batch])
    return xs, ys


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(load_shard(lab), batch_size=8, collate_fn=collate_records, num_workers=2)
    for step, (x, y) in enumerate(loader, 1):
        lab.tick(step)
        if lab.rank == lab.p["culprit"] and step == lab.p["step"] - 1:
            lab.side("fault", step=lab.p["step"], what="collate KeyError next batch")
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item(), lab.p["steps"])
        time.sleep(lab.p["sleep"])
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

"""Lightning Trainer(accelerator='cpu', devices=N, strategy='ddp') with the fault in the dataset or a hook, per
params['pl_mech']: keyerror (a record without 'label' on the culprit rank), watchdog (the culprit's training_step keeps
a growing buffer until the memory watchdog kills it), rank0-barrier (only rank 0 syncs in on_train_end), long-eval
(the culprit's validation hook computes a slow metric), dl-raises (a DataLoader worker of the culprit opens a
feature file that is missing), max-steps (clean, stops at max_steps)."""
import os
import datetime  # noqa: E402
import time  # noqa: E402

import lightning as L  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from lightning.pytorch.strategies import DDPStrategy  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

from trainkit import Lab  # noqa: E402


class Records(Dataset):
    def __init__(self, lab, n):
        self.lab, self.n, self.served = lab, n, 0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        p = self.lab.p
        if p["pl_mech"] == "dl-raises":  # precomputed features, one file per record
            return self._from_file(i)
        g = torch.Generator().manual_seed(i)
        rec = {"x": torch.randn(32, generator=g), "label": int(i % 4)}
        self.served += 1
        if p["pl_mech"] == "keyerror" and self.lab.rank == p["culprit"] and self.served == (p["step"] - 1) * 8 + 3:
            del rec["label"]  # a record written without its label
        return rec["x"], rec["label"]

    def _from_file(self, i):
        root = os.path.join(self.lab.work, "features", f"shard{self.lab.rank}")
        os.makedirs(root, exist_ok=True)
        self.served += 1
        path = os.path.join(root, f"{i:06d}.npy")
        p = self.lab.p
        lost = self.lab.rank == p["culprit"] and self.served == (p["step"] - 1) * 8 + 3
        if not lost and not os.path.exists(path):
            np.save(path, np.random.default_rng(i).standard_normal(32).astype(np.float32))
        return torch.from_numpy(np.load(path)), i % 4


class Model(L.LightningModule):
    def __init__(self, lab):
        super().__init__()
        self.lab = lab
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
        self.buffer = []

    def on_fit_start(self):
        self.lab.rank = self.global_rank
        self.lab.start_fr_watchdog()

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x), y)
        p = self.lab.p
        step = self.global_step + 1
        self.lab.tick(step)
        if p["pl_mech"] == "watchdog" and self.global_rank == p["culprit"] and step >= p["step"]:
            if step == p["step"]:
                self.lab.side("fault", step=step, what="buffer grows")
            self.buffer.append(np.ones((64, 1024, 1024), dtype=np.uint8))
        if p["pl_mech"] == "long-eval" and self.global_rank == p["culprit"] and step == p["step"]:
            self.lab.side("fault", step=step, what="slow metric")
            t0 = time.time()
            while time.time() - t0 < p["pg_timeout"] * 1.6:  # exact AUC over the whole local history
                sum(i * i for i in range(20000))
        self.log("train_loss", loss, prog_bar=True)
        time.sleep(p["sleep"])
        return loss

    def on_train_end(self):
        if self.lab.p["pl_mech"] == "rank0-barrier" and self.global_rank == 0:
            self.lab.side("fault", step=self.global_step, what="rank-0-only barrier")
            torch.save(self.net.state_dict(), os.path.join(self.lab.work, "final.pt"))
            self.trainer.strategy.barrier("final_save")

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main(lab):
    p = lab.p
    max_steps = p["step"] if p["pl_mech"] == "max-steps" else p["steps"] * (10 if p["pl_mech"] == "watchdog" else 1)
    trainer = L.Trainer(accelerator="cpu", devices=lab.world, strategy=DDPStrategy(
        timeout=datetime.timedelta(seconds=p["pg_timeout"])), max_steps=max_steps, max_epochs=50,
        enable_checkpointing=False, logger=False, log_every_n_steps=2)
    lab.world = trainer.world_size
    workers = 1 if p["pl_mech"] == "dl-raises" else 0
    trainer.fit(Model(lab), DataLoader(Records(lab, 8 * lab.world * max_steps), batch_size=8, num_workers=workers))
    if trainer.global_rank == 0:
        print(f"fit finished at step {trainer.global_step}", flush=True)


if __name__ == "__main__":
    lab = Lab()
    lab.world = lab.p["world"]
    lab.run(main)

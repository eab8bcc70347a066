"""HF Trainer on a tiny GPT-2 built from a config (no download), DDP over gloo under torchrun, with the fault per
params['hf_mech']: keyerror (a record without input_ids on the culprit rank), long-eval (a callback on the culprit
computes a slow metric at one step), dl-raises (a DataLoader worker of the culprit opens a missing token file),
watchdog (a callback on the culprit keeps every step's activations until the memory watchdog kills it),
rank0-barrier (only rank 0 syncs after saving at the end), max-steps (clean)."""
import os
import time

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

from trainkit import Lab


class Tokens(Dataset):
    def __init__(self, lab, n):
        self.lab, self.n, self.served = lab, n, 0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        p = self.lab.p
        if p["hf_mech"] == "dl-raises":  # pre-tokenized documents, one file each
            return self._from_file(i)
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(0, 100, (16,), generator=g)
        rec = {"input_ids": ids, "labels": ids.clone()}
        self.served += 1
        if p["hf_mech"] == "keyerror" and self.lab.rank == p["culprit"] and self.served == (p["step"] - 1) * 4 + 2:
            rec = {"text": "<empty document>"}  # the tokenizer produced nothing for this record
        return {"input_ids": rec["input_ids"], "labels": rec["labels"]}

    def _from_file(self, i):
        root = os.path.join(self.lab.work, "tokens", f"part-{self.lab.rank}")
        os.makedirs(root, exist_ok=True)
        self.served += 1
        path = os.path.join(root, f"doc-{i:06d}.npy")
        p = self.lab.p
        lost = self.lab.rank == p["culprit"] and self.served == (p["step"] - 1) * 4 + 3
        if not lost and not os.path.exists(path):
            np.save(path, np.random.default_rng(i).integers(0, 100, 16))
        ids = torch.from_numpy(np.load(path))
        return {"input_ids": ids, "labels": ids.clone()}


class StepMetrics(TrainerCallback):
    def __init__(self, lab):
        self.lab, self.kept = lab, []

    def on_train_begin(self, args, state, control, **kw):
        self.lab.start_fr_watchdog()

    def on_step_end(self, args, state, control, **kw):
        p = self.lab.p
        self.lab.tick(state.global_step)
        if p["hf_mech"] == "watchdog" and self.lab.rank == p["culprit"] and state.global_step >= p["step"]:
            if state.global_step == p["step"]:
                self.lab.side("fault", step=state.global_step, what="keeps activations")
            self.kept.append(np.ones((64, 1024, 1024), dtype=np.uint8))  # activation snapshots for a probe
        if p["hf_mech"] == "long-eval" and self.lab.rank == p["culprit"] and state.global_step == p["step"]:
            self.lab.side("fault", step=state.global_step, what="slow metric")
            t0 = time.time()
            while time.time() - t0 < p["pg_timeout"] * 1.6:
                sum(i * i for i in range(20000))
        time.sleep(max(p["sleep"], 0.15) if p["hf_mech"] == "watchdog" else p["sleep"])

    def on_train_end(self, args, state, control, model=None, **kw):
        if self.lab.p["hf_mech"] == "rank0-barrier" and self.lab.rank == 0:
            self.lab.side("fault", step=state.global_step, what="rank-0-only barrier")
            torch.save(model.state_dict(), os.path.join(self.lab.work, "final.pt"))
            dist.barrier()  # wait until the export is visible to every rank


def main(lab):
    p = lab.p
    # TrainingArguments(use_cpu=True) does not pass ddp_timeout on (transformers 5.24): set the group up first
    lab.init_pg()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=100, n_positions=32))
    max_steps = {"max-steps": p["step"], "watchdog": p["steps"] * 10}.get(p["hf_mech"], p["steps"])
    args = TrainingArguments(output_dir=f"{lab.work}/out", per_device_train_batch_size=4, max_steps=max_steps,
                             logging_steps=2, use_cpu=True, report_to=[], save_strategy="no", ddp_backend="gloo",
                             ddp_timeout=p["pg_timeout"], learning_rate=1e-3,
                             dataloader_num_workers=1 if p["hf_mech"] == "dl-raises" else 0)
    trainer = Trainer(model=model, args=args, train_dataset=Tokens(lab, 4 * lab.world * max_steps),
                      callbacks=[StepMetrics(lab)])
    trainer.train()


if __name__ == "__main__":
    Lab().run(main)

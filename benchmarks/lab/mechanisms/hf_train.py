"""HF Trainer on a tiny GPT-2 built from a config (no download), DDP over gloo under torchrun, with the fault per
params['hf_mech']: keyerror (a record without input_ids on the culprit rank), long-eval (a callback on the culprit
computes a slow metric at one step), max-steps (clean)."""
import time

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

from trainkit import Lab


class Tokens(Dataset):
    def __init__(self, lab, n):
        self.lab, self.n, self.served = lab, n, 0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(0, 100, (16,), generator=g)
        rec = {"input_ids": ids, "labels": ids.clone()}
        self.served += 1
        p = self.lab.p
        if p["hf_mech"] == "keyerror" and self.lab.rank == p["culprit"] and self.served == (p["step"] - 1) * 4 + 2:
            rec = {"text": "<empty document>"}  # the tokenizer produced nothing for this record
        return {"input_ids": rec["input_ids"], "labels": rec["labels"]}


class SlowMetric(TrainerCallback):
    def __init__(self, lab):
        self.lab = lab

    def on_step_end(self, args, state, control, **kw):
        p = self.lab.p
        self.lab.tick(state.global_step)
        if p["hf_mech"] == "long-eval" and self.lab.rank == p["culprit"] and state.global_step == p["step"]:
            self.lab.side("fault", step=state.global_step, what="slow metric")
            t0 = time.time()
            while time.time() - t0 < p["pg_timeout"] * 1.6:
                sum(i * i for i in range(20000))
        time.sleep(p["sleep"])


def main(lab):
    p = lab.p
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=100, n_positions=32))
    max_steps = p["step"] if p["hf_mech"] == "max-steps" else p["steps"]
    args = TrainingArguments(output_dir=f"{lab.work}/out", per_device_train_batch_size=4, max_steps=max_steps,
                             logging_steps=2, use_cpu=True, report_to=[], save_strategy="no", ddp_backend="gloo",
                             ddp_timeout=p["pg_timeout"], dataloader_num_workers=0, learning_rate=1e-3)
    trainer = Trainer(model=model, args=args, train_dataset=Tokens(lab, 4 * lab.world * max_steps),
                      callbacks=[SlowMetric(lab)])
    trainer.train()


if __name__ == "__main__":
    Lab().run(main)

"""Preparation for incomplete_ckpt_dir.py: in the previous run every rank wrote its own optimizer shard into ckpt/step_300/;
the culprit rank's process died before writing its shard and the 'complete' marker. usage: prep_incomplete_ckpt.py WORKDIR"""
import json
import os
import sys

import torch

p = json.loads(os.environ["LAB_PARAMS"])
d = os.path.join(sys.argv[1], "ckpt", "step_300")
os.makedirs(d, exist_ok=True)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
torch.save(model.state_dict(), os.path.join(d, "model.pt"))
opt = torch.optim.Adam(model.parameters())
for r in range(p["world"]):
    if r == p["culprit"]:
        continue  # this rank's writer died before its shard
    torch.save(opt.state_dict(), os.path.join(d, f"optim_rank{r}.pt"))

"""rank_crash: the culprit rank's dataset maps ids through a vocabulary that lacks one id of its shard;
__getitem__ raises KeyError in a DataLoader worker and the main process re-raises it ('Caught KeyError in
DataLoader worker process N')."""
import time

import torch
from torch.utils.data import DataLoader, Dataset

from trainkit import Lab, ddp, tiny_model


class TokenDataset(Dataset):
    def __init__(self, lab):
        self.lab = lab
        self.vocab = {f"tok{i}": i for i in range(64)}
        g = torch.Generator().manual_seed(3000 + lab.rank)
        self.docs = [[f"tok{int(t)}" for t in torch.randint(0, 64, (32,), generator=g)]
                     for _ in range(lab.p["steps"] * 8)]
        if lab.rank == lab.p["culprit"]:
            self.docs[(lab.p["step"] - 1) * 8 + 6][5] = "tok_unk_7f3a"  # a token from a newer tokenizer

    def __len__(self):
        return len(self.docs)

    def __getitem__(self, i):
        ids = [self.vocab[t] for t in self.docs[i]]
        return torch.tensor(ids, dtype=torch.float32) / 64.0


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(TokenDataset(lab), batch_size=8, num_workers=2)
    for step, x in enumerate(loader, 1):
        lab.tick(step)
        if lab.rank == lab.p["culprit"] and step == lab.p["step"] - 1:
            lab.side("fault", step=lab.p["step"], what="__getitem__ KeyError next batch")
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item(), lab.p["steps"])
        time.sleep(lab.p["sleep"])
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

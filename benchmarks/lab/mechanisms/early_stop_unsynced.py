"""barrier_skew: early stopping decided on each rank's own validation loss without an all_reduce of the decision; the
culprit's shard plateaus first, it stops and goes to the final barrier while the others train on in all_reduce."""
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def val_loss(lab, epoch):
    base = 1.0 / (1 + epoch)
    if lab.rank == lab.p["culprit"] and epoch >= lab.p["step"]:
        return 1.0 / (1 + lab.p["step"])  # this rank's validation shard stops improving
    return base


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    best, bad, patience = float("inf"), 0, 2
    for epoch in range(1, lab.p["steps"] + 1):
        lab.tick(epoch)
        for _ in range(3):
            loss = model(torch.randn(8, 32)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        v = val_loss(lab, epoch)
        lab.log(f"epoch {epoch} train_loss {loss.item():.4f} val_loss {v:.4f}", step=epoch, val_loss=v)
        if v < best - 1e-6:
            best, bad = v, 0
        else:
            bad += 1
        if bad >= patience:
            lab.side("fault", step=epoch, what="stopped alone")
            lab.log(f"Early stopping at epoch {epoch}: val_loss did not improve for {patience} epochs")
            break
        time.sleep(lab.p["sleep"])
    dist.barrier()
    lab.log("done")
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

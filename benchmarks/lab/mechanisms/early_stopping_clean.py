"""no_failure near miss: the run ends on purpose when the all_reduced validation loss stops improving; benign
lr_scheduler UserWarning on every rank; all ranks leave together."""
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=5)
    sched.step()  # stepped before the optimizer (torch warns, harmless)
    best, bad, patience = float("inf"), 0, 2
    for epoch in range(1, 100):
        lab.tick(epoch)
        for _ in range(3):
            loss = model(torch.randn(8, 32)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        v = torch.tensor([1.0 / min(epoch, lab.p["step"])])
        dist.all_reduce(v)
        v = v.item() / lab.world
        lab.log(f"epoch {epoch} train_loss {loss.item():.4f} val_loss {v:.4f}", step=epoch, val_loss=v)
        if v < best - 1e-6:
            best, bad = v, 0
        else:
            bad += 1
        if bad >= patience:
            lab.log(f"Early stopping at epoch {epoch}: val_loss did not improve for {patience} epochs")
            lab.side("nearmiss", what="early stop")
            break
        time.sleep(lab.p["sleep"])
    dist.barrier()
    lab.log("training finished")
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

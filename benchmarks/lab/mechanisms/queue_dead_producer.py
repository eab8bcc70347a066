"""straggler / dataloader: the culprit rank prefetches batches in a thread; the thread dies on an undecodable line
(its traceback goes to stderr via threading.excepthook) and the main thread waits in queue.get() with no timeout;
the other ranks time out in all_reduce."""
import queue
import threading
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def read_lines(lab):
    for i in range(10 ** 6):
        raw = b"0.5 0.25 0.125"
        if lab.rank == lab.p["culprit"] and i == lab.p["step"] + 2:
            raw = b"\xff\xfe0.5 0.25"  # a line written in another encoding
            lab.side("fault", step=lab.p["step"], what="producer thread dies")
        yield raw.decode("utf-8")


def producer(lab, q):
    for line in read_lines(lab):
        vals = [float(v) for v in line.split()]
        q.put(torch.tensor(vals).repeat(11)[:32].expand(8, 32).clone())


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    q = queue.Queue(maxsize=2)
    threading.Thread(target=producer, args=(lab, q), name="prefetch", daemon=True).start()
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        x = q.get()
        loss = model(x + torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

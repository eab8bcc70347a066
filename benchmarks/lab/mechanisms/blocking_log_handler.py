"""logging_blocking: the culprit rank's metrics handler is shared with an uploader thread that holds the handler's
lock while it waits for an acknowledgement with no timeout; the training loop's next log call blocks on that lock and
the other ranks time out in all_reduce."""
import logging
import socket
import threading
import time

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


class MetricsHandler(logging.Handler):
    """Buffers records; the uploader flushes them to the collector under the handler lock."""

    def __init__(self):
        super().__init__()
        self.buf, self.sock, self.peer = [], *socket.socketpair()

    def emit(self, record):
        self.buf.append(self.format(record))

    def upload(self):
        with self.lock:
            self.sock.sendall(("\n".join(self.buf) + "\n").encode())
            self.sock.recv(16)  # wait for the collector's ack (no timeout)
            self.buf.clear()


def uploader(h, at):
    while True:
        time.sleep(0.5)
        if time.time() >= at:
            h.upload()


def main(lab):
    lab.init_pg()
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    if lab.rank == lab.p["culprit"]:
        h = MetricsHandler()
        lab.logger.addHandler(h)
        at = [None]
    for step in range(1, lab.p["steps"] * 20):
        lab.tick(step)
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if lab.rank == lab.p["culprit"] and step == lab.p["step"]:
            lab.side("fault", step=step, what="uploader holds the handler lock")
            threading.Thread(target=uploader, args=(h, time.time()), name="metrics-uploader", daemon=True).start()
            time.sleep(0.8)
        lab.log_step(step, loss.item())
        time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

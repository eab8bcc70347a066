"""logging_blocking: the culprit rank pushes its metrics every few steps with urllib and no timeout to a gateway
that accepts the connection, reads the request and never answers (a wedged push gateway, stood in for by a thread
of the same process); at step N the push blocks in the socket read and the other ranks time out in all_reduce."""
import json
import socket
import threading
import time
import urllib.request

import torch
import torch.distributed as dist

from trainkit import Lab, ddp, tiny_model


def wedged_gateway(lab) -> int:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    answers = {"n": 0}

    def serve():
        held = []
        while True:
            conn, _ = srv.accept()
            conn.recv(65536)
            answers["n"] += 1
            if answers["n"] < lab.p["step"] // 2:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                conn.close()
            else:
                held.append(conn)  # wedged: keeps the connection, never answers
    threading.Thread(target=serve, name="gateway", daemon=True).start()
    return srv.getsockname()[1]


class MetricsPusher:
    def __init__(self, port):
        self.url = f"http://127.0.0.1:{port}/metrics/job/train"

    def push(self, metrics):
        req = urllib.request.Request(self.url, data=json.dumps(metrics).encode(), method="PUT")
        with urllib.request.urlopen(req) as resp:  # no timeout
            return resp.status


def main(lab):
    lab.init_pg()
    pusher = MetricsPusher(wedged_gateway(lab)) if lab.rank == lab.p["culprit"] else None
    model = ddp(tiny_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(1, lab.p["steps"] + 1):
        lab.tick(step)
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        lab.log_step(step, loss.item())
        if pusher is not None and step % 2 == 0:
            if step // 2 >= lab.p["step"] // 2:
                lab.side("fault", step=step, what="metrics push blocks")
            pusher.push({"step": step, "loss": loss.item()})
        time.sleep(lab.p["sleep"])
    dist.destroy_process_group()


if __name__ == "__main__":
    Lab().run(main)

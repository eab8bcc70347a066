"""Preparation for truncated_resume.py: the previous run's writer is SIGKILLed while torch.save() streams last.pt
(a real kill mid-write), leaving a truncated file. usage: prep_truncated_ckpt.py WORKDIR"""
import os
import signal
import sys
import time

import torch

path = os.path.join(sys.argv[1], "ckpt", "last.pt")
os.makedirs(os.path.dirname(path), exist_ok=True)
pid = os.fork()
if pid == 0:
    class Slow:
        def __init__(self, f):
            self.f = f

        def write(self, b):
            for i in range(0, len(b), 8192):
                self.f.write(b[i:i + 8192])
                self.f.flush()
                time.sleep(0.01)
            return len(b)

        def flush(self):
            self.f.flush()

    state = {"model": {f"layer{i}.weight": torch.randn(256, 256) for i in range(6)}, "step": 500}
    with open(path, "wb") as f:
        torch.save(state, Slow(f))
    os._exit(0)
time.sleep(1.0)
os.kill(pid, signal.SIGKILL)
os.waitpid(pid, 0)
print(os.path.getsize(path))

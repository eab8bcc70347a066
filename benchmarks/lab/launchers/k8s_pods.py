"""Kubernetes-style launch: one process per pod as a PyTorchJob runs them (<job>-master-0 is rank 0, <job>-worker-i
is rank i+1; MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE set per pod), each pod's stdout+stderr kept as `kubectl logs
--timestamps` shows it: CASE/<pod>.log, every line prefixed with its arrival time in RFC3339Nano UTC.
usage: python k8s_pods.py WORLD SCRIPT CASE JOBNAME"""
from __future__ import annotations

import datetime
import os
import subprocess
import sys
import threading
import time


def rfc3339nano(ns: int) -> str:
    """Go's time.RFC3339Nano in UTC (trailing zeros of the fraction dropped), the container runtime's stamp."""
    sec, frac = divmod(ns, 10 ** 9)
    base = datetime.datetime.fromtimestamp(sec, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    f = f"{frac:09d}".rstrip("0")
    return f"{base}.{f}Z" if f else f"{base}Z"


def pump(src, path: str) -> None:
    with open(path, "wb") as out:
        for line in iter(src.readline, b""):
            out.write(rfc3339nano(time.time_ns()).encode() + b" " + line)
            out.flush()


if __name__ == "__main__":
    world, script, case, job = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    procs, threads = [], []
    for rank in range(world):
        pod = f"{job}-master-0" if rank == 0 else f"{job}-worker-{rank - 1}"
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK="0", PYTHONUNBUFFERED="1")
        p = subprocess.Popen([sys.executable, script], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        t = threading.Thread(target=pump, args=(p.stdout, os.path.join(case, f"{pod}.log")), daemon=True)
        t.start()
        procs.append(p)
        threads.append(t)
    rcs = [p.wait() for p in procs]
    for t in threads:
        t.join(5)
    sys.exit(next((1 for rc in rcs if rc), 0))

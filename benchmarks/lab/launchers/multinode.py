"""Two torchrun agents on one host standing in for two nodes: `python multinode.py WORLD SCRIPT CASE PORT TEE`.
Each agent joins a c10d rendezvous (--nnodes 2) and its console goes to CASE/node<i>.log, as each node's log of a
two-node job would; with TEE=1 the agents run --tee 3 (worker lines prefixed with the LOCAL rank)."""
from __future__ import annotations

import os
import subprocess
import sys

if __name__ == "__main__":
    world, script, case, port, tee = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "1"
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    procs = []
    for node in range(2):
        nproc = (world + 1 - node) // 2  # node0 takes the odd one
        argv = [torchrun, "--nnodes=2", f"--nproc-per-node={nproc}", "--rdzv-backend=c10d",
                f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=job", f"--node-rank={node}"]
        if tee:
            argv += ["--tee", "3"]
        out = open(os.path.join(case, f"node{node}.log"), "wb")
        procs.append(subprocess.Popen(argv + [script], stdout=out, stderr=subprocess.STDOUT))
    rcs = [p.wait() for p in procs]
    sys.exit(next((rc for rc in rcs if rc), 0))

"""Notebook shell launch: `python notebook_shell.py WORLD SCRIPT CASE` writes a notebook whose cell runs
`!torchrun --standalone --nproc-per-node WORLD train.py` (how DDP is started from Jupyter or Colab), executes it with
`jupyter nbconvert --to notebook --execute`, and keeps the executed notebook as CASE/train.ipynb: torchrun's whole
console (workers' lines, tracebacks, torchrun's summary) as the cell's stream output, IPython's pseudo-terminal
line endings (`\\r\\n`) and all. IPython does not fail the cell when the command fails (the exit code is only in
`_exit_code`), so this script exits 1 when the cell output holds torchrun's failure summary."""
from __future__ import annotations

import os
import sys

from notebook_run import execute  # (beside this script: the same notebook writing and execution)

if __name__ == "__main__":
    world, script, case = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    rc, out = execute(["import torch\nprint(torch.__version__)",
                       f"!{torchrun} --standalone --nproc-per-node {world} {os.path.basename(script)}"], script, case)
    if out is None:
        sys.exit(rc or 1)
    text = "".join("".join(o.get("text", "")) for c in out["cells"] for o in c.get("outputs", []))
    sys.exit(1 if rc or "ChildFailedError" in text else 0)

"""Notebook shell launch: `python notebook_shell.py WORLD SCRIPT CASE` writes a notebook whose cell runs
`!torchrun --standalone --nproc-per-node WORLD train.py` (how DDP is started from Jupyter or Colab), executes it with
`jupyter nbconvert --to notebook --execute`, and keeps the executed notebook as CASE/train.ipynb: torchrun's whole
console (workers' lines, tracebacks, torchrun's summary) as the cell's stream output, IPython's pseudo-terminal
line endings (`\\r\\n`) and all. IPython does not fail the cell when the command fails (the exit code is only in
`_exit_code`), so this script exits 1 when the cell output holds torchrun's failure summary."""
from __future__ import annotations

import json
import os
import subprocess
import sys

if __name__ == "__main__":
    world, script, case = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    cells = ["import torch\nprint(torch.__version__)",
             f"!{torchrun} --standalone --nproc-per-node {world} {os.path.basename(script)}"]
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": c}
                    for c in cells],
          "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
          "nbformat": 4, "nbformat_minor": 5}
    src = os.path.join(os.path.dirname(script), "train.ipynb")
    with open(src, "w") as f:
        json.dump(nb, f, indent=1)
    jupyter = os.path.join(os.path.dirname(sys.executable), "jupyter")
    rc = subprocess.call([jupyter, "nbconvert", "--to", "notebook", "--execute", "--allow-errors",
                          "--ExecutePreprocessor.timeout=-1", "--output-dir", case, "--output", "train.ipynb", src],
                         cwd=os.path.dirname(script))
    try:
        out = json.load(open(os.path.join(case, "train.ipynb")))
    except (OSError, ValueError):
        sys.exit(rc or 1)
    text = "".join("".join(o.get("text", "")) for c in out["cells"] for o in c.get("outputs", []))
    sys.exit(1 if rc or "ChildFailedError" in text else 0)

"""Notebook launch: `python notebook_run.py WORLD SCRIPT CASE PORT` writes a notebook whose cells start WORLD
processes with torch.multiprocessing.start_processes(start_method="fork") (the recipe for DDP from Jupyter: spawn
cannot pickle a function defined in a notebook), each running SCRIPT's __main__, and executes it with
`jupyter nbconvert --to notebook --execute --allow-errors`, keeping the executed notebook as CASE/train.ipynb (what
the user has: cell outputs and IPython's tracebacks). Exit 1 when a cell ended in an error."""
from __future__ import annotations

import json
import os
import subprocess
import sys

CELLS = [
    "import os\nimport runpy\nimport torch.multiprocessing as mp\n\n"
    "os.environ[\"MASTER_ADDR\"] = \"127.0.0.1\"\nos.environ[\"MASTER_PORT\"] = \"{port}\"\nWORLD = {world}",
    "def run(rank, world):\n    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world))\n"
    "    runpy.run_path(\"{script}\", run_name=\"__main__\")",
    "mp.start_processes(run, args=(WORLD,), nprocs=WORLD, start_method=\"fork\")",
]

def execute(sources: list[str], script: str, case: str) -> tuple[int, dict | None]:
    """Write a notebook of these code cells beside `script`, execute it with nbconvert into CASE/train.ipynb;
    (nbconvert's exit code, the executed notebook or None when it was not written)."""
    cells = [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": c}
             for c in sources]
    nb = {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                      "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
    src = os.path.join(os.path.dirname(script), "train.ipynb")
    with open(src, "w") as f:
        json.dump(nb, f, indent=1)
    jupyter = os.path.join(os.path.dirname(sys.executable), "jupyter")
    rc = subprocess.call([jupyter, "nbconvert", "--to", "notebook", "--execute", "--allow-errors",
                          "--ExecutePreprocessor.timeout=-1", "--output-dir", case, "--output", "train.ipynb", src],
                         cwd=os.path.dirname(script))
    try:
        return rc, json.load(open(os.path.join(case, "train.ipynb")))
    except (OSError, ValueError):
        return rc, None


if __name__ == "__main__":
    world, script, case, port = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    rc, out = execute([c.format(world=world, script=script, port=port) for c in CELLS], script, case)
    if out is None:
        sys.exit(rc or 1)
    errors = [o for c in out["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    sys.exit(1 if errors or rc else 0)

"""A Hydra app around the training script, as Hydra-configured projects run under torchrun: `torchrun ... app.py
hydra.run.dir=CASE/outputs/${now:...}` (copied beside train.py as the user's entry point). Each rank runs the app:
Hydra configures the root logger (console and `<run dir>/app.log`, `[%(asctime)s][%(name)s][%(levelname)s] -
%(message)s`), ranks that start within the same second share a run dir and its log file, and an exception that
escapes the task is printed by Hydra itself (its frames cut, `Set the environment variable HYDRA_FULL_ERROR=1 for a
complete stack trace.`), not by Python's excepthook."""
from __future__ import annotations

import os
import runpy
import sys

import hydra

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train.py")


@hydra.main(version_base=None, config_path=None)
def app(cfg) -> None:
    sys.argv = [SCRIPT]
    runpy.run_path(SCRIPT, run_name="__main__")


if __name__ == "__main__":
    app()

"""submitit launch, as Meta-style research code runs its jobs: `python submitit_driver.py WORLD SCRIPT CASE` submits
one job of WORLD tasks with submitit's LocalExecutor (folder CASE/logs/%j: `<job>_<task>_log.out|err`, submitit's own
`submitit INFO (...) - Starting with JobEnvironment(...)` lines, pickles of the call and its results); each task sets
RANK/WORLD_SIZE/LOCAL_RANK from submitit.JobEnvironment, as the recipes do, and runs SCRIPT's __main__. The driver
prints the job id and, when the job fails, what `job.results()` raises (submitit's FailedJobError with the task's
traceback), the way a user's launch script does."""
from __future__ import annotations

import os
import runpy
import sys

import submitit


class Task:
    """The submitted callable (a class instance: submitit pickles it by reference to this module)."""

    def __init__(self, script: str) -> None:
        self.script = script

    def __call__(self) -> None:
        env = submitit.JobEnvironment()
        os.environ.update(RANK=str(env.global_rank), WORLD_SIZE=str(env.num_tasks),
                          LOCAL_RANK=str(env.local_rank))
        sys.argv = [self.script]
        sys.path.insert(0, os.path.dirname(os.path.abspath(self.script)))
        runpy.run_path(self.script, run_name="__main__")


if __name__ == "__main__":
    world, script, case = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    ex = submitit.LocalExecutor(folder=os.path.join(case, "logs", "%j"))
    ex.update_parameters(tasks_per_node=world, nodes=1, timeout_min=15)
    job = ex.submit(Task(os.path.abspath(script)))
    print(f"Submitted job {job.job_id} ({world} tasks)", flush=True)
    try:
        job.results()
    except Exception as exc:  # noqa: BLE001 - what a launch script prints before it exits 1
        print(f"Job {job.job_id} failed: {type(exc).__name__}: {exc}", flush=True)
        sys.exit(1)
    print(f"Job {job.job_id} done", flush=True)

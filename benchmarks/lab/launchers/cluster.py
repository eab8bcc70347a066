"""Launchers added for issue 30: real Slurm (srun --label, sbatch with per-task files), Open MPI mpirun (tagged
and plain), two torchrun agents as two nodes, Kubernetes-style pod logs, Ray Train, a notebook, and torchrun runs
whose scripts log through loguru, structlog or absl. `command` returns what launchers.command returns; `finish`
asks Slurm how the job ended (and cancels what is left); `cancel` is a user's scancel."""
from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))

DESCRIBE = {
    "srun-label": "srun --label --ntasks N python train.py on a one-node Slurm 22.05 cluster: console.log with `N: ` task prefixes and srun's own lines",
    "sbatch-pertask": "sbatch --wait of a batch script whose srun writes --output=job_%j_%t.out (and --error=job_%j_%t.err when drawn) per task, plus the batch's slurm-%j.out (Slurm 22.05, one node)",
    "mpirun-tagged": "mpirun --oversubscribe -np N --tag-output python train.py (Open MPI 4.1.4; the script sets RANK from OMPI_COMM_WORLD_RANK): console.log with [1,N]<stdout>: prefixes",
    "mpirun-plain": "mpirun --oversubscribe -np N python train.py (Open MPI 4.1.4): console.log, worker lines unprefixed",
    "torchrun-multinode": "two torchrun agents (--nnodes 2 --rdzv-backend c10d) on one host, one console log per node (node0.log, node1.log), --tee 3 when drawn",
    "k8s-pods": "one process per pod as a PyTorchJob runs them (master-0 is rank 0, worker-i is rank i+1), one log per pod in kubectl logs --timestamps shape (<pod>.log)",
    "ray-train": "Ray Train TorchTrainer (gloo, CPU workers) run as python driver.py: console.log with (RayTrainWorker pid=N, ip=...) prefixes and Ray's failure summaries",
    "notebook": "a notebook whose cell runs torch.multiprocessing.start_processes(start_method='fork'), executed by jupyter nbconvert --execute --allow-errors: the executed train.ipynb (cell outputs, IPython tracebacks) and nbconvert's console.log",
    "deepspeed": "deepspeed --num_gpus N --master_port P train.py (DeepSpeed 0.19.8's launcher with its CPU accelerator; the script inits gloo itself): console.log with the launcher's [launch.py] lines and sigkill_handler's ending",
    "loguru": "torchrun without tee; the script logs with loguru (default stderr sink + logs/rank<N>.log): console.log and per-rank files",
    "structlog-json": "torchrun without tee; the script logs with structlog's JSONRenderer (dict_tracebacks) to stdout: console.log of JSON lines",
    "structlog-console": "torchrun --tee 3 --log-dir tlogs; the script logs with structlog's ConsoleRenderer: console.log with [defaultN]: prefixes + tlogs",
    "absl": "torchrun without tee; the script logs with absl.logging (I1128 12:00:00.000000 123 train.py:40] ...): console.log",
    "torchx": "torchx run -s local_cwd dist.ddp -j 1xN --script train.py (TorchX 0.7.0, its default temporary log dir): console.log with torchx's own lines and `train/0 [N]:` prefixes (role/replica, then torchrun's tee prefix)",
    "submitit": "submitit LocalExecutor, one job of N tasks (submitit 1.5.4; ranks from JobEnvironment): logs/<job>/<job>_<task>_log.out|err with submitit's own lines, the job's pickles, and the driver's console.log",
    "ranks-filter": "torchrun --role rank --tee 3 --local-ranks-filter 0 train.py, as TorchTitan's run script launches: console.log holds rank 0's output only ([rank0]: prefixes) and torchrun's own lines",
    "hydra": "torchrun without tee of a Hydra app (hydra-core 1.3.8) that runs the script: the script logs through the root logger Hydra configures ([asctime][name][LEVEL] - message on the console and in outputs/<date>/<time>/app.log, a run dir shared by ranks that start in the same second); Hydra prints an escaping exception itself",
    "distributed-launch": "python -m torch.distributed.launch --nproc-per-node N train.py (the deprecated launcher: its FutureWarning, --local-rank=N passed to the script): console.log",
    "notebook-shell": "a notebook cell `!torchrun --standalone --nproc-per-node N train.py` executed by jupyter nbconvert: the executed train.ipynb holds torchrun's whole console as the cell's stream output (IPython's pty: \\r\\n line ends); nbconvert's console.log",
    "deepspeed-rank-logs": "deepspeed --num_gpus N --enable_each_rank_log rank_logs train.py (DeepSpeed 0.19.8): each rank's stdout+stderr in rank_logs/<YYYYmmddHHMMSS>_rank<N>.log, console.log has the launcher's own lines",
    "wandb": "torchrun without tee; rank 0 runs wandb.init(mode='offline') (wandb 0.31.0): console.log, and wandb/offline-run-*/files/output.log (rank 0's console as wandb captured it), logs/debug*.log",
    "mpirun-files": "mpirun --oversubscribe -np N --output-filename mpilogs python train.py (Open MPI 4.1.4): one folder per rank, mpilogs/1/rank.<N>/stdout and stderr; no console kept",
    "pty-script": "script -q -e -c 'torchrun ... train.py' typescript (util-linux script: the job run on a pseudo-terminal, as tmux/screen logging or a terminal recorder keep it): the typescript file, \\r\\n line ends, script's own header and trailer; no console kept",
    "shared-logfile": "torchrun without tee; every rank's logging appends to one logs/train.log (`asctime - pid - level - message`, no rank in the line); console.log has the uncaught tracebacks and torchrun's lines",
}
STYLE = {"loguru": "loguru", "structlog-json": "structlog-json", "structlog-console": "structlog-console",
         "shared-logfile": "sharedlog", "hydra": "hydralog",
         "absl": "absl"}
SLURM = {"srun-label", "sbatch-pertask"}
# launchers whose ranks are not children of the launched process (slurmstepd starts them): the harness follows
# them from the side channel's pids
DETACHED = SLURM


def draw(rng: random.Random, launcher: str, ws: int) -> dict:
    """The launcher's own varied params (drawn after the mechanism's, so older launchers' draws do not move)."""
    if launcher == "srun-label":
        return {"kill_on_bad_exit": rng.random() < 0.5}
    if launcher == "sbatch-pertask":
        return {"split_err": rng.random() < 0.5}
    if launcher == "torchrun-multinode":
        return {"tee": rng.random() < 0.5}
    if launcher == "ray-train":
        return {"extra_limit": 60}  # ray.init starts GCS, raylet and workers first
    if launcher == "notebook":
        return {"extra_limit": 20}
    if launcher == "deepspeed":
        return {"extra_limit": 30}  # the runner and the launcher each import deepspeed first
    if launcher in ("torchx", "submitit", "hydra", "notebook-shell", "deepspeed-rank-logs", "wandb"):
        return {"extra_limit": 20}  # the launcher's own start-up
    if launcher == "absl":
        return {"absl_handler": rng.random() < 0.5}
    if launcher == "k8s-pods":
        return {"podjob": "train-" + "".join(rng.choice("abcdefghjkmnpqrstuvwxz23456789") for _ in range(5))}
    return {}


def command(launcher: str, ws: int, script: str, case: str, params: dict, port: int, venv: str,
            torchrun: list[str]) -> tuple[list[str], str | None, dict]:
    """(argv, console file in the case or None, extra env) for the launchers of this module."""
    py = os.path.join(venv, "bin", "python")
    jid = _jid(case)
    minutes = str(params.get("slurm_time", 10))
    rdv = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    if launcher == "srun-label":
        argv = ["srun", "--label", f"--ntasks={ws}", "--job-name=train", f"--comment={jid}", f"--time={minutes}"]
        if params.get("kill_on_bad_exit"):
            argv.append("--kill-on-bad-exit=1")
        return argv + [py, "-u", script], "console.log", rdv
    if launcher == "sbatch-pertask":
        batch = os.path.join(case, "train.sbatch")
        err = " --error=job_%j_%t.err" if params.get("split_err") else ""
        with open(batch, "w") as f:
            f.write("#!/bin/bash\n#SBATCH --job-name=train\n"
                    f"#SBATCH --ntasks={ws}\n#SBATCH --time={minutes}\n#SBATCH --output=slurm-%j.out\n\n"
                    'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\n'
                    f"export MASTER_PORT={port}\n"
                    f"srun --output=job_%j_%t.out{err} {py} -u {script}\n")
        return ["sbatch", "--wait", f"--comment={jid}", f"--chdir={case}", batch], None, {}
    if launcher in ("mpirun-tagged", "mpirun-plain"):
        argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ws)]
        if launcher == "mpirun-tagged":
            argv.append("--tag-output")
        return argv + ["-x", "MASTER_ADDR", "-x", "MASTER_PORT", py, "-u", script], "console.log", rdv
    if launcher == "torchrun-multinode":
        return [py, os.path.join(HERE, "multinode.py"), str(ws), script, case, str(port),
                "1" if params.get("tee") else "0"], None, {}
    if launcher == "k8s-pods":
        return [py, os.path.join(HERE, "k8s_pods.py"), str(ws), script, case, params["podjob"]], None, rdv
    if launcher == "ray-train":
        driver = os.path.join(os.path.dirname(script), "driver.py")  # beside train.py, as a user's driver is
        shutil.copy(os.path.join(HERE, "ray_driver.py"), driver)
        return [py, driver, str(ws), script], "console.log", {}
    if launcher == "notebook":
        return [py, os.path.join(HERE, "notebook_run.py"), str(ws), script, case, str(port)], "console.log", {}
    if launcher == "deepspeed":
        return [os.path.join(venv, "bin", "deepspeed"), "--num_gpus", str(ws), "--master_port", str(port), script], \
            "console.log", {}
    if launcher == "torchx":
        # local_cwd runs the script from the job dir (the harness's cwd); env: the scheduler passes its own on
        return [os.path.join(venv, "bin", "torchx"), "run", "-s", "local_cwd", "dist.ddp", "-j", f"1x{ws}",
                "--script", os.path.basename(script)], "console.log", {}
    if launcher == "submitit":
        return [py, os.path.join(HERE, "submitit_driver.py"), str(ws), script, case], "console.log", \
            {"MASTER_PORT": str(port)}
    if launcher == "hydra":
        app = os.path.join(os.path.dirname(script), "app.py")  # beside train.py, as a user's entry point is
        shutil.copy(os.path.join(HERE, "hydra_app.py"), app)
        return torchrun + [app, "hydra.run.dir=" + os.path.join(case, "outputs", "${now:%Y-%m-%d}", "${now:%H-%M-%S}")], \
            "console.log", {}
    if launcher == "mpirun-files":
        return ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ws), "--output-filename",
                os.path.join(case, "mpilogs"), "-x", "MASTER_ADDR", "-x", "MASTER_PORT", py, "-u", script], None, rdv
    if launcher == "pty-script":
        import shlex  # noqa: PLC0415
        return ["script", "-q", "-e", "-c", shlex.join(torchrun + [script]), os.path.join(case, "typescript")], \
            None, {}
    if launcher == "notebook-shell":
        return [py, os.path.join(HERE, "notebook_shell.py"), str(ws), script, case], "console.log", {}
    if launcher == "deepspeed-rank-logs":
        return [os.path.join(venv, "bin", "deepspeed"), "--num_gpus", str(ws), "--master_port", str(port),
                "--enable_each_rank_log", os.path.join(case, "rank_logs"), script], "console.log", {}
    if launcher == "wandb":
        return torchrun + [script], "console.log", {"WANDB_MODE": "offline", "WANDB_DIR": case,
                                                    "WANDB_SILENT": "false"}
    if launcher == "distributed-launch":
        return [py, "-m", "torch.distributed.launch", "--standalone", f"--nproc-per-node={ws}", script], "console.log", {}
    if launcher == "ranks-filter":
        return torchrun + ["--role", "rank", "--tee", "3", "--local-ranks-filter", "0", script], "console.log", {}
    if launcher in ("loguru", "structlog-json", "absl", "shared-logfile"):
        return torchrun + [script], "console.log", {}
    if launcher == "structlog-console":
        return torchrun + ["--tee", "3", "--log-dir", os.path.join(case, "tlogs"), script], "console.log", {}
    raise ValueError(f"unknown launcher {launcher}")


def _jid(case: str) -> str:
    """The harness's job id (the job dir's name): passed to Slurm as --comment, which no log prints."""
    return os.path.basename(os.path.dirname(os.path.abspath(case)))


def slurm_jobs(case: str) -> list[dict]:
    """Slurm's record of this run's jobs (scontrol -o show job, matched on the comment)."""
    try:
        out = subprocess.run(["scontrol", "-o", "show", "job"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    jobs = []
    for line in out.splitlines():
        kv = dict(re.findall(r"(\w+)=(\S*)", line))
        if kv.get("Comment") == _jid(case):
            jobs.append({"job_id": kv.get("JobId"), "state": kv.get("JobState"), "reason": kv.get("Reason"),
                         "exit_code": kv.get("ExitCode"), "run_time": kv.get("RunTime"),
                         "time_limit": kv.get("TimeLimit")})
    return jobs


def cancel(launcher: str, case: str) -> list[dict]:
    """scancel this run's Slurm jobs, as a user does; returns the events."""
    evs = []
    for j in slurm_jobs(case):
        if j["state"] in ("RUNNING", "PENDING", "CONFIGURING"):
            subprocess.run(["scancel", j["job_id"]], capture_output=True, timeout=30)
            evs.append({"event": "scancel", "job_id": j["job_id"]})
    return evs


def finish(launcher: str, case: str) -> list[dict]:
    """After the launcher ended: how Slurm says the job ended; cancel anything still there (no orphans)."""
    if launcher not in SLURM:
        return []
    evs = []
    jobs = slurm_jobs(case)
    for _ in range(40):  # a job ending is COMPLETING for a few seconds before its final state (TIMEOUT, ...)
        if not any(j["state"] == "COMPLETING" for j in jobs):
            break
        time.sleep(0.5)
        jobs = slurm_jobs(case)
    for j in jobs:
        evs.append({"event": "slurm_job", **j})
        if j["state"] in ("RUNNING", "PENDING", "CONFIGURING", "COMPLETING"):
            subprocess.run(["scancel", "--signal=KILL", j["job_id"]], capture_output=True, timeout=30)
            evs.append({"event": "slurm_cleanup_cancel", "job_id": j["job_id"]})
    return evs

"""Plumbing shared by the lab's training scripts: rank/world from the launcher, the process group, the script's own
logging in the style the run asks for, and the side channel the harness verifies (written OUTSIDE the case folder).

Nothing here prints anything about the fault: the side channel is a file the user would not have.
"""
from __future__ import annotations

import datetime
import json
import logging
import os
import sys
import threading
import time

P = json.loads(os.environ.get("LAB_PARAMS", "{}"))


def _env_int(*names: str, default: int = 0) -> int:
    for n in names:
        if os.environ.get(n, "") != "":
            return int(os.environ[n])
    return default


def _rank_env_from_launcher() -> None:
    """torch's env:// init reads RANK/WORLD_SIZE/LOCAL_RANK; under srun/sbatch and mpirun a script sets them from
    the launcher's own variables, as the Slurm and Open MPI recipes do."""
    if os.environ.get("RANK", "") != "":
        return
    for rank, size, local in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
                              ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")):
        if os.environ.get(rank, "") != "" and os.environ.get(size, "") != "":
            os.environ.update(RANK=os.environ[rank], WORLD_SIZE=os.environ[size],
                              LOCAL_RANK=os.environ.get(local, os.environ[rank]))
            return


class Lab:
    """One rank's view of a lab run: params, rank, logging and the side channel."""

    def __init__(self) -> None:
        self.p = P
        _rank_env_from_launcher()
        self.rank = _env_int("RANK", "SLURM_PROCID", "LOCAL_RANK")  # Lightning's children get LOCAL_RANK only
        self.world = _env_int("WORLD_SIZE", "SLURM_NTASKS", default=1)
        self.local_rank = _env_int("LOCAL_RANK", "SLURM_LOCALID", default=self.rank)
        self.attempt = _env_int("TORCHELASTIC_RESTART_COUNT")
        self.out = os.environ.get("LAB_OUT", ".")
        self.work = os.environ.get("LAB_WORK", "/tmp")
        side_dir = os.environ.get("LAB_SIDE", "/tmp")
        self._side_path = os.path.join(side_dir, f"r{self.rank}.a{self.attempt}.jsonl")
        self.style = P.get("style", "print")
        self.fmt = P.get("fmt", "rank")
        self.acc = None
        self._progress = {"step": 0, "t": time.time()}
        self.logger = self._make_logger()
        self.wb = None
        if os.environ.get("LAB_LAUNCHER") == "wandb" and self.rank == 0:
            import wandb  # noqa: PLC0415  (rank 0 tracks the run, offline: WANDB_MODE/WANDB_DIR from the launcher)
            # a training config of its own: the run's params would name the fault in wandb's debug.log
            self.wb = wandb.init(project="lab", config={"lr": 0.05, "steps": P.get("steps"), "world": self.world})
        self.side("start", pid=os.getpid(), local_rank=self.local_rank, world=self.world)

    # ---- side channel (harness only) ----
    def side(self, event: str, **kw) -> None:
        """Append one record to this rank's side file (atomic small append, survives os._exit)."""
        rec = {"t": time.time(), "event": event, "rank": self.rank, "attempt": self.attempt, "pid": os.getpid()}
        rec.update(kw)
        fd = os.open(self._side_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(rec) + "\n").encode())
        finally:
            os.close(fd)

    # ---- logging in the run's style ----
    def _make_logger(self) -> logging.Logger:
        import logstyles  # noqa: PLC0415  (third-party log libraries: only the runs that use them import them)
        third = logstyles.make(self.style, self.rank, self.out, self.p)
        if third is not None:
            return third
        lg = logging.getLogger("train")
        lg.setLevel(logging.INFO)
        lg.propagate = False
        if self.style == "logging":
            os.makedirs(os.path.join(self.out, "logs"), exist_ok=True)
            fh = logging.FileHandler(os.path.join(self.out, "logs", f"train_rank{self.rank}.log"))
            fh.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            lg.addHandler(fh)
            if self.rank == 0:  # the console gets rank 0's lines only, as most scripts do
                sh = logging.StreamHandler(sys.stdout)
                sh.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
                lg.addHandler(sh)
        elif self.style == "hydralog":
            lg.propagate = True  # to the root logger Hydra configured (console + the run dir's app.log), as
            return lg            # `log = logging.getLogger(__name__)` in a Hydra app does
        elif self.style == "sharedlog":
            # one file for the whole job: every rank's FileHandler appends to it, and the format names the process,
            # not the rank (a common default: `%(process)d`), so a line says which pid wrote it and nothing more
            os.makedirs(os.path.join(self.out, "logs"), exist_ok=True)
            fh = logging.FileHandler(os.path.join(self.out, "logs", "train.log"))
            fh.setFormatter(logging.Formatter("%(asctime)s - %(process)d - %(levelname)s - %(message)s"))
            lg.addHandler(fh)
        elif self.style == "jsonl":
            os.makedirs(os.path.join(self.out, "logs"), exist_ok=True)
            fh = logging.FileHandler(os.path.join(self.out, "logs", f"rank{self.rank}.jsonl"))
            fh.setFormatter(_JsonFormatter(self.rank))
            lg.addHandler(fh)
        else:
            sh = logging.StreamHandler(sys.stdout)
            prefix = {"rank": f"[rank {self.rank}] ", "kv": f"rank={self.rank} ", "plain": "",
                      "ts": f"%(asctime)s %(levelname)s rank {self.rank}: "}.get(self.fmt, "")
            sh.setFormatter(logging.Formatter(prefix + "%(message)s"))
            lg.addHandler(sh)
        return lg

    def log(self, msg: str, *args, level: int = logging.INFO, **fields) -> None:
        """Log a line in the run's style (fields become JSON keys in the jsonl style)."""
        self.logger.log(level, msg, *args, extra={"fields": fields})
        for h in self.logger.handlers:
            h.flush()

    def warn(self, msg: str, *args) -> None:
        self.log(msg, *args, level=logging.WARNING)

    def log_step(self, step: int, loss: float, total: int | None = None, **kw) -> None:
        """The per-step metrics line; only rank 0 prints it when the run says so."""
        if P.get("rank0_log") and self.rank != 0:
            return
        extra = "".join(f" {k} {v:.4g}" if isinstance(v, float) else f" {k} {v}" for k, v in kw.items())
        tot = f"/{total}" if total else ""
        self.log(f"step {step}{tot} loss {loss:.4f}{extra}", step=step, loss=round(float(loss), 5), **kw)
        if self.wb is not None:
            self.wb.log({"loss": float(loss), **{k: v for k, v in kw.items() if isinstance(v, (int, float))}},
                        step=step)

    # ---- distributed ----
    def init_pg(self, timeout_s: float | None = None) -> None:
        """Init gloo (or an Accelerator under accelerate launch) with the run's process-group timeout."""
        import torch.distributed as dist
        t = datetime.timedelta(seconds=timeout_s or P.get("pg_timeout", 30))
        if dist.is_available() and dist.is_initialized():  # Ray Train's TorchTrainer sets up the group itself
            self.rank, self.world = dist.get_rank(), dist.get_world_size()
            self.start_fr_watchdog()
            return
        if os.environ.get("LAB_LAUNCHER") == "accelerate":
            from accelerate import Accelerator
            from accelerate.utils import InitProcessGroupKwargs
            self.acc = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(timeout=t)])
        else:
            dist.init_process_group("gloo", timeout=t)
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.start_fr_watchdog()

    def start_fr_watchdog(self) -> None:
        """When the run enables the flight recorder: dump it from a thread once training stops progressing."""
        if P.get("fr") and not getattr(self, "_fr_started", False):
            self._fr_started = True
            self._progress["t"] = time.time()  # the stall clock starts once the group is up
            threading.Thread(target=self._fr_watchdog, name="fr-dump-watchdog", daemon=True).start()

    def tick(self, step: int) -> None:
        """Record progress (the flight-recorder watchdog dumps when it stops)."""
        self._progress["step"], self._progress["t"] = step, time.time()

    def _fr_watchdog(self) -> None:
        import torch
        stall = P.get("fr_stall", 8)
        prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.path.join(self.out, "fr", "nccl_trace_rank_")
        while True:
            time.sleep(0.5)
            # start-up (imports, rendezvous, DDP's first broadcast) can stall longer than `stall` on a busy host:
            # count only stalls after the first step, unless the job's wait comes before any step
            if self._progress["step"] < 1 and not P.get("fr_before_steps"):
                continue
            if time.time() - self._progress["t"] > stall:
                os.makedirs(os.path.dirname(prefix), exist_ok=True)
                with open(f"{prefix}{self.rank}", "wb") as f:
                    f.write(torch._C._distributed_c10d._dump_fr_trace(True, True, False))
                print(f"[rank {self.rank}] no progress for {stall}s after step {self._progress['step']}; "
                      f"flight recorder dumped to {prefix}{self.rank}", flush=True)
                return

    def run(self, main) -> None:
        """Run main(lab); record how this rank ended in the side channel and let exceptions propagate."""
        try:
            main(self)
        except BaseException as e:
            self.side("exception", type=type(e).__name__, msg=str(e)[:300])
            if self.style in ("logging", "jsonl", "loguru", "structlog-json", "structlog-console", "absl", "sharedlog", "hydralog"):
                self.logger.exception("Training failed", extra={"fields": {}})
            raise
        self.side("end", status="ok")


class _JsonFormatter(logging.Formatter):
    def __init__(self, rank: int) -> None:
        super().__init__()
        self.rank = rank

    def format(self, record: logging.LogRecord) -> str:
        d = {"ts": datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc).isoformat(),
             "level": record.levelname, "rank": self.rank, "msg": record.getMessage()}
        d.update(getattr(record, "fields", {}) or {})
        if record.exc_info:
            d["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(d)


def tiny_model(d_in: int = 32, d_hidden: int = 64, d_out: int = 4, seed: int = 0):
    """A small MLP, identical on every rank (seeded)."""
    import torch
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(d_in, d_hidden), torch.nn.ReLU(), torch.nn.Linear(d_hidden, d_out))


def ddp(model, **kw):
    """Wrap in DDP for CPU/gloo."""
    from torch.nn.parallel import DistributedDataParallel
    return DistributedDataParallel(model, **kw)

"""Stall watchdog: when the job goes quiet (or on SIGUSR1) take py-spy dumps of its Python processes, once per stall."""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Callable

from postmortem.collect import procs as procs_mod
from postmortem.collect import stall
from postmortem.collect.system import smi_snapshot
from postmortem.collect.tee import Activity

PYSPY_TIMEOUT_S = 30.0   # one dump; a process py-spy cannot read in this time is recorded as failed
PARALLEL_DUMPS = 8
POLL_S = 0.25
CENSUS_AT_S = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)   # looks at the process tree for ranks after the start, then every
CENSUS_EVERY_S = 30.0                             # CENSUS_EVERY_S (elastic restarts start new pids)
STARTUP_GRACE_S = 60.0   # the least silence before the job's first output that counts as a stall


def _utc_now() -> str:
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def take_dumps(root_pid: int, pyspy_dir: str, reason: str, pyspy: str | None, smi: str | None,
               collector_env: dict[str, str] | None = None) -> dict:
    """Dump every Python process of the job into pyspy_dir/<UTC time>/ with its process tree; a manifest record."""
    now = datetime.now(timezone.utc)
    when = now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"
    stem = now.strftime("%Y%m%dT%H%M%S") + f"{now.microsecond // 1000:03d}Z"
    out = os.path.join(pyspy_dir, stem)
    os.makedirs(out, exist_ok=True)
    procs = procs_mod.job_processes(root_pid, collector_env)
    with open(os.path.join(out, "proctree.txt"), "w", encoding="utf-8") as fh:
        fh.write(procs_mod.format_tree(procs, when))
    record: dict = {"at": when, "reason": reason, "dir": out, "processes": len(procs), "dumped": [], "failed": []}
    targets = [p for p in procs if p.is_python]
    if not pyspy:
        record["failed"] = [{"pid": p.pid, "error": "py-spy not installed"} for p in targets]
    else:
        with ThreadPoolExecutor(max_workers=min(PARALLEL_DUMPS, max(1, len(targets)))) as pool:
            for p, (err, native) in zip(targets, pool.map(lambda p: _dump_one(pyspy, p, out), targets)):
                if err is None:
                    record["dumped"].append({"pid": p.pid, "rank": p.rank, "local_rank": p.local_rank,
                                             "role": p.role, "file": procs_mod.dump_name(p) + ".txt",
                                             "native": native})
                else:
                    record["failed"].append({"pid": p.pid, "rank": p.rank, "error": err})
    if smi:
        err = smi_snapshot(os.path.join(out, "nvidia-smi.txt"), smi)
        if err:
            record["nvidia_smi_error"] = err
    return record


def _dump_one(pyspy: str, p: procs_mod.Proc, out: str) -> tuple[str | None, bool]:
    """Dump one process into out/<dump name>.txt: (error or None, whether the dump has native frames).

    `--native` first: a rank waiting in a collective called from C++ (DDP's gradient all-reduce inside backward, a
    gloo or NCCL wait) shows only `_engine_run_backward` in Python, and the c10d/gloo frames below it say it waits.
    Where native unwinding does not work (some platforms and containers) the plain dump is taken instead."""
    err = None
    for native in (True, False):
        got, err = _run_pyspy([pyspy, "dump", *(["--native"] if native else []), "--pid", str(p.pid)])
        if got is not None:
            with open(os.path.join(out, procs_mod.dump_name(p) + ".txt"), "wb") as fh:
                fh.write(got)
            return None, native
        if err.startswith("py-spy dump timed out") or err.startswith("py-spy could not run"):
            break  # a plain dump would fail the same way
    return err, False


def _run_pyspy(argv: list[str]) -> tuple[bytes | None, str]:
    """py-spy's output, or None and the first line of its error."""
    try:
        res = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=PYSPY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"py-spy dump timed out after {PYSPY_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return None, f"py-spy could not run: {exc}"
    if res.returncode != 0 or not res.stdout.strip():
        # Errors stay out of the dump folder (the analyzer would read them as a log); they go to the manifest.
        err = (res.stderr or res.stdout).decode("utf-8", "replace").strip().splitlines()
        return None, (err[0] if err else f"py-spy exited with {res.returncode}")[:500]
    return res.stdout, ""


def stall_reason(now: float, last_output: float, has_output: bool, stall_after: float,
                 dumped_for: float | None) -> str | None:
    """Why a dump is due now, or None: quiet for `stall_after` s (at least STARTUP_GRACE_S before the first output,
    while the job imports and meets its peers), and not yet dumped for this silence (re-armed by new output)."""
    if stall_after <= 0 or dumped_for == last_output:
        return None
    limit = stall_after if has_output else max(stall_after, STARTUP_GRACE_S)
    return f"no output for {limit:g} s" if now - last_output >= limit else None


class StallWatchdog(threading.Thread):
    """Polls the job's output activity; dumps once when it has been quiet for `stall_after` s (None: the delay
    follows the job, postmortem.collect.stall, at most `cap` s), and on request."""

    def __init__(self, root_pid: int, activity: Activity, stall_after: float | None, pyspy_dir: str,
                 pyspy: str | None, smi: str | None, on_dump: Callable[[dict], None],
                 collector_env: dict[str, str] | None = None, cap: float | None = None,
                 on_discard: Callable[[dict], None] | None = None):
        super().__init__(name="postmortem-watchdog", daemon=True)
        self.root_pid, self.activity = root_pid, activity
        self.auto = stall_after is None
        self.cap = float(cap if cap is not None else stall.DEFAULT_CAP)
        self.stall_after = self.cap if stall_after is None else float(stall_after)
        self.on_discard = on_discard
        self.early: list[tuple[float, float, dict]] = []   # (taken at, its threshold, record) of early dumps
        self.floor = stall.FLOOR   # the least silence that counts as a stall; rises past each pause that recovered
        self.pyspy_dir, self.pyspy, self.smi, self.on_dump = pyspy_dir, pyspy, smi, on_dump
        self.collector_env = collector_env
        self.requested = False       # set from the SIGUSR1 handler: a plain flag, no locks in signal context
        self._halt = threading.Event()
        self._dumped_at_activity: float | None = None
        self.census = procs_mod.RankCensus()
        self._born = time.monotonic()
        self._next_census = 0

    def request(self) -> None:
        """Ask for a dump now (safe to call from a signal handler)."""
        self.requested = True

    def stop(self) -> None:
        """Stop polling (a dump in progress finishes)."""
        self._halt.set()

    def run(self) -> None:
        while not self._halt.wait(POLL_S):
            self._census_due()
            if self.requested:
                self.requested = False
                self._dump("requested (SIGUSR1 to the collector)")
                continue
            last = self.activity.last
            limit = self.limit()
            reason = stall_reason(time.monotonic(), last, self.activity.bytes > 0, limit, self._dumped_at_activity)
            if reason:
                self._dumped_at_activity = last
                self._dump(reason, early=self.auto and limit < self.cap, limit=limit)
            self._prune()

    def limit(self) -> float:
        """The silence that counts as a stall now (fixed, or following the job's rhythm within the cap)."""
        if not self.auto:
            return self.stall_after
        return stall.threshold(self.activity.rhythm.usual(), self.cap, self.floor)

    def _prune(self) -> None:
        """Remove early dumps of pauses the job came out of: it printed again and ran on for a while after them."""
        now = time.monotonic()
        keep = []
        for taken, limit, record in self.early:
            if self.activity.last > taken and now - taken >= max(stall.RECOVERED_AFTER, 3 * limit):
                if record.get("dir"):
                    shutil.rmtree(record["dir"], ignore_errors=True)
                self.floor = max(self.floor, 2 * limit)  # the job can be this quiet and go on: not a stall next time
                if self.on_discard is not None:
                    self.on_discard(record)
            else:
                keep.append((taken, limit, record))
        self.early = keep

    def _census_due(self) -> None:
        """Look for the job's ranks at CENSUS_AT_S after the start, then every CENSUS_EVERY_S."""
        age = time.monotonic() - self._born
        i = self._next_census
        due = CENSUS_AT_S[i] if i < len(CENSUS_AT_S) else CENSUS_AT_S[-1] + CENSUS_EVERY_S * (i - len(CENSUS_AT_S) + 1)
        if age >= due:
            self._next_census += 1
            self.look()

    def look(self) -> None:
        """One census of the job's ranks now (never raises: the census is evidence, not the job)."""
        try:
            self.census.look(self.root_pid, self.collector_env, _utc_now())
        except OSError:
            pass

    def _dump(self, reason: str, early: bool = False, limit: float | None = None) -> None:
        self.look()
        try:
            record = take_dumps(self.root_pid, self.pyspy_dir, reason, self.pyspy, self.smi, self.collector_env)
        except OSError as exc:
            record = {"at": None, "reason": reason, "error": str(exc), "dumped": [], "failed": []}
        if early:
            record["early"] = True
            self.early.append((time.monotonic(), float(limit or 0.0), record))
        self.on_dump(record)


def find_pyspy() -> str | None:
    """The py-spy executable (next to this Python first, then on PATH), or None."""
    import sys
    here = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if os.access(here, os.X_OK):
        return here
    return shutil.which("py-spy")

"""`collect(command, out)`: run a launcher unchanged while capturing the evidence a post-mortem needs."""
from __future__ import annotations

import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import BinaryIO, Sequence

from postmortem.collect import env as env_mod
from postmortem.collect import manifest as manifest_mod
from postmortem.collect import stall as stall_mod
from postmortem.collect import system
from postmortem.collect.tee import Activity, Tee, binary_stream
from postmortem.collect.watchdog import StallWatchdog, find_pyspy

DEFAULT_STALL_AFTER = None    # "auto": the delay follows the job's timeout and output rhythm (collect/stall.py)
DEFAULT_SMI_INTERVAL = 10.0
DRAIN_TIMEOUT_S = 5.0         # after the job exits, a leftover grandchild may hold the pipes open
WATCHDOG_JOIN_S = 60.0        # a dump in progress when the job ends is allowed to finish
# Forwarded to the job's process group (the job runs in its own session, so a terminal's Ctrl-C reaches only the
# collector, and the job gets it exactly once, from us). SIGUSR1 is kept: it asks the collector for stack dumps.
FORWARDED = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR2")
                  if hasattr(signal, n))
EVIDENCE_VARS = ("NCCL_DEBUG", "NCCL_DEBUG_FILE", "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE",
                 "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
                 "TORCHELASTIC_ERROR_FILE", "PET_LOG_DIR", "PET_TEE", "PET_REDIRECTS",
                 "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "PYTHONFAULTHANDLER", "PYTHONUNBUFFERED")
_NAME_RE = re.compile(r"[^A-Za-z0-9_.-]+")


def node_name() -> str:
    """This node's directory name: the short host name (what NCCL's %h gives), made file-name safe."""
    return _NAME_RE.sub("_", socket.gethostname().split(".")[0] or "localhost")


def task_subdir(environ: dict[str, str]) -> str | None:
    """`rank<N>` when srun started several collectors on this node (one per task), so that they do not collide."""
    try:
        tasks, nodes = int(environ["SLURM_STEP_NUM_TASKS"]), int(environ["SLURM_STEP_NUM_NODES"])
        procid = int(environ["SLURM_PROCID"])
    except (KeyError, ValueError):
        return None
    return f"rank{procid}" if tasks > nodes else None


def fresh_node_dir(out: str, node: str, sub: str | None) -> tuple[str, str | None]:
    """OUT/<node>[/<sub>], or OUT/<node>.2, .3 ... when an earlier run left files there (never overwritten)."""
    for n in range(1, 10_000):
        name = node if n == 1 else f"{node}.{n}"
        path = os.path.abspath(os.path.join(out, name, sub or ""))
        os.makedirs(path, exist_ok=True)  # an unwritable OUT is the caller's error, raised before the job starts
        if not os.listdir(path):
            first = os.path.abspath(os.path.join(out, node, sub or ""))
            return path, (first if n > 1 else None)
    raise OSError(f"no free node directory under {out}")


def is_lead_task(environ: dict[str, str]) -> bool:
    """Only the first collector of a multi-node/multi-task launch runs the analysis (the others would repeat it)."""
    for var in ("SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        value = environ.get(var)
        if value is not None:
            return value.strip() == "0"
    return True


def collect(command: Sequence[str], out: str, stall_after: float | None = DEFAULT_STALL_AFTER,
            smi_interval: float = DEFAULT_SMI_INTERVAL, analyze: bool = True, node: str | None = None,
            py_spy: str | None = None, quiet: bool = False, stdout: BinaryIO | None = None,
            stderr: BinaryIO | None = None, environ: dict[str, str] | None = None) -> int:
    """Run `command`, capturing evidence into `out/<node>/`; return its exit status (negative: killed by signal).

    The job runs unchanged: same arguments, inherited stdin, its stdout/stderr copied byte for byte to ours
    (`stdout`/`stderr`: binary or text streams); evidence settings are added to its environment only where the user has
    not set them. Signals are forwarded only when called from the main thread (handlers live there).
    """
    command = list(command)
    if not command:
        raise ValueError("no command to run")
    c = _Collector(command, out, stall_after, smi_interval, node, py_spy, quiet,
                   binary_stream(sys.stdout if stdout is None else stdout),
                   binary_stream(sys.stderr if stderr is None else stderr),
                   dict(os.environ if environ is None else environ))
    rc = c.run()
    if rc is not None and analyze:
        _print_verdict(out, c.notes, c.base_env)
    return c.spawn_status if rc is None else rc


class _Notes:
    """The collector's own messages: one prefix, on stderr, never inside the job's output files or lines."""

    def __init__(self, stream: BinaryIO | None, quiet: bool):
        self.stream, self.quiet = stream, quiet
        self.lock = threading.Lock()  # shared with the job's stderr copy to the same terminal
        self.tee: Tee | None = None

    def say(self, text: str, always: bool = False) -> None:
        """Print `text` as `postmortem collect: ...` lines (unless quiet and not `always`)."""
        if self.stream is None or (self.quiet and not always):
            return
        data = "".join(f"postmortem collect: {ln}\n" for ln in text.splitlines()).encode("utf-8", "replace")
        with self.lock:
            if self.tee is not None and not self.tee.terminal_at_line_start:
                data = b"\n" + data  # never glue a message onto the job's unfinished line
            try:
                self.stream.write(data)
                self.stream.flush()
            except (OSError, ValueError):
                pass


class _Collector:
    """One collector run: prepares the node directory, runs the job with its helpers, writes the manifest."""

    def __init__(self, command, out, stall_after, smi_interval, node, py_spy, quiet, term_out, term_err, base_env):
        self.command, self.stall_after, self.term_out, self.base_env = command, stall_after, term_out, base_env
        self.notes = _Notes(term_err, quiet)
        node = _NAME_RE.sub("_", node) if node else node_name()
        self.node_dir, earlier = fresh_node_dir(out, node, task_subdir(base_env))
        if earlier:
            self.notes.say(f"{earlier} holds an earlier run (kept); this run writes {self.node_dir}. Use a fresh "
                           "--out per run: `postmortem analyze` reads everything under it as one job.", always=True)
        for d in env_mod.evidence_dirs(self.node_dir):
            os.makedirs(d, exist_ok=True)
        self.job_env, added = env_mod.evidence_env(base_env, self.node_dir, command=command)
        self.py_spy_arg = py_spy
        self.pyspy = find_pyspy() if py_spy is None else (py_spy if py_spy and os.access(py_spy, os.X_OK) else None)
        first_on_node = base_env.get("SLURM_LOCALID", "0") == "0"  # one nvidia-smi loop per node
        smi_csv = os.path.join(self.node_dir, "nvidia-smi.csv")
        self.smi = system.SmiLoop(smi_csv, smi_interval) if first_on_node else None
        self.record: dict = {"command": command, "node": node, "host": socket.gethostname(), "node_dir": self.node_dir,
                             "started": system.utc_now_iso(), "env_added": added,
                             "env_kept": sorted(k for k in EVIDENCE_VARS if k in base_env),
                             "stall_after_s": stall_after if stall_after is not None else stall_mod.AUTO,
                             "py_spy": self.pyspy, "stall_dumps": [], "missing": [],
                             "signals_forwarded": []}
        timeout, where = stall_mod.stated_timeout(command, base_env)
        self.stall_cap = stall_mod.cap_for(timeout)
        if stall_after is None:
            self.record["stall_policy"] = {
                "cap_s": self.stall_cap, "floor_s": stall_mod.FLOOR,
                "timeout_s": timeout, "timeout_from": where or "not stated; the cap is below NCCL's 600 s default"}
        self.proc: subprocess.Popen | None = None
        self.dog: StallWatchdog | None = None
        self.pending: list[int] = []
        self.usr1_early = False
        self.spawn_status = 0

    # -- signals ---------------------------------------------------------------------------------------------
    def _forward(self, signum, _frame) -> None:
        self.record["signals_forwarded"].append(_signame(signum))
        if self.proc is None:
            self.pending.append(signum)  # arrived before the job existed: delivered once it does
            return
        try:
            os.killpg(self.proc.pid, signum)
        except ProcessLookupError:
            pass

    def _usr1(self, _signum, _frame) -> None:
        if self.dog is not None:
            self.dog.request()
        else:
            self.usr1_early = True

    # -- run -------------------------------------------------------------------------------------------------
    def run(self) -> int | None:
        """Run the job to its end and write the manifest; None when it could not be started."""
        if not self.pyspy:
            why = f"py-spy not found at {self.py_spy_arg}" if self.py_spy_arg else "py-spy is not installed"
            self.record["missing"].append({"what": "py-spy", "why": why})
            self.notes.say(f"{why}: no stacks will be taken when the job stalls "
                           "(pip install 'ddp-postmortem[collect]' or pip install py-spy)", always=True)
        start_epoch, start_uptime = time.time(), system.uptime()
        self.notes.say(f"evidence -> {self.node_dir} (SIGUSR1 to pid {os.getpid()} takes stack dumps now)")
        installed = {}
        # Handlers go in before the job starts, so that no signal in between kills the collector and not the job.
        if threading.current_thread() is threading.main_thread():
            for sig in FORWARDED:
                installed[sig] = signal.signal(sig, self._forward)
            installed[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, self._usr1)
        try:
            rc = self._run_job()
        finally:
            for sig, old in installed.items():
                signal.signal(sig, old)  # from here on Ctrl-C interrupts the post-mortem steps, not the job
        if rc is None:
            manifest_mod.remove_empty_dirs(self.node_dir)
            return None
        self.record.update(ended=system.utc_now_iso(), exit_code=rc if rc >= 0 else None,
                           signal=_signame(-rc) if rc < 0 else None)
        status = f"exit code {rc}" if rc >= 0 else f"killed by {self.record['signal']}"
        try:  # the job's exit status must come through even when the evidence disk is full or gone
            self._kernel_log(start_epoch, start_uptime)
            manifest_mod.remove_empty_dirs(self.node_dir)
            path = manifest_mod.write_manifest(self.node_dir, self.record)
        except OSError as exc:
            self.notes.say(f"job ended ({status}); could not write the manifest: {exc}", always=True)
            return rc
        self.notes.say(f"job ended ({status}); manifest: {path}")
        return rc

    def _run_job(self) -> int | None:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            self.proc = subprocess.Popen(self.command, stdin=None, stdout=out_w, stderr=err_w, env=self.job_env,
                                         start_new_session=True, preexec_fn=_death_signal_preexec())
        except OSError as exc:
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
            self.notes.say(f"cannot run {self.command[0]}: {exc.strerror or exc}", always=True)
            self.spawn_status = 127 if isinstance(exc, FileNotFoundError) else 126  # as a shell would
            return None
        os.close(out_w)
        os.close(err_w)
        self.record["pid"] = self.proc.pid
        for signum in self.pending:
            try:
                os.killpg(self.proc.pid, signum)
            except ProcessLookupError:
                pass
        activity = Activity()
        tees = [Tee(out_r, self.term_out, os.path.join(self.node_dir, "stdout.log"), activity, "stdout"),
                Tee(err_r, self.notes.stream, os.path.join(self.node_dir, "stderr.log"), activity, "stderr",
                    lock=self.notes.lock)]
        self.notes.tee = tees[1]
        for t in tees:
            t.start()
        smi_on = bool(self.smi and self.smi.start())
        self.record["nvidia_smi"] = (f"every {self.smi.interval:g} s into nvidia-smi.csv" if smi_on else
                                     "left to the node's first task" if self.smi is None else
                                     self.smi.error or "nvidia-smi not found")
        self.dog = StallWatchdog(self.proc.pid, activity, self.stall_after, os.path.join(self.node_dir, "pyspy"),
                                 self.pyspy, self.smi.exe if smi_on else None, self._on_dump, self.base_env,
                                 cap=self.stall_cap, on_discard=self._on_discard)
        if self.usr1_early:
            self.dog.request()
        self.dog.start()
        try:
            return self.proc.wait()
        finally:
            self.dog.stop()
            self.dog.join(WATCHDOG_JOIN_S)
            if "stall_policy" in self.record:  # the silence that counted as a stall when the job ended
                self.record["stall_policy"]["threshold_s"] = round(self.dog.limit(), 1)
            # pid -> rank of every rank process seen while the job ran (the analyzer joins py-spy's `Process P` and
            # torchrun's `local_rank: N (pid: P)` to ranks with it)
            self.record["processes"] = self.dog.census.records()
            if self.smi is not None:
                self.smi.stop()
            drained_by = time.monotonic() + DRAIN_TIMEOUT_S
            for t in tees:
                t.join(max(0.0, drained_by - time.monotonic()))
            self.record["output_bytes"] = {t.stream: t.bytes for t in tees}
            self.record["missing"].extend({"what": f"{t.stream} copy", "why": t.log_error} for t in tees
                                          if t.log_error)

    def _on_dump(self, rec: dict) -> None:
        where = rec.get("dir") or self.node_dir
        self.record["stall_dumps"].append({**rec, "dir": os.path.relpath(where, self.node_dir)})
        msg = f"{rec['reason']}: {len(rec['dumped'])} py-spy dump(s) and the process tree in {os.path.relpath(where)}"
        if rec["failed"]:
            msg += f"; {len(rec['failed'])} failed ({rec['failed'][0].get('error')})"
        self.notes.say(msg)

    def _on_discard(self, rec: dict) -> None:
        """An early dump of a pause the job came out of was removed: the manifest says so instead of listing it."""
        rel = os.path.relpath(rec.get("dir") or self.node_dir, self.node_dir)
        kept = [d for d in self.record["stall_dumps"] if d.get("dir") != rel]
        if len(kept) < len(self.record["stall_dumps"]):
            self.record["stall_dumps"] = kept
            self.record.setdefault("stall_dumps_discarded", []).append(
                {"at": rec.get("at"), "why": "the job printed again and went on: a pause, not a hang"})
        self.notes.say(f"the job went on after the stall at {rec.get('at')}: its dumps were removed")

    def _kernel_log(self, start_epoch: float, start_uptime: float | None) -> None:
        klog, how = system.kernel_log_since(start_epoch, start_uptime)
        if klog is None:
            self.record["kernel_log"] = {"unreadable": how}
            self.record["missing"].append({"what": "kernel log", "why": how})
            return
        self.record["kernel_log"] = {"read_with": how, "lines_since_start": klog.count(b"\n")}
        if klog:
            with open(os.path.join(self.node_dir, "dmesg.txt"), "wb") as fh:
                fh.write(klog)


def _death_signal_preexec():
    """In the child: if the collector is killed outright (SIGKILL, OOM killer) the job gets SIGTERM, not orphaned."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here: the child only calls it
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig, sigterm = 1, int(signal.SIGTERM)

    def preexec() -> None:
        prctl(pr_set_pdeathsig, sigterm, 0, 0, 0)
    return preexec


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _print_verdict(out: str, notes: _Notes, environ: dict[str, str]) -> None:
    if not is_lead_task(environ):
        notes.say(f"analysis left to the first task; run: postmortem analyze {out}")
        return
    try:
        from postmortem.api import analyze as run_analysis
        text = run_analysis(out).to_text()
    except KeyboardInterrupt:
        notes.say("analysis interrupted", always=True)
        return
    except Exception as exc:  # the job's exit status must come through even when the analyzer fails
        notes.say(f"analysis failed: {type(exc).__name__}: {exc}; run: postmortem analyze {out}", always=True)
        return
    with notes.lock:
        try:
            notes.stream.write(("\n" + text + ("" if text.endswith("\n") else "\n")).encode("utf-8", "replace"))
            notes.stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def exit_like(rc: int) -> int:
    """Make this process end the way the job did: re-raise its fatal signal, else return its exit code."""
    if rc >= 0:
        return rc
    sig = -rc
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the job's SIGSEGV must not dump the collector's core
    except (ImportError, ValueError, OSError):
        pass
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those cannot be caught, so need no reset
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        time.sleep(1.0)  # delivery is asynchronous for some signals
    except (OSError, ValueError):
        pass
    return 128 + sig

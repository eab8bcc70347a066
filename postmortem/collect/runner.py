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
from postmortem.collect import system
from postmortem.collect.tee import Activity, Tee
from postmortem.collect.watchdog import StallWatchdog, find_pyspy

DEFAULT_STALL_AFTER = 300.0   # below the 600 s NCCL default timeout, so stacks are taken while the job still hangs
DEFAULT_SMI_INTERVAL = 10.0
DRAIN_TIMEOUT_S = 5.0         # after the job exits, a leftover grandchild may hold the pipes open
# Ctrl-C, Ctrl-\ and hang-up reach a terminal's whole foreground group, so they go to the job's group; TERM and
# USR2 go to the same group too: `kill`/Slurm mean "stop the job", and the job is the group.
FORWARDED = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR2") if hasattr(signal, n))
_NAME_RE = re.compile(r"[^A-Za-z0-9_.-]+")


def node_name(environ: dict[str, str] | None = None) -> str:
    """This node's directory name: the short host name (what NCCL's %h gives), made file-name safe."""
    host = socket.gethostname().split(".")[0] or "localhost"
    return _NAME_RE.sub("_", host)


def task_subdir(environ: dict[str, str]) -> str | None:
    """`rank<N>` when srun started several collectors on this node (one per task), so they do not collide."""
    try:
        tasks, nodes = int(environ["SLURM_STEP_NUM_TASKS"]), int(environ["SLURM_STEP_NUM_NODES"])
        procid = int(environ["SLURM_PROCID"])
    except (KeyError, ValueError):
        return None
    return f"rank{procid}" if tasks > nodes else None


def _is_lead_task(environ: dict[str, str]) -> bool:
    """Only the first collector of a multi-node/multi-task launch runs the analysis (the others would repeat it)."""
    for var in ("SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        value = environ.get(var)
        if value is not None:
            return value.strip() == "0"
    return True


class _Notes:
    """The collector's own messages: one prefix, on stderr, never mixed into the job's output files."""

    def __init__(self, stream: BinaryIO | None, quiet: bool):
        self.stream, self.quiet = stream, quiet
        self.lock = threading.Lock()

    def say(self, text: str, always: bool = False) -> None:
        if self.stream is None or (self.quiet and not always):
            return
        data = "".join(f"postmortem collect: {ln}\n" for ln in text.splitlines()).encode("utf-8", "replace")
        with self.lock:
            try:
                self.stream.write(data)
                self.stream.flush()
            except (OSError, ValueError):
                pass


def _death_signal_preexec():
    """In the child: if the collector is killed outright (SIGKILL, OOM killer), the job gets SIGTERM, not orphaned."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig, sigterm = 1, int(signal.SIGTERM)

    def preexec() -> None:
        prctl(pr_set_pdeathsig, sigterm, 0, 0, 0)
    return preexec


def collect(command: Sequence[str], out: str, stall_after: float = DEFAULT_STALL_AFTER,
            smi_interval: float = DEFAULT_SMI_INTERVAL, analyze: bool = True, node: str | None = None,
            py_spy: str | None = None, quiet: bool = False, stdout: BinaryIO | None = None,
            stderr: BinaryIO | None = None, environ: dict[str, str] | None = None) -> int:
    """Run `command`, capturing evidence into `out/<node>/`; return its exit status (negative: killed by signal).

    The job runs unchanged: same arguments, inherited stdin, its stdout/stderr copied byte for byte to ours;
    evidence settings are added to its environment only where the user has not set them. Must be called from the
    main thread (it installs signal handlers for forwarding and for SIGUSR1 = dump stacks now).
    """
    command = list(command)
    if not command:
        raise ValueError("no command to run")
    base_env = dict(os.environ if environ is None else environ)
    term_out = stdout if stdout is not None else sys.stdout.buffer
    term_err = stderr if stderr is not None else sys.stderr.buffer
    notes = _Notes(term_err, quiet)
    node = _NAME_RE.sub("_", node) if node else node_name(base_env)
    node_dir = os.path.abspath(os.path.join(out, node))
    sub = task_subdir(base_env)
    if sub:
        node_dir = os.path.join(node_dir, sub)
    os.makedirs(node_dir, exist_ok=True)
    for d in env_mod.evidence_dirs(node_dir):
        os.makedirs(d, exist_ok=True)
    job_env, added = env_mod.evidence_env(base_env, node_dir)

    pyspy = find_pyspy() if py_spy is None else (py_spy if py_spy and os.access(py_spy, os.X_OK) else None)
    first_task_on_node = base_env.get("SLURM_LOCALID", "0") == "0"
    smi = system.SmiLoop(os.path.join(node_dir, "nvidia-smi.csv"), smi_interval) if first_task_on_node else None
    record: dict = {"command": command, "node": node, "node_dir": node_dir, "started": system.utc_now_iso(),
                    "env_added": added, "env_kept": sorted(k for k in _EVIDENCE_VARS if k in base_env),
                    "stall_after_s": stall_after, "py_spy": pyspy, "stall_dumps": [], "missing": []}
    if not pyspy:
        why = f"py-spy not found at {py_spy}" if py_spy else "py-spy is not installed"
        record["missing"].append({"what": "py-spy", "why": why})
        notes.say(f"{why}: no stacks will be taken when the job stalls "
                  "(pip install 'ddp-postmortem[collect]' or pip install py-spy)", always=True)
    start_epoch, start_uptime = time.time(), system.uptime()

    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        proc = subprocess.Popen(command, stdin=None, stdout=out_w, stderr=err_w, env=job_env,
                                start_new_session=True, preexec_fn=_death_signal_preexec())
    except OSError as exc:
        for fd in (out_r, out_w, err_r, err_w):
            os.close(fd)
        notes.say(f"cannot run {command[0]}: {exc.strerror or exc}", always=True)
        return 127 if isinstance(exc, FileNotFoundError) else 126
    os.close(out_w)
    os.close(err_w)
    record["pid"] = proc.pid
    notes.say(f"evidence -> {node_dir} (job pid {proc.pid}; SIGUSR1 to pid {os.getpid()} dumps stacks now)")

    activity = Activity()
    tees = [Tee(out_r, term_out, os.path.join(node_dir, "stdout.log"), activity, "stdout"),
            Tee(err_r, term_err, os.path.join(node_dir, "stderr.log"), activity, "stderr")]
    for t in tees:
        t.start()
    smi_on = bool(smi and smi.start())
    record["nvidia_smi"] = (f"every {smi.interval:g} s into nvidia-smi.csv" if smi_on else
                            "left to the node's first task" if smi is None else smi.error or "nvidia-smi not found")

    def on_dump(rec: dict) -> None:
        record["stall_dumps"].append({**rec, "dir": os.path.relpath(rec.get("dir") or node_dir, node_dir)})
        n_ok, n_bad = len(rec.get("dumped", ())), len(rec.get("failed", ()))
        where = os.path.relpath(rec.get("dir") or node_dir)
        msg = f"{rec['reason']}: {n_ok} py-spy dump(s) and the process tree in {where}"
        if n_bad:
            msg += f"; {n_bad} failed ({rec['failed'][0].get('error')})"
        notes.say(msg)

    dog = StallWatchdog(proc.pid, activity, stall_after, os.path.join(node_dir, "pyspy"), pyspy,
                        smi.exe if smi_on else None, on_dump, collector_env=base_env)
    forwarded: list[str] = []

    def forward(signum, _frame) -> None:
        forwarded.append(signal.Signals(signum).name)
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            pass

    def on_usr1(_signum, _frame) -> None:
        dog.request()

    installed = {}
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        for sig in FORWARDED:
            installed[sig] = signal.signal(sig, forward)
        installed[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, on_usr1)
    dog.start()
    try:
        rc = proc.wait()
    finally:
        for sig, old in installed.items():
            signal.signal(sig, old)  # from here on Ctrl-C interrupts the post-mortem steps, not the job
        dog.stop()
        dog.join(PYSPY_JOIN_S)
        if smi is not None:
            smi.stop()
        for t in tees:
            t.join(DRAIN_TIMEOUT_S)

    record.update(ended=system.utc_now_iso(), exit_code=rc if rc >= 0 else None, signal=_signame(-rc) if rc < 0 else None,
                  signals_forwarded=forwarded,
                  output_bytes={"stdout": tees[0].bytes, "stderr": tees[1].bytes})
    for t in tees:
        if t.log_error:
            record["missing"].append({"what": f"{t.name} copy", "why": t.log_error})
    klog, how = system.kernel_log_since(start_epoch, start_uptime)
    record["kernel_log"] = {"read_with" if klog is not None else "unreadable": how,
                            "lines": klog.count(b"\n") if klog else 0}
    if klog:
        with open(os.path.join(node_dir, "dmesg.txt"), "wb") as fh:
            fh.write(klog)
    elif klog is None:
        record["missing"].append({"what": "kernel log", "why": how})
    manifest_mod.remove_empty_dirs(node_dir)
    manifest_mod.write_manifest(node_dir, record)
    status = f"exit code {rc}" if rc >= 0 else f"killed by {record['signal']}"
    notes.say(f"job ended ({status}); manifest: {os.path.join(node_dir, manifest_mod.MANIFEST_NAME)}")
    if analyze:
        _print_verdict(out, notes, base_env)
    return rc


PYSPY_JOIN_S = 60.0
_EVIDENCE_VARS = ("NCCL_DEBUG", "NCCL_DEBUG_FILE", "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE",
                  "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
                  "TORCHELASTIC_ERROR_FILE", "PET_LOG_DIR", "PYTHONFAULTHANDLER", "PYTHONUNBUFFERED")


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _print_verdict(out: str, notes: _Notes, environ: dict[str, str]) -> None:
    if not _is_lead_task(environ):
        notes.say(f"analysis left to the first task; run: postmortem analyze {out}")
        return
    try:
        from postmortem.api import analyze as run_analysis
        analysis = run_analysis(out)
        text = analysis.to_text()
    except KeyboardInterrupt:
        notes.say("analysis interrupted", always=True)
        return
    except Exception as exc:  # the job's exit status must come through even when the analyzer fails
        notes.say(f"analysis failed: {type(exc).__name__}: {exc}; run: postmortem analyze {out}", always=True)
        return
    if notes.stream is not None:
        try:
            notes.stream.write(("\n" + text + ("" if text.endswith("\n") else "\n")).encode("utf-8", "replace"))
            notes.stream.flush()
        except (OSError, ValueError):
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
        signal.signal(sig, signal.SIG_DFL)
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), sig)
        time.sleep(1.0)
    except (OSError, ValueError):
        pass
    return 128 + sig

"""Node-level evidence: a low-rate nvidia-smi CSV loop, one-off nvidia-smi snapshots, and the kernel log tail."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from datetime import datetime, timezone

SMI_FIELDS = ("timestamp,index,pci.bus_id,name,memory.used,memory.total,utilization.gpu,temperature.gpu,"
              "power.draw,ecc.errors.uncorrected.volatile.total")
MIN_SMI_INTERVAL = 1.0
KERNEL_LOG_MAX_LINES = 5000
KERNEL_LOG_SLACK_S = 5.0   # lines from just before the job started still belong to it (clock granularity)


class SmiLoop:
    """`nvidia-smi --query-gpu=... --format=csv -l N` into a file; absent nvidia-smi means no process and no file."""

    def __init__(self, path: str, interval: float, exe: str | None = None):
        self.path = path
        self.interval = max(MIN_SMI_INTERVAL, float(interval))
        self.exe = exe if exe is not None else shutil.which("nvidia-smi")
        self.proc: subprocess.Popen | None = None
        self.error: str | None = None

    def start(self) -> bool:
        """Start the loop when nvidia-smi exists; False when it does not or cannot start."""
        if not self.exe:
            return False
        try:
            with open(self.path, "ab") as fh:
                self.proc = subprocess.Popen(
                    [self.exe, f"--query-gpu={SMI_FIELDS}", "--format=csv", f"--loop={round(self.interval)}"],
                    stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            self.error, self.proc = str(exc), None
            return False
        return True

    def stop(self) -> None:
        """Stop the loop (SIGTERM, then SIGKILL after 2 s)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGTERM)  # its own session: wrappers around nvidia-smi go too
            try:
                self.proc.wait(2)
            except subprocess.TimeoutExpired:
                _signal_group(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        elif self.proc.returncode not in (0, None):
            self.error = f"nvidia-smi exited with {self.proc.returncode}"


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def smi_snapshot(path: str, exe: str | None = None, timeout: float = 20.0) -> str | None:
    """Write the default `nvidia-smi` table (it lists the processes on each GPU); None on success, else why not."""
    exe = exe if exe is not None else shutil.which("nvidia-smi")
    if not exe:
        return "nvidia-smi not found"
    try:
        with open(path, "wb") as fh:
            subprocess.run([exe], stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None


_ISO_TS = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:[,.](\d+))?([+-]\d\d:?\d\d)")
_MONO_TS = re.compile(rb"^\[\s*(\d+)\.(\d+)\]")


def uptime() -> float | None:
    """Seconds since boot (the clock of plain `dmesg` timestamps)."""
    try:
        with open("/proc/uptime", "rb") as fh:
            return float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def kernel_log_since(start_epoch: float, start_uptime: float | None, timeout: float = 20.0) -> tuple[bytes | None, str]:
    """Kernel log lines from the job's start on: (bytes or None when unreadable, how it was read or why not)."""
    attempts = [(["dmesg", "--time-format", "iso"], "iso"), (["dmesg"], "mono"),
                (["journalctl", "-k", "--no-pager", "-o", "short-iso", f"--since=@{int(start_epoch)}"], "journal")]
    why = []
    for argv, clock in attempts:
        if not shutil.which(argv[0]):
            why.append(f"{argv[0]} not found")
            continue
        try:
            res = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            why.append(f"{' '.join(argv)}: {exc}")
            continue
        if res.returncode != 0:
            err = res.stderr.decode("utf-8", "replace").strip().splitlines()
            why.append(f"{' '.join(argv)}: {err[-1] if err else 'exit ' + str(res.returncode)}")
            continue
        lines = res.stdout.splitlines(keepends=True)
        if clock == "iso":
            lines = _since_iso(lines, start_epoch - KERNEL_LOG_SLACK_S)
        elif clock == "mono":
            if start_uptime is None:
                why.append("dmesg without ISO times and no /proc/uptime: cannot tell old lines from new")
                continue
            lines = _since_mono(lines, start_uptime - KERNEL_LOG_SLACK_S)
        return b"".join(lines[-KERNEL_LOG_MAX_LINES:]), " ".join(argv)
    return None, "; ".join(why)


def _since_iso(lines: list[bytes], since: float) -> list[bytes]:
    keep, out = False, []
    for ln in lines:
        m = _ISO_TS.match(ln)
        if m:  # continuation lines without a time follow the decision of the line they continue
            tz = m.group(3).decode().replace(":", "")
            try:
                t = datetime.strptime(m.group(1).decode() + tz, "%Y-%m-%dT%H:%M:%S%z").timestamp()
            except ValueError:
                t = None
            keep = t is None or t >= since
        if keep:
            out.append(ln)
    return out


def _since_mono(lines: list[bytes], since: float) -> list[bytes]:
    keep, out = False, []
    for ln in lines:
        m = _MONO_TS.match(ln)
        if m:
            keep = float(m.group(1) + b"." + m.group(2)) >= since
        if keep:
            out.append(ln)
    return out


def utc_now_iso() -> str:
    """Now as `2026-11-21T13:18:24Z`."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

"""Process bookkeeping for the lab harness: the job's process tree from /proc, RSS, and killing what we started."""
from __future__ import annotations

import os
import signal


def _stat(pid: int) -> tuple[int, int] | None:
    """(ppid, starttime) of pid, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            s = f.read().decode(errors="replace")
    except OSError:
        return None
    rest = s[s.rindex(")") + 2:].split()
    return int(rest[1]), int(rest[19])


def descendants(*roots: int) -> dict[int, int]:
    """pid -> starttime of the roots and every process below them."""
    kids: dict[int, list[int]] = {}
    start: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st:
                kids.setdefault(st[0], []).append(int(name))
                start[int(name)] = st[1]
    out, todo = {}, list(roots)
    while todo:
        p = todo.pop()
        if p in start:
            out[p] = start[p]
        todo.extend(kids.get(p, []))
    return out


def alive(pid: int, starttime: int | None = None) -> bool:
    """True when pid exists (and is the same process when starttime is given) and is not a zombie."""
    st = _stat(pid)
    if st is None or (starttime is not None and st[1] != starttime):
        return False
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\nState:\tZ" not in f.read()
    except OSError:
        return False


def rss_mb(pid: int) -> float:
    """Resident set size in MB (0 when unreadable)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def ppid(pid: int) -> int | None:
    st = _stat(pid)
    return st[0] if st else None


def kill_all(seen: dict[int, int], sig: int = signal.SIGKILL) -> list[int]:
    """Send sig to every process we saw that is still the same process; returns the pids signalled."""
    hit = []
    for pid, st in seen.items():
        if alive(pid, st):
            try:
                os.kill(pid, sig)
                hit.append(pid)
            except OSError:
                pass
    return hit

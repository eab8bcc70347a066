"""Pure helpers that join facts across tables (kernel-killed pids to ranks, PCI bus ids across tools)."""
from __future__ import annotations

import re
from functools import lru_cache

_BUS_RE = re.compile(r"(?:PCI:)?(?:(?P<dom>[0-9A-Fa-f]{1,8}):)?(?P<bus>[0-9A-Fa-f]{2}):(?P<dev>[0-9A-Fa-f]{2})"
                     r"(?:\.(?P<fn>[0-7]))?")


@lru_cache(maxsize=4096)  # a looped capture repeats the same few bus ids for every snapshot
def normalize_bus_id(text: str | None) -> str | None:
    """One spelling for a PCI address: dmesg `0000:3b:00` and nvidia-smi `00000000:3B:00.0` both -> `00000000:3B:00.0`."""
    if not text:
        return None
    m = _BUS_RE.search(str(text))
    if not m:
        return None
    dom = int(m.group("dom") or "0", 16)
    return f"{dom:08X}:{m.group('bus').upper()}:{m.group('dev').upper()}.{m.group('fn') or '0'}"


def _as_int(value) -> int | None:
    if isinstance(value, float):
        return int(value) if value == value and abs(value) < 2 ** 62 else None
    try:
        return int(str(value).strip())  # pd.NA and None become "<NA>"/"None" and fail here
    except (TypeError, ValueError):
        return None


def killed_pids(tables) -> dict[int, str | None]:
    """Pids the kernel OOM killer killed (from `kernel_oom_kill` events, else textlog `host_oom` lines) -> host."""
    ev = tables.events
    out: dict[int, str | None] = {}
    if not len(ev):
        return out
    for kind, key in (("kernel_oom_kill", "pid"), ("host_oom", "pid")):
        sel = ev[ev["kind"] == kind]
        for attrs, host in zip(sel["details"], sel["host"]):
            pid = _as_int((attrs or {}).get(key))
            if pid is not None:
                out.setdefault(pid, host if isinstance(host, str) else None)
    return out


def sigkilled_pid_ranks(tables) -> dict[int, tuple[int, str | None]]:
    """Pids torchrun reports as exited with -9, mapped to (rank, host).

    ChildFailedError blocks (`torchrun_failure` events) give the global rank; an agent line `failed (exitcode: -9)
    local_rank: N (pid: P)` gives only the local rank, used when the event itself carries no rank and no summary
    block names that pid (on one node local and global ranks are the same; across nodes the summary block is the
    authority, so it wins).
    """
    ev = tables.events
    out: dict[int, tuple[int, str | None]] = {}
    if not len(ev):
        return out
    summary = ev[ev["kind"] == "torchrun_failure"]
    for attrs, host in zip(summary["details"], summary["host"]):
        attrs = attrs or {}
        pid, code, rank = _as_int(attrs.get("pid")), _as_int(attrs.get("exitcode")), _as_int(attrs.get("rank"))
        if pid is not None and code == -9 and rank is not None:
            out[pid] = (rank, host if isinstance(host, str) else None)
    agent = ev[ev["kind"] == "exit"]
    for attrs, row_rank, host in zip(agent["details"], agent["rank"], agent["host"]):
        attrs = attrs or {}
        pid, code = _as_int(attrs.get("pid")), _as_int(attrs.get("code"))
        if pid is None or code != -9 or pid in out:
            continue
        rank = _as_int(row_rank)  # pd.NA / NaN / None all become None
        if rank is None:
            rank = _as_int(attrs.get("local_rank"))
        if rank is not None:
            out[pid] = (rank, host if isinstance(host, str) else None)
    return out


def join_killed_pids(tables) -> dict[int, int]:
    """Kernel-OOM-killed pid -> rank, where torchrun reported that same pid exiting with -9 (hosts must agree if known)."""
    killed = killed_pids(tables)
    if not killed:
        return {}
    by_pid = sigkilled_pid_ranks(tables)
    out: dict[int, int] = {}
    for pid, khost in killed.items():
        hit = by_pid.get(pid)
        if hit is None:
            continue
        rank, thost = hit
        if khost and thost and khost != thost:
            continue  # pids repeat across machines: a different host is a different process
        out[pid] = rank
    return out

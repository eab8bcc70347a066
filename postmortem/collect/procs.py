"""The job's process tree from /proc: who is a descendant of the launched command, which are Python, which rank."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

# Per-process rank variables set by launchers: torchrun/DeepSpeed/accelerate set RANK; MPI and Slurm set their own.
# The launcher-level ones are trusted only when the job set them (a value inherited from the collector's own task is
# the node's task id, not a rank of the job's processes).
_LAUNCHER_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
_LOCAL_RANK_ARG = re.compile(r"^--local[_-]rank(?:=(\d+))?$")
_PY_EXE = re.compile(r"^(?:python|pypy)[\d.]*[dmu]?$")


@dataclass
class Proc:
    """One process of the job as read from /proc (a snapshot; fields are empty when unreadable)."""
    pid: int
    ppid: int
    state: str = "?"
    session: int = 0
    comm: str = ""
    cmdline: list[str] = field(default_factory=list)
    environ: dict[str, str] = field(default_factory=dict)
    cpu_s: float = 0.0
    rss_mib: float = 0.0
    is_python: bool = False
    depth: int = 0
    rank: int | None = None
    local_rank: int | None = None
    role: str = "proc"   # "rank", "child" (a subprocess of a rank: DataLoader worker...), "launcher", "proc"


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _read(path: str, limit: int = 1 << 20) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return b""


def read_stat(pid: int) -> Proc | None:
    """Parse /proc/<pid>/stat (None when the process is gone)."""
    raw = _read(f"/proc/{pid}/stat", 4096).decode("utf-8", "replace")
    if not raw:
        return None
    lp, rp = raw.find("("), raw.rfind(")")  # comm may contain spaces and parentheses
    if lp < 0 or rp < 0:
        return None
    rest = raw[rp + 2:].split()
    try:
        return Proc(pid=pid, ppid=int(rest[1]), state=rest[0], session=int(rest[3]), comm=raw[lp + 1:rp],
                    cpu_s=(int(rest[11]) + int(rest[12])) / _CLK_TCK, rss_mib=int(rest[21]) * _PAGE / 2 ** 20)
    except (IndexError, ValueError):
        return None


def _all_stats() -> dict[int, Proc]:
    out: dict[int, Proc] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if name.isdigit():
            p = read_stat(int(name))
            if p is not None:
                out[p.pid] = p
    return out


def job_processes(root_pid: int, collector_env: dict[str, str] | None = None, light: bool = False) -> list[Proc]:
    """The launched process and its descendants (and anything left in its session), in tree order with depth.

    `light`: command line and environment only (enough for ranks and roles), not whether each is Python (that reads
    the process's memory map): what the periodic rank census needs."""
    stats = _all_stats()
    if root_pid not in stats:
        return []
    children: dict[int, list[int]] = {}
    for p in stats.values():
        children.setdefault(p.ppid, []).append(p.pid)
    ordered: list[Proc] = []
    seen: set[int] = set()

    def walk(pid: int, depth: int) -> None:
        stack = [(pid, depth)]
        while stack:
            cur, d = stack.pop()
            if cur in seen or cur not in stats:
                continue
            seen.add(cur)
            stats[cur].depth = d
            ordered.append(stats[cur])
            for c in sorted(children.get(cur, ()), reverse=True):
                stack.append((c, d + 1))

    walk(root_pid, 0)
    # Orphans re-parented away from the tree (daemonised helpers) still share the job's session.
    for p in sorted(stats.values(), key=lambda p: p.pid):
        if p.session == root_pid and p.pid not in seen:
            walk(p.pid, 1)
    for p in ordered:
        _describe(p, light)
    _assign_roles(ordered, collector_env if collector_env is not None else dict(os.environ))
    return ordered


def _describe(p: Proc, light: bool = False) -> None:
    raw = _read(f"/proc/{p.pid}/cmdline")
    p.cmdline = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    env = {}
    for item in _read(f"/proc/{p.pid}/environ").split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    p.environ = env
    if light:
        return
    try:
        exe = os.path.basename(os.readlink(f"/proc/{p.pid}/exe"))
    except OSError:
        exe = os.path.basename(p.cmdline[0]) if p.cmdline else p.comm
    p.is_python = bool(_PY_EXE.match(exe)) or (p.state != "Z" and b"libpython" in _read(f"/proc/{p.pid}/maps", 4 << 20))
    if p.state == "Z":
        p.is_python = False


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None and value.strip() != "" else None
    except ValueError:
        return None


def _own_rank(p: Proc, collector_env: dict[str, str]) -> tuple[int | None, int | None]:
    rank = _int(p.environ.get("RANK"))
    if rank is None:
        for var in _LAUNCHER_RANK_VARS:
            value = p.environ.get(var)
            if value is not None and value != collector_env.get(var):
                rank = _int(value)
                if rank is not None:
                    break
    local = _int(p.environ.get("LOCAL_RANK"))
    if local is None:
        args = p.cmdline
        for i, arg in enumerate(args):
            m = _LOCAL_RANK_ARG.match(arg)
            if m:
                local = _int(m.group(1) if m.group(1) is not None else (args[i + 1] if i + 1 < len(args) else None))
                break
    return rank, local


def _assign_roles(ordered: list[Proc], collector_env: dict[str, str]) -> None:
    by_pid = {p.pid: p for p in ordered}
    for p in ordered:
        p.rank, p.local_rank = _own_rank(p, collector_env)
    launchers: set[int] = set()
    for p in ordered:
        # An ancestor whose rank differs from a descendant's started ranks: a launcher (torchrun agent, mpirun).
        if p.rank is None and p.local_rank is None:
            continue
        cur = by_pid.get(p.ppid)
        while cur is not None:
            if (cur.rank, cur.local_rank) != (p.rank, p.local_rank):
                launchers.add(cur.pid)
            cur = by_pid.get(cur.ppid)
    for p in ordered:  # tree order: a parent's role is known before its children's
        parent = by_pid.get(p.ppid)
        if p.pid in launchers:
            p.role, p.rank, p.local_rank = "launcher", None, None
        elif parent is not None and parent.role in ("rank", "child") and (p.rank, p.local_rank) == (
                parent.rank, parent.local_rank):
            p.role = "child"  # forked helpers (DataLoader workers) inherit the rank's environment
        elif p.rank is not None or p.local_rank is not None:
            p.role = "rank"


def dump_name(p: Proc) -> str:
    """File name stem of a process's dump: rank<N>_pid<P> so that the analyzer attributes the path to rank N."""
    if p.rank is not None:
        stem = f"rank{p.rank}_pid{p.pid}"
    elif p.local_rank is not None:
        stem = f"localrank{p.local_rank}_pid{p.pid}"  # no separator before 'rank': not read as a global rank
    else:
        stem = f"{p.role}_pid{p.pid}"
    if p.role == "child":
        stem += f"_child-of-{p.ppid}"
    return stem


def format_tree(procs: list[Proc], when: str) -> str:
    """A `ps --forest`-like listing of the job's processes with their rank and role."""
    lines = [f"# process tree of the job at {when}",
             "#    PID    PPID S  RANK LOCAL ROLE       CPU_S  RSS_MIB PY  COMMAND"]
    for p in procs:
        cmd = " ".join(p.cmdline) or f"[{p.comm}]"
        if len(cmd) > 400:
            cmd = cmd[:400] + " ..."
        rank = "-" if p.rank is None else str(p.rank)
        local = "-" if p.local_rank is None else str(p.local_rank)
        lines.append(f"{p.pid:8d} {p.ppid:7d} {p.state} {rank:>5} {local:>5} {p.role:8} {p.cpu_s:8.1f} "
                     f"{p.rss_mib:8.1f} {'y' if p.is_python else 'n':3} {'  ' * p.depth}{cmd}")
    return "\n".join(lines) + "\n"


MAX_CENSUS = 4096   # processes remembered by the rank census (a job that forks without end must not grow it)


class RankCensus:
    """Every process of the job that had a rank (or launched ranks), as seen by periodic looks at the process tree:
    pid, rank, local rank, role, parent and when it was first seen. The manifest keeps it, so that the analyzer can
    name the rank of a pid that a py-spy dump or torchrun's `local_rank: 0 (pid: 5205)` mentions."""

    def __init__(self) -> None:
        self.seen: dict[int, dict] = {}

    def look(self, root_pid: int, collector_env: dict[str, str] | None, when: str) -> None:
        """One look at the tree; processes already known keep their first record."""
        for p in job_processes(root_pid, collector_env, light=True):
            if p.pid in self.seen or len(self.seen) >= MAX_CENSUS:
                continue
            if p.role == "proc" and p.rank is None and p.local_rank is None:
                continue
            self.seen[p.pid] = {"pid": p.pid, "ppid": p.ppid, "rank": p.rank, "local_rank": p.local_rank,
                                "role": p.role, "first_seen": when}

    def records(self) -> list[dict]:
        """The processes seen, in pid order."""
        return [self.seen[pid] for pid in sorted(self.seen)]

"""py-spy dumps (text, incl. --locals/--native/--subprocesses, and --json) -> one `stacks` row per thread per process."""
from __future__ import annotations

import json
import re

from postmortem.parsers import learned_prefix
from postmortem.parsers.base import ParseResult, register
from postmortem import stacks as st
from postmortem.ingest import textio
from postmortem.ingest.discover import Source, path_hints

MAX_ROWS = 65_536            # stack rows kept per file (4,096 ranks x 16 threads)
MAX_LOCALS = 64              # locals kept per frame
MAX_REPR = 240               # characters kept of one local's repr
MAX_JSON_BYTES = 256 * 1024 ** 2

PROCESS_RE = re.compile(r"^Process (?P<pid>\d+): ?(?P<cmd>.*)$")
PARENT_RE = re.compile(r"^Parent Process (?P<pid>\d+): ?(?P<cmd>.*)$")
PYTHON_RE = re.compile(r"^Python v(?P<ver>\d+\.\d+[\w.+]*)(?: \((?P<exe>.*)\))?\s*$")
THREAD_RE = re.compile(r"^Thread (?P<tid>0x[0-9A-Fa-f]+|\d+) \((?P<status>idle|active\+gil|active|gil)\)"
                       r"(?:: \"(?P<name>.*)\")?\s*$")
FRAME_RE = re.compile(r"^(?P<indent>[ \t]+)(?P<func>\S.*?) \((?P<loc>[^()]*(?:\([^()]*\)[^()]*)*)\)\s*$")
HEADLESS_FRAME_RE = re.compile(r"^(?P<func>[\w.<>]+) +\((?P<loc>[\w./<> -]+\.pyx?:\d+)\)\s*(?:#.*)?$")
LOC_LINE_RE = re.compile(r"^(?P<file>.*):(?P<line>\d+)$")
LOCALS_HDR_RE = re.compile(r"^[ \t]+(?P<what>Arguments|Locals):\s*$")
LOCAL_RE = re.compile(r"^[ \t]+(?P<name>[A-Za-z_][\w.]*|\*\w+|<[^>]+>): (?P<repr>.*)$")
SEPARATOR_RE = re.compile(r"^-{20,}\s*$")
ERROR_RE = re.compile(r"^(?:Error: |Permission Denied: |py-spy: error)(?P<msg>.*)$")
BANNER_RANK_RE = re.compile(r"(?i)(?:^|[^\w-])(?:global[ _]?)?rank[ _:=#-]{0,3}(?P<r>\d{1,6})\b")
TAIL_BANNER_RE = re.compile(r"^==> (?P<path>.+) <==\s*$")

# Rank statements in a process command line (global first; local ranks are used when nothing global is said).
CMD_GLOBAL_RES = [re.compile(r"(?:^|\s)(?:RANK|OMPI_COMM_WORLD_RANK|PMI_RANK|PMIX_RANK|SLURM_PROCID)=(\d+)\b"),
                  re.compile(r"(?:^|\s)--(?:global[_-])?rank(?:=|\s+)(\d+)\b")]
CMD_LOCAL_RES = [re.compile(r"(?:^|\s)(?:LOCAL_RANK|OMPI_COMM_WORLD_LOCAL_RANK|SLURM_LOCALID)=(\d+)\b"),
                 re.compile(r"(?:^|\s)--local[_-]rank(?:=|\s+)(\d+)\b")]
LAUNCHER_CMD_RE = re.compile(r"(?:^|[\s/])(?:torchrun|torch\.distributed\.(?:run|launch)|deepspeed(?:\.launcher\S*)?"
                             r"|accelerate(?:-launch| launch)|mpirun|mpiexec|srun)(?:\s|$)|-mtorch\.distributed\.(?:run|launch)")
LOCAL_GLOBAL_NAMES = ("rank", "global_rank", "world_rank")
LOCAL_LOCAL_NAMES = ("local_rank",)


def stack_row(source: Source, line: int | None, rank, pid, thread, thread_name, active, owns_gil,
              frames: list[dict], dump: str, host=None) -> dict:
    """One `stacks` row with its signature computed (shared by every stack parser)."""
    return {"source": source.source, "line": line, "rank": rank, "host": host or source.host, "ts": None,
            "pid": pid, "thread": thread, "thread_name": thread_name, "active": active, "owns_gil": owns_gil,
            "frames": frames, "signature": st.signature(frames), "dump": dump}


def _status(status: str | None) -> tuple[bool | None, bool | None]:
    if status == "idle":
        return False, False
    if status == "active":
        return True, False
    if status in ("active+gil", "gil"):
        return True, True
    return None, None


def cmdline_rank(cmd: str | None) -> tuple[int | None, int | None]:
    """(global rank, local rank) stated in a command line (`RANK=3`, `--local_rank=3`), else None."""
    if not cmd:
        return None, None
    g = l = None
    for rx in CMD_GLOBAL_RES:
        m = rx.search(cmd)
        if m:
            g = int(m.group(1))
            break
    for rx in CMD_LOCAL_RES:
        m = rx.search(cmd)
        if m:
            l = int(m.group(1))
            break
    return g, l


def _locals_rank(threads: list[dict]) -> tuple[int | None, int | None]:
    """A rank stated by `rank`/`local_rank` locals of a process's frames, when all such locals agree."""
    found: dict[str, set] = {"g": set(), "l": set()}
    for t in threads:
        for fr in t["frames"]:
            loc = fr.get("locals")
            if not loc:
                continue
            for name, rep in loc.items():
                key = "g" if name in LOCAL_GLOBAL_NAMES else "l" if name in LOCAL_LOCAL_NAMES else None
                if key and re.fullmatch(r"\d{1,6}", rep.strip()):
                    found[key].add(int(rep.strip()))
    g = next(iter(found["g"])) if len(found["g"]) == 1 else None
    l = next(iter(found["l"])) if len(found["l"]) == 1 else None
    return g, l


def _is_launcher_process(proc: dict) -> bool:
    if LAUNCHER_CMD_RE.search(proc.get("cmd") or ""):
        return True
    return any(st.is_launcher(t["frames"][-8:]) for t in proc["threads"])


def assign_ranks(procs: list[dict], source: Source) -> None:
    """Give each dumped process a rank: a banner or `RANK=`/`--rank` in its command line, then the path's rank
    (files of one process), then `rank` locals, then local-rank statements; children inherit their parent's rank
    unless the parent is a launcher; launchers themselves get none."""
    by_pid = {p["pid"]: p for p in procs if p.get("pid") is not None}
    for p in procs:
        p["launcher"] = _is_launcher_process(p)
        g, l = cmdline_rank(p.get("cmd"))
        lg, ll = _locals_rank(p["threads"])
        p["own_rank"] = next((r for r in (p.get("banner_rank"), g) if r is not None), None)
        p["locals_rank"] = lg
        p["own_local"] = next((r for r in (l, ll) if r is not None), None)
    tops = [p for p in procs if not p["launcher"] and (p.get("ppid") not in by_pid or by_pid[p["ppid"]]["launcher"])]
    top_pids = {p.get("pid") for p in tops}  # several dumps of one process over time are one top process
    top_ids = {id(p) for p in tops}
    path_rank = source.rank
    path_local = source.local_rank
    for p in procs:
        if p["launcher"]:
            p["rank"] = None
            continue
        rank = p["own_rank"]
        if rank is None and path_rank is not None and len(top_pids) == 1 and id(p) in top_ids:
            rank = path_rank
        if rank is None:
            rank = p["locals_rank"]
        if rank is None:
            rank = p["own_local"]
        if rank is None and path_local is not None and len(top_pids) == 1 and id(p) in top_ids:
            rank = path_local
        p["rank"] = rank
    # children (DataLoader workers, fork children) inherit their parent's rank unless they state their own
    for _ in range(8):
        changed = False
        for p in procs:
            if p["rank"] is None and not p["launcher"] and p.get("ppid") in by_pid:
                parent = by_pid[p["ppid"]]
                if not parent["launcher"] and parent.get("rank") is not None:
                    p["rank"] = parent["rank"]
                    changed = True
        if not changed:
            break


def emit_processes(result: ParseResult, source: Source, procs: list[dict]) -> None:
    """Rank the processes and add one `stacks` row per thread (procs: pid, cmd, ppid, line, threads[...])."""
    assign_ranks(procs, source)
    rows = dropped = deep = 0
    for p in procs:
        dump = f"{source.source}:{p['pid'] if p.get('pid') is not None else '?'}@{p['line']}"
        for t in p["threads"]:
            if rows >= MAX_ROWS:
                dropped += 1
                continue
            frames, cut = st.cap_frames(t["frames"])
            deep += bool(cut)
            active, gil = _status(t.get("status"))
            result.add("stacks", stack_row(source, t["line"], p["rank"], p.get("pid"), t["tid"], t.get("name"),
                                           active, gil, frames, dump))
            rows += 1
    if dropped:
        result.problems.append(f"more than {MAX_ROWS} threads; {dropped} thread stacks not kept")
    if deep:
        result.problems.append(f"{deep} stack(s) deeper than {st.MAX_FRAMES} frames: middle frames dropped")
    versions = sorted({p["python"] for p in procs if p.get("python")})
    if versions:
        result.meta["python_versions"] = versions


class _TextState:
    """Line-by-line state machine over py-spy text output."""

    def __init__(self):
        self.procs: list[dict] = []
        self.proc: dict | None = None
        self.thread: dict | None = None
        self.frame_indent: int | None = None
        self.in_locals = False
        self.cmd_open = False
        self.banner_rank: int | None = None
        self.banner_line = -10
        self.threads_total = 0
        self.errors: list[str] = []

    def _new_proc(self, lineno: int, pid: int | None, cmd: str | None) -> dict:
        proc = {"pid": pid, "cmd": cmd, "line": lineno, "threads": [], "tids": set(), "ppid": None, "python": None,
                "banner_rank": self.banner_rank if lineno - self.banner_line <= 3 else None}
        self.banner_rank = None
        self.procs.append(proc)
        self.proc, self.thread = proc, None
        return proc

    def feed(self, lineno: int, line: str) -> None:
        if not line or line.isspace():  # (what `not line.strip()` says, without the copy)
            self.cmd_open = False
            return
        if line[0] not in " \t":
            self._top_level(lineno, line.rstrip())
            return
        if self.cmd_open and self.proc is not None and not self.proc["threads"]:
            # a terminal-wrapped command line (pasted from a narrow terminal)
            self.proc["cmd"] = (self.proc["cmd"] or "") + line.strip()
            return
        if self.thread is None:
            if HEADLESS_FRAME_RE.match(line.strip()):
                self._top_level(lineno, line.strip())
            return
        if len(self.thread["frames"]) >= 4096:
            return  # hostile depth: stop collecting, cap_frames trims later
        self._indented(line.rstrip())

    def _top_level(self, lineno: int, line: str) -> None:
        self.in_locals = False
        m = THREAD_RE.match(line)
        if m:
            self.cmd_open = False
            if self.proc is None:
                self._new_proc(lineno, None, None)
            self.threads_total += 1
            if self.threads_total > MAX_ROWS:
                self.thread = None
                return
            tid = m.group("tid")
            tid = "0x" + tid[2:].upper() if tid.startswith("0x") else tid
            if tid in self.proc["tids"]:
                # the same thread again without a Process header: a second, later dump of the process
                self._new_proc(lineno, self.proc["pid"], self.proc["cmd"])
            self.proc["tids"].add(tid)
            self.thread = {"tid": tid, "status": m.group("status"),
                           "name": m.group("name"), "line": lineno, "frames": []}
            self.frame_indent = None
            self.proc["threads"].append(self.thread)
            return
        m = PROCESS_RE.match(line)
        if m:
            self._new_proc(lineno, int(m.group("pid")), m.group("cmd"))
            self.cmd_open = True
            return
        m = PYTHON_RE.match(line)
        if m and self.proc is not None:
            self.cmd_open = False
            self.proc["python"] = m.group("ver")
            return
        m = PARENT_RE.match(line)
        if m and self.proc is not None:
            self.cmd_open = False
            self.proc["ppid"] = int(m.group("pid"))
            return
        hm = HEADLESS_FRAME_RE.match(line)
        if hm and (self.thread is None or self.thread.get("headless")) and not self.cmd_open:
            # frames pasted without their Process/Thread header: one stack of an unnamed thread
            if self.thread is None:
                if self.proc is None:
                    self._new_proc(lineno, None, None)
                self.thread = {"tid": f"headless-{lineno}", "status": None, "name": None, "line": lineno,
                               "frames": [], "headless": True}
                self.proc["threads"].append(self.thread)
                self.threads_total += 1
            self.thread["frames"].append(parse_frame(hm.group("func"), hm.group("loc")))
            return
        self.thread = None
        if self.cmd_open and self.proc is not None and not self.proc["threads"] and len(line) < 4096:
            self.proc["cmd"] = (self.proc["cmd"] or "") + line.strip()  # wrapped command line, flush left
            return
        self.cmd_open = False
        if SEPARATOR_RE.match(line):
            self.proc = None
            return
        m = ERROR_RE.match(line)
        if m:
            if len(self.errors) < 20:
                self.errors.append(line.strip()[:300])
            return
        m = TAIL_BANNER_RE.match(line)
        hint = path_hints(m.group("path")).get("rank") if m else None
        if hint is None and len(line) <= 120 and len(line.split()) <= 10:
            bm = BANNER_RANK_RE.search(line)
            hint = int(bm.group("r")) if bm else None
        if hint is not None:
            self.banner_rank, self.banner_line = hint, lineno
            self.proc = None  # a banner announces the next dump

    def _indented(self, line: str) -> None:
        indent = len(line) - len(line.lstrip())
        if self.frame_indent is not None and indent > self.frame_indent + 1:
            if LOCALS_HDR_RE.match(line):
                self.in_locals = True
                return
            if self.in_locals:
                lm = LOCAL_RE.match(line)
                frames = self.thread["frames"]
                if lm and frames:
                    loc = frames[-1].setdefault("locals", {})
                    if len(loc) < MAX_LOCALS:
                        loc[lm.group("name")] = lm.group("repr")[:MAX_REPR]
                return
        m = FRAME_RE.match(line)
        if not m:
            return
        if self.frame_indent is None:
            self.frame_indent = indent
        elif indent > self.frame_indent + 1:
            return  # a continuation or a local we could not read, not a frame
        self.in_locals = False
        self.thread["frames"].append(parse_frame(m.group("func"), m.group("loc")))


def parse_frame(func: str, loc: str) -> dict:
    """A frame from py-spy's `func (file:line)` / native `func (lib.so)` text."""
    if "\n" not in loc:  # LOC_LINE_RE without the regex: the last colon, then decimal digits to the end
        file, colon, num = loc.rpartition(":")
        if colon and num.isdecimal():
            return {"func": func, "file": file, "line": int(num)}
    else:
        lm = LOC_LINE_RE.match(loc)
        if lm:
            return {"func": func, "file": lm.group("file"), "line": int(lm.group("line"))}
    frame = {"func": func, "file": loc, "line": None}
    if not loc.endswith((".py", ".pyx", ">")):
        frame["native"] = True
    return frame


@register("pyspy")
def parse_pyspy_text(source: Source) -> ParseResult:
    """py-spy `dump` text: processes (with --subprocesses children), threads, frames, locals; errors -> problems."""
    result = ParseResult()
    stats = textio.ReadStats()
    state = _TextState()
    for lineno, line in learned_prefix.strip_stream(textio.iter_lines(source.path, stats)):
        state.feed(lineno, line)
    procs = [p for p in state.procs if p["threads"] or p.get("pid") is not None]
    for p in procs:
        if p.get("pid") is None:  # headless excerpt: on Linux the main thread's OS tid is the pid
            main = [t["tid"] for t in p["threads"] if t.get("name") == "MainThread" and t["tid"].isdigit()]
            if len(main) == 1:
                p["pid"] = int(main[0])
    emit_processes(result, source, procs)
    if state.threads_total > MAX_ROWS:
        result.problems.append(f"more than {MAX_ROWS} threads; {state.threads_total - MAX_ROWS} thread stacks not kept")
    for err in state.errors:
        result.problems.append(f"py-spy reported an error: {err}")
    if not any(p["threads"] for p in procs) and not state.errors:
        result.problems.append("no py-spy thread stacks found")
    result.lines, result.bytes = stats.lines, stats.bytes
    result.problems.extend(stats.problems)
    return result


# ---------------------------------------------------------------------------------------------------------------
# --json

def _json_values(text: str, problems: list[str]) -> list:
    """Top-level JSON values in a text (one array, or several concatenated); salvage the complete threads of a
    truncated array."""
    dec = json.JSONDecoder()
    values: list = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i >= n:
            break
        try:
            value, i = dec.raw_decode(text, i)
            values.append(value)
            continue
        except ValueError:
            pass
        if text[i] == "[":  # truncated array: decode element by element
            i += 1
            salvaged = []
            while i < n:
                while i < n and text[i] in " \t\r\n,":
                    i += 1
                if i >= n or text[i] == "]":
                    break
                try:
                    value, i = dec.raw_decode(text, i)
                except ValueError:
                    break
                salvaged.append(value)
            problems.append(f"truncated or invalid JSON: {len(salvaged)} complete thread object(s) recovered")
            values.append(salvaged)
        else:
            problems.append(f"invalid JSON at character {i}; rest ignored")
        break
    return values


def _json_frame(obj) -> dict | None:
    if not isinstance(obj, dict):
        return None
    name = obj.get("name")
    short = obj.get("short_filename") or obj.get("filename")
    line = obj.get("line")
    line = line if isinstance(line, int) and not isinstance(line, bool) and line > 0 else None
    frame = {"func": str(name) if name is not None else "?", "file": str(short) if short is not None else None,
             "line": line}
    fname = str(obj.get("filename") or short or "")
    if line is None and not fname.endswith((".py", ".pyx", ">")) and fname:
        frame["native"] = True
    locs = obj.get("locals")
    if isinstance(locs, list) and locs:
        d = {}
        for loc in locs[:MAX_LOCALS]:
            if isinstance(loc, dict) and isinstance(loc.get("name"), str):
                rep = loc.get("repr")
                d[loc["name"]] = (str(rep) if rep is not None else "")[:MAX_REPR]
        if d:
            frame["locals"] = d
    return frame


@register("pyspy_json")
def parse_pyspy_json(source: Source) -> ParseResult:
    """py-spy `dump --json`: an array of thread objects (one process); concatenated arrays are separate dumps."""
    result = ParseResult()
    stats = textio.ReadStats()
    try:
        data = textio.read_bounded(source.path, MAX_JSON_BYTES, stats)
    except textio.InputProblem as exc:
        result.problems.append(str(exc))
        return result
    text = data.decode("utf-8", "replace")
    result.lines, result.bytes = textio.line_count(text), stats.bytes
    values = _json_values(text, result.problems)
    procs: list[dict] = []
    bad = 0
    for vi, value in enumerate(values):
        threads = value if isinstance(value, list) else [value]
        by_pid: dict = {}
        for obj in threads:
            if not isinstance(obj, dict) or not isinstance(obj.get("frames", []), list):
                bad += 1
                continue
            pid = obj.get("pid") if isinstance(obj.get("pid"), int) else None
            proc = by_pid.get(pid)
            if proc is None:
                info = obj.get("process_info") if isinstance(obj.get("process_info"), dict) else {}
                parent = info.get("parent") if isinstance(info.get("parent"), dict) else {}
                proc = {"pid": pid, "cmd": str(info.get("command_line") or "") or None, "line": vi + 1,
                        "threads": [], "ppid": parent.get("pid") if isinstance(parent.get("pid"), int) else None,
                        "python": None}
                by_pid[pid] = proc
                procs.append(proc)
            if sum(len(p["threads"]) for p in procs) >= MAX_ROWS:
                bad += 1
                continue
            frames = [f for f in (_json_frame(x) for x in (obj.get("frames") or [])[:4096]) if f]
            os_tid, tid = obj.get("os_thread_id"), obj.get("thread_id")
            if isinstance(os_tid, int) and not isinstance(os_tid, bool):
                thread = str(os_tid)
            elif isinstance(tid, int) and not isinstance(tid, bool):
                thread = f"0x{tid:X}"
            else:
                thread = None
            name = obj.get("thread_name")
            active, gil = obj.get("active"), obj.get("owns_gil")
            status = "active+gil" if active is True and gil is True else "active" if active is True else \
                "idle" if active is False else None
            proc["threads"].append({"tid": thread, "status": status, "name": str(name) if name is not None else None,
                                    "line": 1, "frames": frames})
    if bad:
        result.problems.append(f"{bad} JSON value(s) that are not py-spy thread objects ignored")
    # py-spy's JSON lists threads in internal order; put the main thread first like the text dump.
    for p in procs:
        p["threads"].sort(key=lambda t: 0 if t["name"] == "MainThread" or t["tid"] == str(p["pid"]) else 1)
    emit_processes(result, source, procs)
    if not procs and not result.problems:
        result.problems.append("no py-spy thread stacks found")
    result.problems.extend(stats.problems)
    return result

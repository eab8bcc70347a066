"""Other Python stack dumps found as text: gdb `bt`/`py-bt`, `hanging_threads`, faulthandler -> `stacks` rows."""
from __future__ import annotations

import re

from parsers.base import ParseResult, register
from parsers.prefixes import strip_prefixes
from parsers.pyspy import MAX_ROWS, emit_processes
from postmortem import textio
from postmortem.discover import Source

MAX_FRAMES_COLLECTED = 4096
PREFILTER = b"(most recent call first):"
_CHUNK = 4 * 1024 * 1024

# faulthandler (all Python versions; `[name]` from 3.14) and py-bt's traceback style
FH_HEADER_RE = re.compile(r"^(?P<cur>Current thread|Thread) (?P<tid>0x[0-9a-fA-F]+)(?: \[(?P<name>[^\]]*)\])?"
                          r" \(most recent call first\):\s*$")
FH_STACK_RE = re.compile(r"^(?:Stack|Traceback) \(most recent call first\):\s*$")
FH_CSTACK_RE = re.compile(r"^Current thread's C stack trace \(most recent call first\):\s*$")
FILE_FRAME_RE = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+|\?+),? in (?P<func>.+?)\s*$')
BINARY_FRAME_RE = re.compile(r'^\s+Binary file "(?P<file>[^"]*)"(?:, at (?P<func>[^+\s\[]+)(?:\+0x[0-9a-fA-F]+)?)?'
                             r'\s*\[(?P<addr>0x[0-9a-fA-F]+)\]')
FH_FILLER_RE = re.compile(r"^\s+(?:<no Python frame>|\.\.\.|<truncated rest of calls>|<cannot get C stack[^>]*>|"
                          r"<built-in [^>]*>?|<method-wrapper [^>]*>?|\((?:frame information optimized out|"
                          r"unable to read python frame information)\)|Waiting for the GIL|Garbage-collecting)")
FH_CONTEXT_RE = re.compile(r"^(?:Fatal Python error: |Timeout \(\d+:\d\d:\d\d(?:\.\d+)?\)!)")
# hanging_threads
HANG_HEADER_RE = re.compile(r"^\s*-{3,}\s*Thread (?P<tid>\d+)(?: \"?(?P<name>[^\"]*?)\"?)? hangs\s*-{3,}\s*$")
# gdb
GDB_PROMPT_RE = re.compile(r"^\(gdb\)\s*(?P<cmd>.*)$")
GDB_THREAD_HDR_RE = re.compile(r"^Thread (?P<num>\d+) \((?:Thread 0x[0-9a-fA-F]+ \(LWP (?P<lwp>\d+)\)|LWP (?P<lwp2>\d+)|"
                               r"process (?P<proc>\d+))\)(?: \"(?P<name>[^\"]*)\")?:\s*$")
GDB_SWITCH_RE = re.compile(r"^\[(?:Switching to|Current thread is) (?:thread )?(?P<num>\d+)?\s*\(?(?:Thread 0x[0-9a-fA-F]+ "
                           r"\(LWP (?P<lwp>\d+)\)|LWP (?P<lwp2>\d+))")
GDB_ATTACH_RE = re.compile(r"(?:Attaching to (?:process |program: \S+, process )|gdb (?:-p|--pid[= ])\s*|^\(gdb\) attach )"
                           r"(?P<pid>\d+)")
PYBT_NUM_RE = re.compile(r"^#(?P<n>\d+) Frame 0x[0-9a-fA-F]+, for file (?P<file>.+?), line (?P<line>\d+), "
                         r"in (?P<func>[^\s(]+)")
PYBT_OTHER_RE = re.compile(r"^#(?P<n>\d+) (?:<built-in|<method-wrapper|\(unable to read|\(frame information|Waiting for|"
                           r"Garbage-collecting)")
NATIVE_RE = re.compile(r"^#(?P<n>\d+)\s+(?:(?P<addr>0x[0-9a-fA-F]+) in )?(?P<rest>.*?)\s*$")
NATIVE_FROM_RE = re.compile(r"\s+from (?P<lib>\S+)$")
NATIVE_AT_RE = re.compile(r"\s+at (?P<file>\S+?):(?P<line>\d+)$")
CONT_FROM_RE = re.compile(r"^\s+from (?P<lib>\S+)\s*$")
CONT_AT_RE = re.compile(r"^\s+at (?P<file>\S+?):(?P<line>\d+)\s*$")
INTERP_RE = re.compile(r"^(?:_?PyEval_|_PyFunction_|_PyObject_|PyObject_|cfunction_|method_vectorcall|slot_tp_|"
                       r"call_function|function_code_fastcall|_PyEval_Vector|PyRun_|pymain_|Py_RunMain|Py_BytesMain)")


class _Collector:
    """Builds processes -> threads -> frames from any of the supported dump styles, one line at a time."""

    def __init__(self, rank_log: bool = False):
        self.rank_log = rank_log
        self.procs: list[dict] = []
        self.open: dict = {}          # key (prefix rank) -> open text block
        self.cur_proc: dict = {}      # key -> process receiving blocks
        self.last_end: dict = {}      # key -> line where the last block ended
        self.threads = 0
        self.truncated = 0
        # gdb state
        self.gdb_pid: int | None = None
        self.gdb_threads: dict = {}      # thread key (LWP) -> {"tid","name","line","nums": {n: frame},"py": [...]}
        self.gdb_cur = None
        self.gdb_last_n: int | None = None

    # -- processes / rows
    def _proc_for(self, key, lineno: int, tid, pid=None, rank=None) -> dict:
        proc = self.cur_proc.get(key)
        near = lineno - self.last_end.get(key, -100) <= 3
        if proc is None or not near or tid in proc["tids"] or (pid is not None and proc["pid"] != pid):
            proc = {"pid": pid, "cmd": None, "line": lineno, "threads": [], "tids": set(), "ppid": None,
                    "python": None, "banner_rank": rank}
            self.procs.append(proc)
            self.cur_proc[key] = proc
        return proc

    def _add_thread(self, proc: dict, thread: dict) -> None:
        self.threads += 1
        if self.threads > MAX_ROWS:
            return
        proc["threads"].append(thread)
        proc["tids"].add(thread["tid"])

    # -- text blocks (faulthandler, py-bt traceback style, hanging_threads)
    def _close(self, key, lineno: int) -> None:
        blk = self.open.pop(key, None)
        if blk is None:
            return
        self.last_end[key] = lineno
        frames = blk["frames"]
        if blk["style"] == "hang":
            frames.reverse()  # hanging_threads prints outermost first, like a traceback
        if blk["style"] == "cstack":
            target = blk.get("attach")
            if target is not None:
                target["frames"] = splice(frames, target["frames"])
            return
        if blk["style"] == "pybt" and blk.get("gdb") and not self.rank_log:
            entry = self._gdb_entry(blk["line"])
            if not entry["py"]:
                entry["py"] = frames
            return
        proc = self._proc_for(key, blk["line"], blk["tid"], rank=blk.get("rank"))
        self._add_thread(proc, {"tid": blk["tid"], "name": blk["name"], "status": blk.get("status"),
                                "line": blk["line"], "frames": frames, "current": blk.get("current")})

    def _open(self, key, lineno: int, style: str, tid, name, rank, status=None, current=False) -> dict:
        self._close(key, lineno)
        blk = {"style": style, "tid": tid, "name": name, "line": lineno, "frames": [], "rank": rank,
               "status": status, "current": current, "last_was_frame": False}
        self.open[key] = blk
        return blk

    def feed(self, lineno: int, raw: str) -> None:
        if self.rank_log and not self.open and "most recent call first" not in raw:
            return
        line, info = strip_prefixes(raw) if raw[:1] in "[(sS0123456789JFMASOND" else (raw, {})
        rank = info.get("rank", info.get("local_rank"))
        key = rank
        blk = self.open.get(key)
        stripped = line.strip()
        if not stripped:
            if blk is not None and blk["style"] != "hang":
                self._close(key, lineno)
            return
        if "(most recent call first)" in line:
            m = FH_HEADER_RE.match(stripped)
            if m:
                current = m.group("cur") == "Current thread"
                self._open(key, lineno, "fh", m.group("tid").lower(), m.group("name"), rank,
                           status="active" if current else None, current=current)
                return
            if FH_CSTACK_RE.match(stripped):
                target = None
                proc = self.cur_proc.get(key)
                if proc is not None:
                    cur = [t for t in proc["threads"] if t.get("current")]
                    target = cur[-1] if cur else None
                self._open(key, lineno, "cstack", None, None, rank)["attach"] = target
                return
            if FH_STACK_RE.match(stripped):
                style = "pybt" if stripped.startswith("Traceback") else "fh"
                if style == "pybt" and not self.rank_log and (self.gdb_threads or self.gdb_cur is not None
                                                              or self.gdb_pid is not None):
                    self._open(key, lineno, "pybt", self.gdb_cur, None, rank)["gdb"] = True
                else:
                    self._open(key, lineno, style, None, None, rank)
                return
        if self.rank_log:
            if blk is not None:
                self._block_line(key, blk, line, lineno)
            return
        if blk is not None and self._block_line(key, blk, line, lineno):
            return
        if "hangs" in line:
            m = HANG_HEADER_RE.match(line)
            if m:
                self._open(key, lineno, "hang", m.group("tid"), m.group("name") or None, rank)
                return
        if FH_CONTEXT_RE.match(stripped):
            self.last_end.pop(key, None)  # a new fatal error / timeout report starts a new dump
            self.cur_proc.pop(key, None)
            return
        self._gdb_line(lineno, line)

    def _block_line(self, key, blk: dict, line: str, lineno: int) -> bool:
        """Consume a line of an open block; False (and the block closed) when the line is not part of it."""
        if len(blk["frames"]) >= MAX_FRAMES_COLLECTED:
            self.truncated += 1
            return True
        m = FILE_FRAME_RE.match(line)
        if m:
            ln = m.group("line")
            blk["frames"].append({"func": m.group("func"), "file": m.group("file"),
                                  "line": int(ln) if ln.isdigit() else None})
            blk["last_was_frame"] = True
            return True
        m = BINARY_FRAME_RE.match(line)
        if m:
            blk["frames"].append({"func": m.group("func") or m.group("addr"), "file": m.group("file"), "line": None,
                                  "native": True})
            return True
        if FH_FILLER_RE.match(line):
            blk["last_was_frame"] = False
            return True
        if line[:1] in " \t" and blk["style"] in ("hang", "pybt") and blk["last_was_frame"]:
            blk["last_was_frame"] = False  # the source line printed under a frame
            return True
        self._close(key, lineno)
        return False

    # -- gdb sessions: one attached process is stopped for the whole session, so every `bt`/`py-bt` of a thread
    # describes the same moment; frames are merged per thread by gdb frame number (py-bt's Python frame wins).
    def _gdb_entry(self, lineno: int) -> dict:
        key = self.gdb_cur
        entry = self.gdb_threads.get(key)
        if entry is None:
            entry = {"tid": key, "name": None, "line": lineno, "nums": {}, "py": []}
            self.gdb_threads[key] = entry
        return entry

    def _gdb_flush(self) -> None:
        """Emit the threads of the current gdb session as one dump."""
        if not self.gdb_threads:
            return
        proc = {"pid": self.gdb_pid, "cmd": None, "line": None, "threads": [], "tids": set(), "ppid": None,
                "python": None, "banner_rank": None}
        for entry in self.gdb_threads.values():
            frames = [entry["nums"][n] for n in sorted(entry["nums"])]
            if entry["py"]:
                frames = splice(frames, entry["py"])
            if not frames:
                continue
            proc["line"] = proc["line"] or entry["line"]
            self._add_thread(proc, {"tid": entry["tid"], "name": entry["name"], "status": None,
                                    "line": entry["line"], "frames": frames[:MAX_FRAMES_COLLECTED]})
        if proc["threads"]:
            self.procs.append(proc)
        self.gdb_threads, self.gdb_cur = {}, None

    def _gdb_set_thread(self, lineno: int, num, lwp, name) -> None:
        self.gdb_cur = lwp or (f"gdb{num}" if num else None)
        entry = self._gdb_entry(lineno)
        if name and not entry["name"]:
            entry["name"] = name

    def _gdb_line(self, lineno: int, line: str) -> None:
        s = line.strip()
        if s.startswith("#"):
            m = PYBT_NUM_RE.match(s)
            if m:
                self._gdb_frame(lineno, int(m.group("n")), {"func": m.group("func"), "file": m.group("file"),
                                                            "line": int(m.group("line"))})
                return
            if PYBT_OTHER_RE.match(s):
                return
            m = NATIVE_RE.match(s)
            if m:
                frame = parse_native(m.group("rest"))
                if frame is not None:
                    self._gdb_frame(lineno, int(m.group("n")), frame)
            return
        m = CONT_FROM_RE.match(line) or CONT_AT_RE.match(line)
        if m:
            entry = self.gdb_threads.get(self.gdb_cur)
            last = entry["nums"].get(self.gdb_last_n) if entry else None
            if last is not None and last.get("native"):
                if "lib" in m.groupdict():
                    last["file"] = m.group("lib")
                else:
                    last["file"], last["line"] = m.group("file"), int(m.group("line"))
            return
        m = GDB_THREAD_HDR_RE.match(s)
        if m:
            self._gdb_set_thread(lineno, m.group("num"), m.group("lwp") or m.group("lwp2") or m.group("proc"),
                                 m.group("name"))
            return
        m = GDB_SWITCH_RE.match(s)
        if m:
            self._gdb_set_thread(lineno, m.group("num"), m.group("lwp") or m.group("lwp2"), None)
            return
        m = GDB_ATTACH_RE.search(s)
        if m:
            self._gdb_flush()  # a new attach: a new process or a later moment
            self.gdb_pid = int(m.group("pid"))

    def _gdb_frame(self, lineno: int, n: int, frame: dict) -> None:
        entry = self._gdb_entry(lineno)
        nums = entry["nums"]
        if len(nums) >= MAX_FRAMES_COLLECTED:
            return
        if not frame.get("native"):
            nums[n] = frame          # py-bt's view of an interpreter frame replaces the C frame
        elif n not in nums:
            nums[n] = frame
        self.gdb_last_n = n

    def finish(self, lineno: int) -> list[dict]:
        for key in list(self.open):
            self._close(key, lineno + 1)
        self._gdb_flush()
        return [p for p in self.procs if p["threads"]]


def parse_native(rest: str) -> dict | None:
    """A gdb native frame from the text after `#N  0x... in `: `func (args) at file:line` / `?? () from lib`."""
    if not rest or rest.startswith("0x") and " " not in rest:
        return None  # cut off after the address
    frame: dict = {"func": None, "file": None, "line": None, "native": True}
    m = NATIVE_FROM_RE.search(rest)
    if m:
        frame["file"] = m.group("lib")
        rest = rest[:m.start()]
    m = NATIVE_AT_RE.search(rest)
    if m:
        frame["file"], frame["line"] = m.group("file"), int(m.group("line"))
        rest = rest[:m.start()]
    func = rest.split(" (", 1)[0] if " (" in rest else rest.split("(", 1)[0]
    func = func.strip()
    if not func:
        return None
    frame["func"] = func
    return frame


def splice(native: list[dict], python: list[dict]) -> list[dict]:
    """Native frames above the interpreter (innermost first), then the Python frames; the interpreter's own
    frames below are dropped since the Python frames say the same, better."""
    top = []
    for fr in native:
        if INTERP_RE.match(fr.get("func") or ""):
            break
        top.append(fr)
    return top + python


def _procs_rows(result: ParseResult, source: Source, col: _Collector, last_line: int) -> None:
    procs = col.finish(last_line)
    emit_processes(result, source, procs)
    if col.threads > MAX_ROWS:
        result.problems.append(f"more than {MAX_ROWS} thread stacks; {col.threads - MAX_ROWS} not kept")
    if col.truncated:
        result.problems.append(f"{col.truncated} frame line(s) beyond {MAX_FRAMES_COLLECTED} per stack ignored")


@register("stack_dump")
def parse_stack_dump(source: Source) -> ParseResult:
    """gdb `bt`/`py-bt` sessions, `hanging_threads` reports and faulthandler dumps -> stacks rows."""
    result = ParseResult()
    stats = textio.ReadStats()
    col = _Collector()
    last = 0
    for lineno, line in textio.iter_lines(source.path, stats):
        last = lineno
        col.feed(lineno, line)
    _procs_rows(result, source, col, last)
    if not result.rows.get("stacks"):
        result.problems.append("no thread stacks found")
    result.lines, result.bytes = stats.lines, stats.bytes
    result.problems.extend(stats.problems)
    return result


def _first_hit_line(path: str) -> int | None:
    """1-based line of the first faulthandler header, found by a raw byte scan (None when there is none)."""
    lines_before = 0
    tail = b""
    try:
        with textio.open_binary(path) as fh:
            while True:
                chunk = fh.read(_CHUNK)
                if not chunk:
                    return None
                buf = tail + chunk
                i = buf.find(PREFILTER)
                if i >= 0:
                    return lines_before + buf.count(b"\n", 0, i) + 1
                keep = len(PREFILTER)
                lines_before += buf.count(b"\n", 0, len(buf) - keep)
                tail = buf[-keep:]
    except OSError:
        return None


@register("rank_log")
def parse_rank_log_faulthandler(source: Source) -> ParseResult:
    """Faulthandler dumps inside ordinary rank logs (PYTHONFAULTHANDLER=1, dump_traceback_later)."""
    result = ParseResult()
    first = _first_hit_line(source.path)
    if first is None:
        return result
    stats = textio.ReadStats()
    col = _Collector(rank_log=True)
    last = 0
    for lineno, line in textio.iter_lines(source.path, stats):
        last = lineno
        if lineno < first:
            continue
        if "\r" in line:  # a dump glued to a progress bar: every segment is a line of its own
            for seg in line.split("\r"):
                col.feed(lineno, seg)
        else:
            col.feed(lineno, line)
    _procs_rows(result, source, col, last)
    result.lines, result.bytes = stats.lines, stats.bytes
    return result

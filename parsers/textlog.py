"""Line-oriented text logs (rank logs, consoles, NCCL debug files, dmesg): events, tracebacks, steps, NCCL lines."""
from __future__ import annotations

import collections
import functools
import json
import re
import zlib

import regex

from parsers import formats as fmts
from parsers import prefilter
from parsers.base import ParseResult, register
from parsers import actor_ranks, embedded, learned_prefix, rich_wrap, spawn_block
from parsers.prefixes import strip_prefixes
from parsers.steps import parse_step
from postmortem import textio
from postmortem.discover import Source

FRAME_RE = regex.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+?))?\s*$')
EXC_RE = regex.compile(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Timeout|Fault|Warning)|Exception))"
    r"(?::\s?(?P<msg>.*))?$")
# Inside an open traceback, Python's next unindented line after the frames is the exception, whatever its class is
# called (`StopIteration`, `queue.Empty`, `numpy._core._exceptions._ArrayMemoryError: ...`, `c10::Error`).
ANY_EXC_RE = regex.compile(r"^(?P<type>[A-Za-z_]\w*(?:(?:\.|::)[A-Za-z_]\w*)*)(?::\s?(?P<msg>.*))?$")
# Builtin exceptions without an Error/Exception suffix: known as exception lines even without a colon.
_BARE_EXC_NAMES = frozenset({"StopIteration", "StopAsyncIteration", "KeyboardInterrupt", "SystemExit",
                             "GeneratorExit", "MemoryError", "RecursionError", "AssertionError"})
EXC_NEAR_FRAME = 4  # lines after the last frame (its code line and carets between) where any class name can close it
CHAIN_RE = regex.compile(r"^(?:During handling of the above exception, another exception occurred|"
                         r"The above exception was the direct cause of the following exception):?\s*$")
CARET_RE = regex.compile(r"^\s*[~^]+\s*$")
MSG_RANK_RES = [
    regex.compile(r"^\W{0,3}\[?(?:Rank|RANK|rank)[ :=]?(?P<r>\d+)\]?(?:[:\]\s,]|$)"),
    regex.compile(r"\[(?:PG [^\]]*?)?Rank (?P<r>\d+)\]"),
    regex.compile(r"\bGLOBAL_RANK: (?P<r>\d+)"),
    regex.compile(r"(?:^|[\s(])rank[=:](?P<r>\d+)\b"),
    regex.compile(r"^\[(?P<r>\d+)\] is setting up NCCL communicator"),
    regex.compile(r"^Rank (?P<r>\d+)/\d+\b"),
    # `Epoch 9, Rank 7, world_size 8: ...`; also after a logging level (`%(asctime)s %(levelname)s rank N: ...` once
    # the time is stripped)
    regex.compile(r"^(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) {1,8})?(?:[^:\[,]{0,16},\s*)?[Rr]ank[ =:#]?"
                  r"(?P<r>\d+)\s*[,:/]"),
]
# A literal that every match of the MSG_RANK_RES pattern at the same position contains (None: no other than the
# "ank"/"ANK" of Rank, RANK, rank, which all but the 5th need).
_MSG_RANK_NEEDS = [None, "Rank ", "GLOBAL_RANK: ", "rank", " is setting up NCCL communicator", "Rank ", "ank"]
NCCL_LINE_RE = regex.compile(
    r"^(?:\[(?P<ts>[^\]]+)\] )?(?P<host>[^:\s\[]+):(?P<pid>\d+):(?P<tid>\d+) (?:\[(?P<dev>\d+)\] )?"
    r"(?:[\d.]+ \w+:\d+ )?(?:(?P<file>[\w./-]+):(?P<srcline>\d+) (?:\((?P<func>[^)]*)\) )?)?NCCL (?P<level>INFO|WARN|TRACE|CALL) (?P<msg>.*)$")
NCCL_INIT_RE = regex.compile(
    r"comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<dev>\d+)"
    r"(?: nvmlDev \d+)?(?: busId (?P<bus>[0-9a-fA-F]+))?(?: commId (?P<commid>0x[0-9a-fA-F]+))?")
_NCCL_LINE_GROUPS = tuple(NCCL_LINE_RE.groupindex[k] for k in ("msg", "host", "level", "dev", "pid"))
_NCCL_INIT_GROUPS = tuple(NCCL_INIT_RE.groupindex[k] for k in ("commid", "comm", "nranks", "bus", "rank"))
NCCL_VERSION_RE = regex.compile(r"NCCL version (\d+\.\d+\.\d+)")
HOSTPID_RE = regex.compile(r"^(?P<host>[A-Za-z0-9][\w.-]*):(?P<pid>\d+):\d+ ")
SRUN_LABEL_RE = regex.compile(r"^\s{0,4}(?:P\d+ )?(?P<rank>\d{1,5}): ")
HOST_PREFIX_RE = regex.compile(r"^(?P<host>[A-Za-z][\w.-]*[\d-][\w.-]*): ")
CONFIG_RE = regex.compile(
    r"(?i)(?:--|\b)(?P<key>[a-z_][\w.-]*?(?:batch_size|batch|_period|period|every|_interval|interval|_steps|_freq|"
    r"frequency|num_workers|epochs|timeout|ddp_timeout)\w*)['\"]?(?:\s*[=:]\s*|\s+)['\"]?(?P<value>\d+(?:\.\d+)?)\b")
CONFIG_TRIGGER = re.compile(r"batch|period|every|interval|steps|freq|workers|epochs|timeout", re.I)  # stdlib: 5x faster
# The words any CONFIG_RE key ends with (config_hint looks for a match where one of them occurs).
CONFIG_HINT_WORDS = ("batch", "period", "every", "interval", "_steps", "_freq", "frequency", "num_workers", "epochs",
                     "timeout")
# What any CONFIG_RE match contains (its key's end, then `=`/`:`/space and a digit): a cheap test before finditer.
CONFIG_HINT_RE = re.compile(f"(?:{'|'.join(CONFIG_HINT_WORDS)})" r"\w*['\"]?(?:\s*[=:]\s*|\s+)['\"]?\d", re.I)
# A config echo (`sample_every=1000`, `'eval_every': 500`) wherever it is printed: found by the whole-block scan at
# every occurrence (the config words alone are reported once per block: `epoch 3 batch 120` is progress, and so is
# `batch: 120`: a bare `batch` key is left to that, only `batch_…`/`…_batch` keys are echoes here).
CONFIG_ECHO_SCAN = (f"(?:{'|'.join(('batch_', '_batch') + CONFIG_HINT_WORDS[1:])})" r"\w*['\"]?\s*[=:]\s*['\"]?\d")
WORK_KV_RE = regex.compile(r"(\w+(?:\(ms\))?)=([^,]+)")
TEMPLATE_MASKS = [
    (regex.compile(r"0x[0-9a-fA-F]+"), "<HEX>"),
    (regex.compile(r"(?:/[\w.@+-]+)+/?"), "<PATH>"),
    (regex.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<IP>"),
    (regex.compile(r"\d+(?:\.\d+)?"), "<N>"),
]
_TEMPLATE_NEEDS = ["0x", "/", ".", None]
# A log line glued onto a progress bar (no newline between them): split before the second message's start.
GLUE_SPLIT_RE = regex.compile(
    r"(?<=\S)(?=(?:\[rank\d+\]:)?\[[IWEF](?:\d{4} [\d:.]+)?\s*\w+\.\w+:\d+\] |Traceback \(most recent call last\):)")
MAX_OPEN_GAP = 60          # lines without a frame after which an open traceback is closed
MAX_FRAMES = 200           # frames kept per traceback (innermost kept)
MAX_EVENTS_PER_KIND = 256  # per source, kind and rank: repeated lines beyond this are counted, the last one kept
MAX_TRACEBACKS_PER_SIGNATURE = 16  # per source and (exception type, innermost user frame): the rest counted, the
                                   # last one kept (so the first and the last of a repeated failure are exact)
MAX_TRACEBACKS = 256               # per source, whatever their signatures (beyond: the last of each signature)
SCHEME_SAMPLE = 400
TAIL_LINES_READ = 400   # lines read from a file's end (at most prefilter.TAIL_BYTES) for its ranks' last lines
TAIL_LINES_ONE_RANK = 2 * 20  # ... of a summarised file of one rank (its path names the rank): its last lines and as
                              # many before them, against which (and the file's head) a last line is new or not
TAIL_LINES_KEPT = 20    # last lines kept per rank and file (the last_lines table)
# What the bytes prefilter (parsers/prefilter.py) needs to know about this parser: a line that can yield a row
# contains a format trigger (parsers.formats) or one of these; the rest is skipped unread.
LINE_TRIGGERS = ["Traceback (most recent call last)", 'File "', "During handling of the above exception",
                 "The above exception was the direct cause", "Error", "Exception", "Exit", "Interrupt", "Failure",
                 "Timeout", "Fault", "Warning", "GLOBAL_RANK"] + [m[0] for m in embedded.MARKERS]
# EXC_RE's `...Warning` types yield a row only where they close an open traceback (a bare warning line is no
# exception): a big file hands them over only within reach of a traceback frame.
WEAK_EVENT_TRIGGERS = ["Warning"]
# CONFIG_RE needs one of these in its key (CONFIG_TRIGGER is looser: "steps" alone is also a tqdm description).
LINE_TRIGGERS_NOCASE = ["batch", "period", "every", "interval", "_steps", "_freq", "frequency", "workers", "epochs",
                        "timeout"]
# Lines after these are handed over whatever they contain (traceback source lines, torchrun summary fields).
WINDOW_TRIGGERS = {'File "': EXC_NEAR_FRAME, "Traceback (most recent call last)": 2, "Root Cause (first observed failure)": 12,
                   "Failures:": 200}
STEP_TRIGGERS = ["{'", "Epoch(", "Iter(", "━", "[=", "/s]"]
STEP_TRIGGERS_NOCASE = ["step", "iter", "batch", "loss"]
WEAK_STEP_TRIGGERS_NOCASE = ["it"]  # GENERIC_STEP_RE's bare `it 12`: read in small files only


def config_hint(message: str) -> bool:
    """Whether CONFIG_HINT_RE.search(message) finds something: tried only where a match can begin, at each of its key
    words (found in any case in the lowercased text), instead of at every character of a long line."""
    low = fmts.lower_for_literals(message)
    if low is None:
        return CONFIG_HINT_RE.search(message) is not None
    for w in CONFIG_HINT_WORDS:
        q = low.find(w)
        while q >= 0:
            if CONFIG_HINT_RE.match(message, q):
                return True
            q = low.find(w, q + 1)
    return False


def template_of(message: str) -> str:
    """Drain-style template: numbers, hex, paths and addresses masked, so repeated messages group."""
    t = message[:300]
    for (rx, mask), needs in zip(TEMPLATE_MASKS, _TEMPLATE_NEEDS):
        if needs is None or needs in t:  # without its literal a mask has nothing to replace
            t = rx.sub(mask, t)
    return t


def message_rank(message: str) -> int | None:
    """A rank stated inside the message itself (`[Rank 3]`, `rank=3`, `GLOBAL_RANK: 3`), or None."""
    if "ank" not in message and "ANK" not in message:
        if message[:1] != "[" or _MSG_RANK_NEEDS[4] not in message:
            return None
        m = MSG_RANK_RES[4].search(message)
        return int(m.group("r")) if m else None
    for rx, needs in zip(MSG_RANK_RES, _MSG_RANK_NEEDS):
        if needs is None or needs in message:
            m = rx.search(message)
            if m:
                return int(m.group("r"))
    return None


class _Scheme:
    """File-level prefix schemes that are too ambiguous to accept per line (srun labels, pdsh host prefixes)."""

    def __init__(self, head_lines: list[str]):
        head_lines_all = head_lines
        n = max(1, len(head_lines))
        # both prefixes end in ": " within the first few dozen characters: test that before any regex
        head_lines = [ln for ln in head_lines if 0 < ln.find(": ", 0, 80)]
        labels = sum(1 for ln in head_lines if ln[:1] in " 0123456789P" and SRUN_LABEL_RE.match(ln))
        self.srun = labels >= max(3, n // 3)
        hosts: dict[str, int] = {}
        for ln in head_lines:
            m = HOST_PREFIX_RE.match(ln) if ":" not in ln[:ln.find(": ")] else None
            if m and not m.group("host").endswith(("Error", "Warning", "Exception")):
                hosts[m.group("host")] = hosts.get(m.group("host"), 0) + 1
        self.hosts = {h for h, c in hosts.items() if c >= max(2, n // 10)}
        # JSON-lines logs (one JSON object per line, structlog/loguru-serialize/python-json-logger style): each
        # record is unwrapped into its message and exception lines (json_record); no prefix scheme applies.
        objs = sum(1 for ln in head_lines_all if ln[:1] == "{" and ln.rstrip().endswith("}"))
        self.jsonl = objs >= max(2, len([ln for ln in head_lines_all if ln.strip()]) // 2)
        if self.jsonl:
            self.srun, self.hosts = False, set()
        self.learned = None if self.jsonl else _learned_prefix(head_lines_all)
        self.actors = actor_ranks.scheme_for(head_lines_all)  # Ray actors' `(Name pid=P)` prefixes -> ranks

    @property
    def active(self) -> bool:
        return bool(self.srun or self.hosts or self.learned or self.actors is not None)

    def strip(self, line: str) -> tuple[str, dict]:
        info: dict = {}
        if self.learned is not None:
            line, info = self.learned.strip(line)
        if self.hosts:
            m = HOST_PREFIX_RE.match(line)
            if m and m.group("host") in self.hosts:
                info["host"] = m.group("host")
                line = line[m.end():]
        if self.actors is not None:
            self.actors.note(line, info)
        if self.srun:
            m = SRUN_LABEL_RE.match(line)
            if m:
                info["rank"] = int(m.group("rank"))
                line = line[m.end():]
        return line, info


WAIT_EVENT_KINDS = ("watchdog_timeout", "collective_timeout", "store_error")


_LEVEL_ONLY = regex.compile(r"^[\s|:\-\[\]]*(?:(?:ERROR|WARNING|WARN|INFO|DEBUG|CRITICAL|FATAL)[\s|:\-\[\]]*)?"
                            r"(?:\[rank(?P<rank>\d+)\]:\s*)?$")


def _prefix_only(message: str) -> bool:
    """Nothing but separators and a level word (`ERROR | `): what is left of a line whose event was glued on."""
    return len(message) < 24 and _LEVEL_ONLY.match(message) is not None


# The libraries' own diagnostics (NCCL's INFO/WARN/TRACE lines, c10's glog-style `[E ProcessGroupNCCL.cpp:456]` /
# `E0612 10:46:47.41 ... file.cpp:616]` lines): what the communicator says, never the job's work.
_LIBRARY_DIAG = regex.compile(r"\bNCCL (?:INFO|WARN|TRACE)\b|\[[IWEF] [\w.]+\.(?:cpp|cc|h|hpp):\d+\]|"
                              r"^\[?[IWEF]\d{4} \d\d:\d\d:\d\d[.\d]* +\d+ [\w/.]+:\d+\]")


def _library_diag(message: str) -> bool:
    """A library's own diagnostic line (_LIBRARY_DIAG), the regex run only where its literal parts can be."""
    if "NCCL " in message or ".cpp:" in message or ".cc:" in message or ".h:" in message or ".hpp:" in message:
        return _LIBRARY_DIAG.search(message) is not None
    return message[:1] in "[IWEF" and _LIBRARY_DIAG.search(message) is not None


def _plain_line(message: str) -> bool:
    """An ordinary line a job prints about its work (not code, a frame, a warning, a library's diagnostic or a
    blank)."""
    return (0 < len(message) < 400 and not message.startswith(("    ", "\t")) and not _prefix_only(message)
            and "Warning" not in message and "warn(" not in message and not _library_diag(message))


def _before_wait(result: ParseResult, source: Source, plain: tuple) -> None:
    """The last ordinary line before the file's first collective timeout: often the work a rank announced before
    the others started waiting for it ('Clustering 111M points...', 'Saving checkpoint...')."""
    lineno, message, rank, ctx = plain
    result.add("events", {"source": source.source, "line": lineno, "rank": rank, "host": ctx["host"],
                          "ts": ctx["ts"], "kind": "before_wait", "message": message[:300],
                          "template": "line before the first timeout", "details": {"format": "before-wait"},
                          "level": "I", "pid": None})


def _learned_prefix(head_lines: list[str]):
    """A collector prefix learned from the file's first lines, kept only where the fixed prefix list would not
    already strip as much (those prefixes also read levels and full timestamps)."""
    learned = learned_prefix.learn(head_lines[:SCHEME_SAMPLE])
    if learned is None:
        return None
    gain = 0
    for ln in head_lines[:50]:
        rest, _ = learned.strip(ln)
        known, _ = strip_prefixes(ln)
        gain += len(known) - len(rest)
    return learned if gain > 0 else None


class _TracebackCollector:
    """Per-stream state machine that assembles (possibly interleaved, excerpted) Python tracebacks."""

    def __init__(self, result: ParseResult, source: Source):
        self.result, self.source = result, source
        self.open: dict = {}        # stream key -> traceback being built
        self.last_closed: dict = {}  # stream key -> index of last closed traceback
        self.pending_chain: dict = {}
        self.count = 0
        self.per_signature: dict = {}  # (exc_type, user frame) -> tracebacks seen
        self.tail: dict = {}           # signature -> the last traceback beyond the cap (added at finish)
        self.dropped = 0
        self.prev: dict = {}           # stream key -> first character of its previous line
        self.wrapped: dict = {}        # stream key -> [row, lines taken]: a rich-wrapped exception message

    def feed(self, key, lineno: int, message: str, ctx: dict) -> bool:
        """Consume a line if it belongs to a traceback; True when consumed."""
        tb = self.open.get(key)
        stripped = message.strip()
        prev, self.prev[key] = self.prev.get(key), stripped[:1]
        if key in self.wrapped and rich_wrap.continues(self.wrapped, key, stripped):
            return False  # (the message's lines are also scanned for events)
        if stripped == "Traceback (most recent call last):":
            if tb:
                self._close(key, None, None)
            self.open[key] = self._new(lineno, ctx, key)
            # A traceback printed one level in (a prefix that leaves a space, `3:  Traceback`): its lines share that
            # indent, so the exception line is found after it is taken off.
            self.open[key]["indent"] = len(message) - len(message.lstrip(" "))
            return True
        if tb is not None and tb.get("indent") and message.startswith(" " * tb["indent"]):
            message = message[tb["indent"]:]
        fm = FRAME_RE.match(message) if "File \"" in message else None
        if fm:
            if tb is None:
                tb = self.open[key] = self._new(lineno, ctx, key)
            tb["frames"].append({"file": fm.group("file"), "line": int(fm.group("line")),
                                 "func": (fm.group("func") or "?").strip()})
            if len(tb["frames"]) > MAX_FRAMES:
                del tb["frames"][0]
            tb["last_frame_line"] = lineno
            return True
        if CHAIN_RE.match(stripped):
            if tb:
                self._close(key, None, None)
            self.pending_chain[key] = self.last_closed.get(key)
            return True
        if tb is not None:
            if message[:1] in (" ", "\t") or CARET_RE.match(message):
                if tb["frames"] and "code" not in tb["frames"][-1] and not CARET_RE.match(message):
                    tb["frames"][-1]["code"] = stripped[:300]
                return True
            em = EXC_RE.match(message) or _any_exception(message, lineno - tb["last_frame_line"])
            if em:
                self._close(key, em.group("type"), em.group("msg"), lineno)
                return False  # the exception line is also scanned for events
            if lineno - tb["last_frame_line"] > MAX_OPEN_GAP:
                self._close(key, None, None)
            return False
        em = EXC_RE.match(message)
        if em and not em.group("type").endswith("Warning") and (em.group("msg") is not None):
            # A bare exception line with no traceback (an excerpt, or a C++-raised error printed alone).
            self.open[key] = self._new(lineno, ctx, key)
            row = self._close(key, em.group("type"), em.group("msg"), lineno)
            rich_wrap.maybe_wrapped(self.wrapped, key, prev, em.group("msg"), row)
        return False

    def _new(self, lineno: int, ctx: dict, key) -> dict:
        return {"line": lineno, "ctx": dict(ctx), "frames": [], "last_frame_line": lineno,
                "chained_from": self.pending_chain.pop(key, None)}

    def _close(self, key, exc_type, exc_msg, end_line=None) -> None:
        tb = self.open.pop(key, None)
        if tb is None:
            return
        if exc_type is None and not tb["frames"]:
            return
        frames = list(reversed(tb["frames"]))  # innermost first, like stacks
        ctx = tb["ctx"]
        row = {"source": self.source.source, "line": tb["line"], "rank": ctx.get("rank"), "host": ctx.get("host"),
               "ts": ctx.get("ts"), "exc_type": exc_type or "<truncated>", "exc_message": (exc_msg or "")[:2000],
               "frames": frames, "last_user_frame": _last_user_frame(frames),
               "chained_from": tb["chained_from"], "end_line": end_line or tb["last_frame_line"]}
        fr = row["last_user_frame"] or {}
        sig = (row["exc_type"], fr.get("file"), fr.get("func"), row["rank"])
        n = self.per_signature.get(sig, 0)
        self.per_signature[sig] = n + 1
        if n >= MAX_TRACEBACKS_PER_SIGNATURE or self.count >= MAX_TRACEBACKS:
            # a repeated failure: bounded rows, the latest one of each signature kept
            if sig in self.tail or len(self.tail) >= MAX_TRACEBACKS:
                self.dropped += 1
            if sig in self.tail or len(self.tail) < MAX_TRACEBACKS:
                self.tail[sig] = row
            return row
        self.result.add("tracebacks", row)
        self.last_closed[key] = self.count
        self.count += 1
        return row

    def finish(self) -> None:
        for key in list(self.open):
            self._close(key, None, None)
        for row in self.tail.values():
            row["chained_from"] = None  # its chain partner may be among the dropped ones
            self.result.add("tracebacks", row)
        if self.dropped:
            self.result.problems.append(f"repeated tracebacks summarised: {self.dropped} not stored")


def _any_exception(message: str, since_frame: int):
    """The exception line of an open traceback whatever its class is named (see ANY_EXC_RE), right after the frames:
    a dotted or `::` name, a name with a message, or a builtin exception's bare name."""
    if since_frame > EXC_NEAR_FRAME or not message or len(message) > 4000:
        return None
    m = ANY_EXC_RE.match(message)
    if m is None:
        return None
    name = m.group("type")
    if "." in name or "::" in name or name in _BARE_EXC_NAMES:
        return m
    # `Name: message` alone: a class-like name (a capital, then lower case), not a log level word (`INFO: ...`)
    if m.group("msg") is not None and name[:1].isupper() and not name.isupper():
        return m
    return None


def _last_user_frame(frames_innermost_first: list[dict]) -> dict | None:
    for fr in frames_innermost_first:
        f = fr["file"]
        if not any(s in f for s in ("site-packages", "dist-packages", "/lib/python", "<frozen", "\\lib\\")):
            return fr
    return frames_innermost_first[0] if frames_innermost_first else None


class _TorchrunSummary:
    """Reads torchrun's ChildFailedError block into one event per listed failure (FORMATS.md §4.2)."""
    FIELD_RE = regex.compile(r"^\s*(?P<k>time|host|rank|exitcode|error_file|traceback)\s*:\s?(?P<v>.*)$")
    RANK_RE = regex.compile(r"(?P<rank>-?\d+) \(local_rank: (?P<local>\d+)\)")
    EXIT_RE = regex.compile(r"(?P<code>-?\d+) \(pid: (?P<pid>\d+)\)\s*(?:\((?P<sig>SIG\w+)\))?")
    INDEX_RE = regex.compile(r"^\[\d+\]:$")

    def __init__(self, result: ParseResult, source: Source):
        self.result, self.source = result, source
        self.section = None
        self.cur: dict | None = None

    def feed(self, lineno: int, message: str) -> None:
        s = message.strip()
        if s.startswith("Root Cause (first observed failure)"):
            self._flush(); self.section = "root"; return
        if s == "Failures:":
            self._flush(); self.section = "other"; return
        if self.section is None:
            return
        if self.INDEX_RE.match(s):
            self._flush(); self.cur = {"line": lineno, "root": self.section == "root"}; return
        if s.startswith("====="):
            self._flush(); self.section = None; return
        if s.startswith("-----"):
            self._flush(); return
        m = self.FIELD_RE.match(message)
        if m and self.cur is not None:
            k, v = m.group("k"), m.group("v").strip()
            if k == "rank":
                rm = self.RANK_RE.search(v)
                if rm:
                    self.cur["rank"], self.cur["local_rank"] = int(rm.group("rank")), int(rm.group("local"))
            elif k == "exitcode":
                em = self.EXIT_RE.search(v)
                if em:
                    self.cur["exitcode"], self.cur["pid"] = int(em.group("code")), int(em.group("pid"))
                    if em.group("sig"):
                        self.cur["signal"] = em.group("sig")
            else:
                self.cur[k] = v[:500]

    def _flush(self) -> None:
        cur, self.cur = self.cur, None
        if not cur or "rank" not in cur:
            return
        msg = (f"torchrun: rank {cur['rank']} exitcode {cur.get('exitcode')}"
               f"{' ' + cur['signal'] if cur.get('signal') else ''}{' (root cause)' if cur['root'] else ''}")
        self.result.add("events", {"source": self.source.source, "line": cur.pop("line"), "rank": cur["rank"],
                                   "host": cur.get("host"), "ts": None, "kind": "torchrun_failure",
                                   "message": msg, "template": "torchrun failure", "details": cur, "level": "error",
                                   "pid": cur.get("pid")})

    def finish(self) -> None:
        self._flush()


class _StepAccumulator:
    """A fixed budget of progress rows per series (rank, host, bar): only changes of step; past CAP rows the series
    is thinned by half, keeping its first and last row, every anomaly (non-finite loss, a loss spike) and the row
    that stood last when an event was seen (the step of death and the phase an error happened in), so memory
    follows ranks and bars, never how long the job printed."""
    CAP = 512
    MAX_KEPT = 128  # anomaly / event-context rows protected per series (beyond: thinned like the rest)
    SPIKE = 3.0     # a loss above SPIKE times the previous row's is an anomaly

    def __init__(self):
        self.series: dict = {}
        self.anomalies: dict = {}  # series key -> ids of anomalous rows (the first MAX_KEPT)
        self.context: dict = {}    # series key -> ids of rows that stood last at an event (the latest MAX_KEPT)

    def add(self, row: dict) -> None:
        key = (row["rank"], row.get("host"), row.get("desc"))  # host too: rank-less lines of two nodes
        rows = self.series.get(key)
        if rows is None:
            rows = self.series[key] = []
            self.anomalies[key], self.context[key] = {}, {}
        loss = row.get("loss")
        prev = rows[-1] if rows else None
        if prev is not None and prev.get("step") == row.get("step") and row.get("step") is not None:
            rows[-1] = row  # same step, newer state of the bar
            for kept in (self.anomalies[key], self.context[key]):
                if kept.pop(id(prev), None) is not None:
                    kept[id(row)] = True
            return
        rows.append(row)
        if loss is not None:
            ploss = prev.get("loss") if prev is not None else None
            if loss != loss or loss in (float("inf"), float("-inf")) or \
                    (ploss is not None and ploss > 0 and loss > self.SPIKE * ploss):
                if len(self.anomalies[key]) < self.MAX_KEPT:
                    self.anomalies[key][id(row)] = True
        if len(rows) > self.CAP:
            self._thin(key, rows)

    def mark_context(self) -> None:
        """An event was seen: keep the current last row of every series (phase and step at that moment)."""
        for key, rows in self.series.items():
            if rows:
                ctx = self.context[key]
                ctx.pop(id(rows[-1]), None)
                ctx[id(rows[-1])] = True
                if len(ctx) > self.MAX_KEPT:
                    del ctx[next(iter(ctx))]

    def _thin(self, key, rows: list) -> None:
        anom, ctx = self.anomalies[key], self.context[key]
        last = len(rows) - 1
        rows[:] = [r for i, r in enumerate(rows) if i % 2 == 0 or i == last or id(r) in anom or id(r) in ctx]
        live = {id(r) for r in rows}
        for kept in (anom, ctx):
            for k in [k for k in kept if k not in live]:
                del kept[k]

    def rows(self) -> list[dict]:
        out = [r for rows in self.series.values() for r in rows]
        out.sort(key=lambda r: r["line"])
        return out


TEXT_KINDS = ("rank_log", "nccl_log", "dmesg", "unknown", "pyspy", "nvidia_smi", "stack_dump")
CONFIG_EVENT_KINDS = ("config", "job_id")


@register("launch_config")
def parse_launch_config(source: Source) -> ParseResult:
    """A launch script or config file beside the logs: its settings (config echoes, world size, job identity) only;
    the failures and progress a script's text may mention never happened in this run."""
    result = parse_textlog(source)
    result.rows = {"events": [r for r in result.rows.get("events", []) if r["kind"] in CONFIG_EVENT_KINDS]}
    return result


@register(*TEXT_KINDS)
def parse_textlog(source: Source) -> ParseResult:
    """Stream a text file once: strip prefixes, attribute ranks, extract events/tracebacks/steps/NCCL lines."""
    result = ParseResult()
    stats = textio.ReadStats()
    tbs = _TracebackCollector(result, source)
    summary = _TorchrunSummary(result, source)
    steps = _StepAccumulator()
    per_kind: dict[str, int] = {}
    dropped: dict[str, int] = {}
    over: dict = {}  # (kind, rank) -> the latest event beyond MAX_EVENTS_PER_KIND
    base_rank = source.rank if source.rank is not None else source.local_rank
    scanner, head_texts, items = _line_source(source, stats)
    scheme = _Scheme(head_texts)
    hostpid_rank: dict[str, int] = {}
    # Stack dumps list frames, not log lines: `save_checkpoint (x.py:3)` is no save, a command line is no config
    # echo, and `File "..."` frames are not a raised exception. Only failure lines (py-spy's own errors) count.
    dump = source.kind in ("pyspy", "stack_dump")
    plain, waited = None, False
    spawned = spawn_block.SpawnBlock()  # mp.spawn's child traceback printed by the parent: its process index
    big, dump_kinds = embedded.read_by_line_parser(source), set()
    for lineno, raw, steps_only in items:
        record = json_record(raw) if scheme.jsonl and raw[:1] == "{" else None
        if record is not None:
            segments, record_info = record
        else:
            segments = raw.split("\r") if "\r" in raw else [raw]
            if ".cpp:" in raw or "Traceback (" in raw:
                segments = [piece for seg in segments for piece in GLUE_SPLIT_RE.split(seg)]
        carry: dict = {}
        for seg in segments:
            if not seg or seg.isspace():
                continue
            line, sinfo = scheme.strip(seg) if scheme.active else (seg, {})
            if record is not None:
                sinfo = {**record_info, **sinfo}
            message, info = strip_prefixes(line)
            if sinfo:
                info = {**sinfo, **info}
            if carry:
                info = {**carry, **info}
                carry = {}
            if info and _prefix_only(message):
                carry = info  # a segment that was only prefixes (`[time] ` before a glued event): they are the next's
                lm = _LEVEL_ONLY.match(message)
                if lm.group("rank") is not None and "rank" not in carry:
                    carry = {**carry, "rank": int(lm.group("rank"))}
                continue
            rank = spawned.rank_for(message, _line_rank(info, message, base_rank))
            ctx = {"rank": rank, "host": info.get("host") or source.host, "ts": _ts(info.get("ts"))}
            if steps_only:  # a sampled progress/step line from the prefilter: nothing but its step row
                st = parse_step(message)
                if not st and not dump and _plain_line(message) and (plain is None or lineno > plain[0]):
                    plain = (lineno, message, rank, ctx)
                if st:
                    st.update({"source": source.source, "line": lineno, "rank": rank, "host": ctx["host"],
                               "ts": ctx["ts"]})
                    steps.add(st)
                continue
            key = rank if rank is not None else info.get("host")
            consumed = False if dump else tbs.feed(key, lineno, message, ctx)
            summary.feed(lineno, message)
            if consumed:
                continue
            if "NCCL " in message:
                nm = NCCL_LINE_RE.match(message)
                if nm:
                    _nccl_row(result, source, lineno, nm, ctx, hostpid_rank)
                    if nm.group("level") != "WARN":
                        continue
            if big and not dump:
                kind = embedded.marker_kind(message)
                if kind:
                    dump_kinds.add(kind)
            hits = fmts.match_line(message)
            before_plain = plain
            # (the prefilter may hand an earlier ordinary line over again just before an event: the latest one counts)
            if not hits and not dump and _plain_line(message) and (plain is None or lineno > plain[0]):
                plain = (lineno, message, rank, ctx)  # what the job printed last before anything happened
            for fmt, m in hits:
                if dump and fmt.level != "error":
                    continue
                if fmt.kind in WAIT_EVENT_KINDS and not waited:
                    waited = True
                    if plain is not None and plain[0] < lineno:
                        _before_wait(result, source, plain)
                cap_key = (fmt.kind, rank)
                n = per_kind.get(cap_key, 0)
                per_kind[cap_key] = n + 1
                if n >= MAX_EVENTS_PER_KIND and cap_key in over:
                    dropped[fmt.kind] = dropped.get(fmt.kind, 0) + 1
                attrs = {k: v for k, v in fmt.groupdict(m).items() if v not in (None, "")}
                attrs["format"] = fmt.name
                ev_rank = rank
                hp = HOSTPID_RE.match(message)
                pid = None
                if hp:
                    pid = int(hp.group("pid"))
                    ctx_host = hp.group("host")
                    attrs.setdefault("hostpid", f"{ctx_host}:{pid}")
                row = {"source": source.source, "line": lineno, "rank": ev_rank, "host": ctx["host"], "ts": ctx["ts"],
                       "kind": fmt.kind, "message": message[:1000], "template": template_of(message),
                       "details": attrs, "level": info.get("level") or fmt.level[0].upper(), "pid": pid}
                steps.mark_context()
                if n >= MAX_EVENTS_PER_KIND:  # beyond the cap only the latest of its kind and rank is kept
                    over[cap_key] = (row, lineno, ctx)
                    continue
                result.add("events", row)
                if fmt.kind in ("watchdog_timeout", "watchdog_status"):
                    _collective_row(result, source, lineno, ctx, fmt.kind, attrs)
            if dump:
                continue
            if config_hint(message):
                for cm in CONFIG_RE.finditer(message):
                    result.add("events", {"source": source.source, "line": lineno, "rank": rank, "host": ctx["host"],
                                          "ts": ctx["ts"], "kind": "config", "message": message[:300],
                                          "template": "config echo", "level": "I", "pid": None,
                                          "details": {"key": cm.group("key").lower().lstrip("-"),
                                                    "value": float(cm.group("value")), "format": "config-echo"}})
            st = parse_step(message)
            if st:
                if plain is not None and plain[0] == lineno:
                    plain = before_plain  # progress is not an announcement of work (as for sampled step lines)
                st.update({"source": source.source, "line": lineno, "rank": rank, "host": ctx["host"],
                           "ts": ctx["ts"]})
                steps.add(st)
    for row, lineno, ctx in over.values():
        result.add("events", row)
        if row["kind"] in ("watchdog_timeout", "watchdog_status"):
            _collective_row(result, source, lineno, ctx, row["kind"], row["details"])
    tbs.finish()
    summary.finish()
    if scanner is not None and not dump:
        _last_lines(result, source, scanner.tail_lines(_tail_window(scanner, base_rank)), head_texts, scheme,
                    base_rank)
    if dump_kinds:  # dumps inside a big log (small ones are read by parsers.embedded directly)
        result.merge(embedded.read_dumps(source, sorted(dump_kinds)))
    for row in steps.rows():
        result.add("steps", row)
    if dropped:
        result.problems.append("repetitive lines summarised: " + ", ".join(f"{k} x{v}" for k, v in sorted(dropped.items())))
    if hostpid_rank:
        result.meta["hostpid_rank"] = hostpid_rank
    if scheme.actors:  # Ray's log monitor forwards each actor's stdout and stderr apart: line order is not time order
        result.meta["unordered_streams"] = {source.source: "ray actor stdout/stderr merged by the log monitor"}
    if scanner is not None and getattr(scanner, "summarised", False):
        if any(scanner.nccl_counts.values()):
            result.meta["nccl_counts"] = {source.source: dict(scanner.nccl_counts)}
        result.meta["summarised"] = {source.source: dict(scanner.sampled)}
    result.lines, result.bytes = stats.lines, stats.bytes
    result.problems.extend(stats.problems)
    return result


@functools.lru_cache(maxsize=1)
def _prefilter_triggers() -> prefilter.Triggers:
    return prefilter.compile_triggers(
        events=sorted({t for f in fmts.FORMATS for t in f.triggers} | set(LINE_TRIGGERS)),
        events_nocase=LINE_TRIGGERS_NOCASE, windows=WINDOW_TRIGGERS, steps=STEP_TRIGGERS,
        steps_nocase=STEP_TRIGGERS_NOCASE, weak_steps_nocase=WEAK_STEP_TRIGGERS_NOCASE,
        weak_events=WEAK_EVENT_TRIGGERS, **_gates(), scans=((CONFIG_ECHO_SCAN, True),),
        error_events=sorted({t for f in fmts.FORMATS if f.level == "error" for t in f.triggers} | set(LINE_TRIGGERS)
                            | set(WINDOW_TRIGGERS)))


def share_exact_budget(sources: list) -> None:
    """Give every source this parser reads its share of the job's exact budget (Source.exact_bytes; see
    prefilter.EXACT_JOB_BYTES): before parsing, from the sizes the discovery saw, on every engine alike."""
    text = [s for s in sources if not s.problem and s.kind in TEXT_KINDS]
    shares = prefilter.exact_shares([prefilter.text_size(s.path, s.bytes, s.compression) for s in text])
    for s, share in zip(text, shares):
        s.exact_bytes = share


def _gates() -> dict:
    """The scan patterns of the `scan: regex` formats (gates), and their triggers that no other format or line
    rule shares (gated; see prefilter.Triggers)."""
    scanned = [f for f in fmts.FORMATS if f.scan_regex]
    shared = {t for f in fmts.FORMATS if not f.scan_regex for t in f.triggers} | set(LINE_TRIGGERS) \
        | set(WINDOW_TRIGGERS)
    gated = sorted({t for f in scanned for t in f.triggers} - shared)
    return {"gates": tuple(fmts.scan_pattern(f) for f in scanned), "gated": tuple(gated)}


def warm() -> None:
    """Build the trigger matchers now (see parsers.base.preload)."""
    triggers = _prefilter_triggers()
    triggers.fast_events()
    triggers.fast_config()
    learned_prefix._stamp_or_rank_matcher()


def _line_source(source: Source, stats: textio.ReadStats):
    """(scanner or None, the first lines for prefix schemes, iterator of (line number, text, steps_only)).

    UTF-8 files go through the bytes prefilter (big ones summarised); UTF-16 ones are read line by line."""
    hint = prefilter.text_size(source.path, source.bytes, source.compression)
    try:
        scanner = prefilter.LineScanner(source.path, stats, hint, _prefilter_triggers(), source.exact_bytes)
    except prefilter.NotStreamable:
        scanner = None
    if scanner is not None:
        return scanner, scanner.head_lines(SCHEME_SAMPLE), iter(scanner)
    lines_iter = textio.iter_lines(source.path, stats)
    head: list[tuple[int, str]] = []
    for item in lines_iter:
        head.append(item)
        if len(head) >= SCHEME_SAMPLE:
            break

    tail: collections.deque = collections.deque(maxlen=TAIL_LINES_READ)

    def all_lines():
        for lineno, raw in head:
            tail.append((lineno, raw))
            yield lineno, raw, False
        for lineno, raw in lines_iter:
            tail.append((lineno, raw))
            yield lineno, raw, False
    return _Tail(tail), [ln for _, ln in head], all_lines()


class _Tail:
    """The last lines of a file read line by line (UTF-16): what LineScanner.tail_lines gives for the rest."""
    exact = True

    def __init__(self, lines):
        self.lines = lines

    def tail_lines(self, n: int) -> list[tuple[int, str]]:
        return [(ln, raw[-4096:]) for ln, raw in list(self.lines)[-n:]]  # as LineScanner.tail_lines


_JSON_MESSAGE_KEYS = ("msg", "message", "text", "event", "log", "record")
_JSON_EXC_KEYS = ("exc_info", "exception", "exc_text", "traceback", "stack_trace", "stack", "error")
_JSON_RANK_KEYS = ("rank", "global_rank", "RANK", "rank_id", "process_rank")
_JSON_TS_KEYS = ("ts", "time", "timestamp", "@timestamp", "asctime", "datetime", "created")
_JSON_LEVEL_KEYS = ("level", "levelname", "severity", "lvl", "log_level")


def json_record(raw: str):
    """A JSON-lines log record as ([message lines, then its exception's lines], {rank, ts, level, host}), or None
    when the line is not a JSON object with a message."""
    text = raw.strip()
    if not text.endswith("}") or len(text) > 1_000_000:
        return None
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    msg = next((obj[k] for k in _JSON_MESSAGE_KEYS if isinstance(obj.get(k), str)), None)
    if msg is None:
        return None
    info: dict = {}
    for k in _JSON_RANK_KEYS:
        v = obj.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1_000_000:
            info["rank"] = v
            break
        if isinstance(v, str) and v.isdigit() and len(v) < 7:
            info["rank"] = int(v)
            break
    ts = next((obj[k] for k in _JSON_TS_KEYS if isinstance(obj.get(k), str)), None)
    if ts:
        info["ts"] = ts[:40]
    level = next((obj[k] for k in _JSON_LEVEL_KEYS if isinstance(obj.get(k), str)), None)
    if level:
        info["level"] = level[:1].upper()
    host = obj.get("host") or obj.get("hostname")
    if isinstance(host, str) and host:
        info["host"] = host[:100]
    lines = msg.split("\n")
    for k in _JSON_EXC_KEYS:
        v = obj.get(k)
        if isinstance(v, str) and v.strip() and v.strip() != "None":
            lines.extend(v.rstrip("\n").split("\n"))
            break
    return lines, info


def _line_key(text: str) -> int:
    """A line's template key: crc32 of its shape (digits, blanks and bar glyphs removed, as the prefilter's keys)."""
    return zlib.crc32(prefilter.normalise(text))


def _tail_window(scanner, base_rank) -> int:
    """How many of a file's last lines its ranks' last lines are taken from: TAIL_LINES_READ (a console of many
    ranks interleaves them), but fewer in a summarised file of one rank, whose last lines are its last lines (part
    of the per-rank budget: a file read whole exactly, as every file of a small job, keeps the full window)."""
    if base_rank is not None and getattr(scanner, "summarised", False):
        return TAIL_LINES_ONE_RANK
    return TAIL_LINES_READ


def _line_keys(texts: list[str]) -> list[int]:
    """_line_key of each text, in one encode and one translate for all of them (texts without a line break)."""
    joined = "\n".join(texts)
    if joined.count("\n") != max(0, len(texts) - 1):
        return [_line_key(t) for t in texts]
    crc = zlib.crc32
    return [crc(k) for k in joined.encode("utf-8").translate(None, prefilter.DELETE).split(b"\n")]


def line_message(raw: str, scheme, base_rank):
    """(message, prefix info, rank) of one raw line as the last-lines table reads it (a JSON record's message, a
    progress bar's last redraw, launcher and collector prefixes stripped), or None for a line with no message."""
    if not raw or raw.isspace():
        return None
    record = json_record(raw) if scheme.jsonl and raw[:1] == "{" else None
    if record is not None:
        seg = next((t for t in record[0] if t.strip()), "")
    else:
        seg = raw.rsplit("\r", 1)[-1] if "\r" in raw else raw
        if not seg.strip():
            seg = raw.strip("\r")
    line, sinfo = scheme.strip(seg) if scheme.active else (seg, {})
    if record is not None:
        sinfo = {**record[1], **sinfo}
    message, info = strip_prefixes(line)
    if sinfo:
        info = {**sinfo, **info}
    message = message.rstrip()  # leading blanks kept: a traceback's code lines are indented
    if not message.strip() or _prefix_only(message):
        return None
    return message, info, _line_rank(info, message, base_rank)


def _line_rank(info: dict, message: str, base_rank):
    """A line's rank: its prefix's rank, else its local rank, else one its words state, else the file's."""
    rank = info.get("rank")
    if rank is None and info.get("local_rank") is not None:
        rank = info["local_rank"]
    if rank is None:
        rank = message_rank(message)
    return base_rank if rank is None else rank


def template_keys(path: str, limit: int) -> tuple[set[int], int]:
    """The template keys of every line of a text file (as last_lines computes them) and how many lines were read,
    at most `limit` (the `--baseline` run's templates)."""
    keys: set[int] = set()
    head: list[str] = []
    it = textio.iter_lines(path)
    n = 0
    for _, raw in it:
        head.append(raw)
        if len(head) >= SCHEME_SAMPLE:
            break
    scheme = _Scheme(head)
    for raw in head:
        got = line_message(raw, scheme, None)
        if got is not None:
            keys.add(_line_key(got[0]))
        n += 1
    for _, raw in it:
        if n >= limit:
            break
        got = line_message(raw, scheme, None)
        if got is not None:
            keys.add(_line_key(got[0]))
        n += 1
    return keys, n


def _last_lines(result: ParseResult, source: Source, tail: list, head_texts: list, scheme, base_rank) -> None:
    """Each rank's last TAIL_LINES_KEPT lines of this file, whatever they say, with their template keys and whether
    the rank printed the same template before (the file's first lines, or earlier in its tail)."""
    if not tail:
        return
    lines = []  # (line number, raw line, rank, message, info) of the lines that say something
    for lineno, raw in tail:
        got = line_message(raw, scheme, base_rank)
        if got is None:
            continue
        message, info, rank = got
        lines.append((lineno, raw, rank, message, info))
    if not lines:
        return
    # the template keys of all lines at once; then whether each rank printed a line's template before it
    keys = _line_keys([t[3] for t in lines])
    raw_keys = _line_keys([t[1] for t in lines])
    seen_raw = set(_line_keys([ln for ln in head_texts if ln]))
    head_n = len(head_texts)
    per_rank: dict = {}
    for (lineno, _, rank, _, _), key, raw_key in zip(lines, keys, raw_keys):
        got = per_rank.get(rank)
        if got is None:
            got = per_rank[rank] = ([], set())
        seen = (raw_key in seen_raw and lineno > head_n) or key in got[1]
        seen_raw.add(raw_key)
        got[1].add(key)
        got[0].append((lineno, key, seen))
    index = {t[0]: t for t in lines}
    for rank, (rows, _) in per_rank.items():
        rows = rows[-TAIL_LINES_KEPT:]
        for i, (lineno, key, seen) in enumerate(rows):
            _, _, _, message, info = index[lineno]
            result.add("last_lines", {"source": source.source, "line": lineno, "rank": rank,
                                      "host": info.get("host") or source.host, "ts": _ts(info.get("ts")), "key": key,
                                      "message": message[:300], "seen": seen, "distance": len(rows) - 1 - i})


def _ts(text: str | None):
    if not text:
        return None
    return text.replace(",", ".").replace("_", " ")


def _nccl_row(result: ParseResult, source: Source, lineno: int, m, ctx: dict, hostpid_rank: dict) -> None:
    msg, host, level, dev, pid = m.group(*_NCCL_LINE_GROUPS)  # by number: the regex module's names are slow
    row = {"source": source.source, "line": lineno, "rank": ctx["rank"], "host": host, "ts": None,
           "level": level, "subsys": None, "comm_id": None, "nranks": None,
           "cuda_dev": int(dev) if dev else None, "bus_id": None, "version": None,
           "message": msg[:500], "pid": int(pid), "nccl_rank": None}
    im = NCCL_INIT_RE.search(msg) if "nranks " in msg else None  # (a literal every match holds)
    if im:
        commid, comm, nranks, bus, nccl_rank = im.group(*_NCCL_INIT_GROUPS)
        row.update(comm_id=commid or comm, nranks=int(nranks), bus_id=bus, nccl_rank=int(nccl_rank))
        key = f"{host}:{pid}"
        # The largest communicator a process joins is the default (world) group: its rank is the global rank.
        prev = hostpid_rank.get(key + "#n", 0)
        if int(nranks) >= prev:
            hostpid_rank[key] = int(nccl_rank)
            hostpid_rank[key + "#n"] = int(nranks)
    vm = NCCL_VERSION_RE.search(msg) if "version" in msg else None
    if vm:
        row["version"] = vm.group(1)
    result.add("nccl", row)


def _collective_row(result: ParseResult, source: Source, lineno: int, ctx: dict, kind: str, attrs: dict) -> None:
    row = {"source": source.source, "line": lineno, "rank": ctx["rank"], "host": ctx["host"], "ts": ctx["ts"],
           "pg": None, "state": "timeout" if kind == "watchdog_timeout" else "failed"}
    if kind == "watchdog_timeout":
        work = dict(WORK_KV_RE.findall(attrs.get("work", "")))
        row.update(seq=_int(work.get("SeqNum")), op=work.get("OpType"), numel_in=_int(work.get("NumelIn")),
                   numel_out=_int(work.get("NumelOut")), timeout_ms=_int(work.get("Timeout(ms)")),
                   elapsed_ms=_int(attrs.get("elapsed_ms")))
        attrs.update({k: v for k, v in (("seq", row["seq"]), ("op", row["op"]), ("timeout_ms", row["timeout_ms"]))
                      if v is not None})
    else:
        row.update(seq=_int(attrs.get("seq")), last_enqueued=_int(attrs.get("last_enqueued")),
                   last_completed=_int(attrs.get("last_completed")))
    if row.get("seq") is None and row.get("last_completed") is None:
        return
    result.add("collectives", row)


def _int(v) -> int | None:
    try:
        return int(str(v).strip())
    except (TypeError, ValueError):
        return None

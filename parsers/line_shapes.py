"""What the line parser recognises in a line by its shape: tracebacks' frames and exception lines, rank and NCCL
prefixes, config echoes, templates, the trigger words of the prefilter, and which lines are a job's own words."""
from __future__ import annotations

import re

import regex

from postmortem.parsers import formats as fmts
from postmortem.parsers import actor_ranks, embedded, learned_prefix, tb_shapes
from postmortem.parsers.prefixes import strip_prefixes


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
# A key's parts before and after its word are bounded (128 and 64 characters): unbounded, a long dotted or repeated
# token was walked to its end from each of its starts.
CONFIG_RE = regex.compile(
    r"(?i)(?:--|\b)(?P<key>[a-z_][\w.-]{0,128}?(?:batch_size|batch|_period|period|every|_interval|interval|_steps|_freq|"
    r"frequency|num_workers|epochs|timeout|ddp_timeout)\w{0,64})['\"]?(?:\s*[=:]\s*|\s+)['\"]?(?P<value>\d+(?:\.\d+)?)\b")
CONFIG_TRIGGER = re.compile(r"batch|period|every|interval|steps|freq|workers|epochs|timeout", re.I)  # stdlib: 5x faster
# The words any CONFIG_RE key ends with (config_hint looks for a match where one of them occurs).
CONFIG_HINT_WORDS = ("batch", "period", "every", "interval", "_steps", "_freq", "frequency", "num_workers", "epochs",
                     "timeout")
# What any CONFIG_RE match contains (its key's end, then `=`/`:`/space and a digit): a cheap test before finditer.
CONFIG_HINT_RE = re.compile(f"(?:{'|'.join(CONFIG_HINT_WORDS)})" r"\w{0,64}['\"]?(?:\s*[=:]\s*|\s+)['\"]?\d", re.I)
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
# contains a format trigger (postmortem.parsers.formats) or one of these; the rest is skipped unread.
LINE_TRIGGERS = ["Traceback (most recent call last)", 'File "', 'File \\"', "During handling of the above exception",
                 "The above exception was the direct cause", "Error", "Exception", "Exit", "Interrupt", "Failure",
                 "Timeout", "Fault", "Warning", "GLOBAL_RANK"] + [m[0] for m in embedded.MARKERS] + \
    tb_shapes.LINE_TRIGGERS
# EXC_RE's `...Warning` types yield a row only where they close an open traceback (a bare warning line is no
# exception): a big file hands them over only within reach of a traceback frame.
WEAK_EVENT_TRIGGERS = ["Warning"]
# CONFIG_RE needs one of these in its key (CONFIG_TRIGGER is looser: "steps" alone is also a tqdm description).
LINE_TRIGGERS_NOCASE = ["batch", "period", "every", "interval", "_steps", "_freq", "frequency", "workers", "epochs",
                        "timeout"]
# Lines after these are handed over whatever they contain (traceback source lines, torchrun summary fields).
# (`File \"` is a frame inside a JSON string: Docker's json-file driver, Cloud Logging's export)
WINDOW_TRIGGERS = {'File "': EXC_NEAR_FRAME, 'File \\"': EXC_NEAR_FRAME, "Traceback (most recent call last)": 2, "Root Cause (first observed failure)": 12,
                   "Failures:": 200, **tb_shapes.WINDOW_TRIGGERS}
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


def _labelled_block(lines: list[str]) -> bool:
    """A block of srun-labelled lines inside an unlabelled log (a console where only the failure's lines came
    through `srun --label`): four consecutive lines with the same label. A numbered list never repeats its number."""
    run, last = 0, None
    for ln in lines:
        m = SRUN_LABEL_RE.match(ln) if ln[:1] in " 0123456789P" else None
        label = m.group("rank") if m else None
        run = run + 1 if label is not None and label == last else (1 if label is not None else 0)
        last = label
        if run >= 4:
            return True
    return False


def _mostly_json(lines: list[str]) -> bool:
    """Most non-empty lines are one JSON object each."""
    texts = [ln for ln in lines if ln.strip()]
    objs = sum(1 for ln in texts if ln[:1] == "{" and ln.rstrip().endswith("}"))
    return bool(texts) and objs * 2 >= len(texts)


INNER_SAMPLE = 24  # head lines a prefix behind a fixed one is learned from


class _Scheme:
    """File-level prefix schemes that are too ambiguous to accept per line (srun labels, pdsh host prefixes)."""

    def __init__(self, head_lines: list[str]):
        head_lines_all = head_lines
        n = max(1, len(head_lines))
        # both prefixes end in ": " within the first few dozen characters: test that before any regex
        head_lines = [ln for ln in head_lines if 0 < ln.find(": ", 0, 80)]
        labels = sum(1 for ln in head_lines if ln[:1] in " 0123456789P" and SRUN_LABEL_RE.match(ln))
        self.srun = labels >= max(3, n // 3) or (labels >= 8 and _labelled_block(head_lines_all))
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
        # a collector's prefix in front of another (journald around a logger's `DATE TIME (worker_7) : `): the inner
        # one is learned from what the outer leaves, the outer being learned (learned_inner) or a fixed one
        # (learned_after: applied after postmortem.parsers.prefixes has taken the fixed prefixes off)
        self.learned_inner = None if self.learned is None else _learned_prefix(
            [self.learned.strip(ln)[0] for ln in head_lines_all[:SCHEME_SAMPLE]])
        self.learned_after = None
        self.jsonl_prefixed = False
        if not self.jsonl:
            sample = [ln for ln in head_lines_all[:INNER_SAMPLE] if ln.strip()]
            behind = [self._behind(ln)[0] for ln in sample]
            changed = sum(b != ln for b, ln in zip(behind, sample))
            if self.learned is None and changed >= learned_prefix.MIN_SHARE * max(1, len(sample)):
                self.learned_after = learned_prefix.learn(behind, behind_stamp=True)
            # JSON-lines records behind a collector's prefix (`trainer-1  | {"ts": ...}`): unwrapped after it
            self.jsonl_prefixed = changed * 2 >= len(sample) > 0 and _mostly_json(behind)
        self.actors = actor_ranks.scheme_for(head_lines_all)  # Ray actors' `(Name pid=P)` prefixes -> ranks

    def learn_from(self, lines: list[str]) -> None:
        """A collector prefix the head did not show, learned from other lines of the file (its end): a job's
        output after a long start-up that a collector did not prefix (or prefixed otherwise)."""
        if self.learned is None and not self.jsonl and lines:
            self.learned = _learned_prefix(lines)
            if self.learned is not None:
                self.learned_inner = _learned_prefix([self.learned.strip(ln)[0] for ln in lines])

    def _behind(self, raw: str) -> tuple[str, dict]:
        """The line without its collector prefix: the learned one, else the fixed ones."""
        return self.learned.strip(raw) if self.learned is not None else strip_prefixes(raw)

    def json_behind_prefix(self, raw: str) -> tuple[str, dict] | None:
        """(the JSON text behind the collector prefix, what the prefix said), or None."""
        if not self.jsonl_prefixed:
            return None
        rest, info = self._behind(raw)
        return (rest, info) if rest[:1] == "{" else None

    @property
    def active(self) -> bool:
        return bool(self.srun or self.hosts or self.learned or self.actors is not None)

    def strip(self, line: str) -> tuple[str, dict]:
        info: dict = {}
        if self.learned is not None:
            line, info = self.learned.strip(line)
            if self.learned_inner is not None:
                line, inner = self.learned_inner.strip(line)
                info = {**info, **inner, **({"ts": inner["ts"]} if "ts" in inner else {})}
        if self.hosts:
            m = HOST_PREFIX_RE.match(line)
            if m and m.group("host") in self.hosts:
                info["host"] = m.group("host")
                line = line[m.end():]
        if self.actors is not None:
            line = self.actors.note(line, info)
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
            and "Warning" not in message and "warn(" not in message and not _library_diag(message)
            # a logger's error record (`[train][ERROR] - Training failed` before a traceback) is the failure's
            # first line, not the work the rank was doing
            and "ERROR" not in message[:60] and "CRITICAL" not in message[:60])


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

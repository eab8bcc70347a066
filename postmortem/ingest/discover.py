"""Stage 1: walk a path and list every input file with its kind, rank hint and any reason it cannot be read."""
from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import asdict, dataclass

from postmortem.ingest import archive, prose, textio
from postmortem.ingest.textio import display_path  # noqa: F401 - re-exported (parsers and tests name it here)

KINDS = ("rank_log", "json", "collect_manifest", "nccl_log", "pyspy", "pyspy_json", "nvidia_smi", "dmesg", "torchrun_error",
         "flight_recorder", "host_memory", "stack_dump", "launch_config", "notebook", "binary", "unknown")

MAX_FILES = 1_000_000  # a guard against pathological trees; beyond it files are listed as skipped


@dataclass(slots=True)  # thousands of them in a big job: no __dict__ per file
class Source:
    """One input file as discovered: where it is, what it looks like, what its path says about rank/host."""
    path: str                      # absolute path on disk
    source: str                    # display path, relative to the analysed root
    kind: str = "unknown"
    rank: int | None = None        # from the path only; parsers refine per line
    local_rank: int | None = None
    attempt: int | None = None
    host: str | None = None
    pid: int | None = None
    compression: str | None = None
    bytes: int = 0
    problem: str | None = None     # set when the file is skipped
    exact_bytes: int | None = None  # its share of the job's exact budget (postmortem.parsers.prefilter.exact_shares)
    every_step: bool = False        # keep a row for every step line (analyze(all_steps=True)), no thinning

    def to_dict(self) -> dict:
        """Plain dict (for pickling to worker processes and for JSON)."""
        return asdict(self)


_PATH_RANK_PATTERNS = [
    # torchrun --log-dir: <run>/attempt_K/<local_rank>/{stdout,stderr}.log|error.json (a collector that archives
    # them may put them a folder or two further down: the numbered folder under attempt_K still names the rank)
    (re.compile(r"attempt_(?P<attempt>\d+)/(?P<local_rank>\d+)/(?:[^/]{1,64}/){0,2}(?:std(?:out|err)\.log|error\.json)"
                r"(?:\.gz)?$"), "local"),
    (re.compile(r"(?:^|[/_.-])nccl_trace_rank_(?P<rank>\d+)", re.I), "global"),
    # Open MPI's --output-filename DIR: DIR/<job>/rank.<N>/stdout|stderr (4.x)
    (re.compile(r"(?:^|/)rank\.(?P<rank>\d{1,6})/std(?:out|err|diag)(?:\.gz)?$"), "global"),
    # submitit's per-task files: `<job>_<task>_log.out|err` (an array job's `<job>_<index>_<task>_log.out`)
    (re.compile(r"(?:^|/)\d+(?:_\d+)?_(?P<rank>\d{1,5})_log\.(?:out|err)(?:\.gz)?$"), "global"),
    (re.compile(r"(?:^|[/_.-])rank[_-]?(?P<rank>\d+)(?=[/_.-]|$)", re.I), "global"),
    # Azure ML's user_logs/std_log_process_<N>.txt, per-task files (`task_3.log`): one file per process of the job
    (re.compile(r"(?:^|[/_.-])(?:process|proc|task)[_-]?(?P<rank>\d{1,6})\.(?:txt|log|out|err)(?:\.gz)?$", re.I),
     "global"),
    (re.compile(r"_dump_(?P<rank>\d+)(?:\.\w+)*$"), "global"),
    (re.compile(r"(?:^|/)[A-Za-z][\w]*?-(?P<rank>\d{1,4})\.log(?:\.gz)?$"), "global"),
    # Slurm's per-task output (`--output job_%j.%t.out`, `slurm-%j_%t.err`): the job id, then the task id
    (re.compile(r"(?:^|/)(?:[A-Za-z][\w-]*?[_-])?\d{2,}[._](?P<rank>\d{1,5})\.(?:out|err|log)(?:\.gz)?$"), "global"),
]
_NCCL_FILE_RE = re.compile(r"nccl[._-](?!trace)(?P<host>[\w-]+)[._](?P<pid>\d+)(?:\.\w+)?$", re.I)


def path_hints(relpath: str) -> dict:
    """Rank, local rank, attempt, host and pid that a file path states (never guessed)."""
    rel = relpath.replace(os.sep, "/")
    hints: dict = {}
    for pattern, scope in _PATH_RANK_PATTERNS:
        m = pattern.search(rel)
        if not m:
            continue
        d = m.groupdict()
        if scope == "local":
            hints["local_rank"] = int(d["local_rank"])
            hints["attempt"] = int(d["attempt"])
        else:
            hints["rank"] = int(d["rank"])
        break
    m = _NCCL_FILE_RE.search(rel)
    if m:
        hints["host"], hints["pid"] = m.group("host"), int(m.group("pid"))
    return hints


_NCCL_LINE = re.compile(rb"^(?:\[[^\]]+\] )?[^:\s]+:\d+:\d+ (?:\[\d+\] )?.*NCCL (?:INFO|WARN|TRACE)", re.M)
_DMESG_LINE = re.compile(rb"^(?:\[\s*\d+\.\d+\]|\[\w{3} \w{3} +\d+ [\d:]+ \d{4}\]|\w{3} +\d+ [\d:]+ \S+ kernel:|\d{4}-\d\d-\d\dT[\d:,.]+[+-]\d\d:?\d\d )", re.M)
_PYSPY_ERROR = re.compile(rb"^(?:Error: |Permission Denied: Try running again with elevated permissions)")
# gdb sessions (`bt`, `py-bt`) and hanging_threads reports; faulthandler dumps (a file that starts with one)
_GDB_HANG_HDR = re.compile(rb"^(?:\(gdb\) |#\d+\s+0x[0-9a-fA-F]+ in |#\d+ Frame 0x[0-9a-fA-F]+, for file |"
                           rb"\s*-{3,}\s*Thread \d+.{0,80} hangs\s*-{3,}|Thread \d+ \((?:Thread 0x|LWP )|"
                           rb"\[Switching to thread )", re.M)
_FH_HDR = re.compile(rb"^(?:(?:Current thread|Thread) 0x[0-9a-fA-F]+ (?:\[[^\]]*\] )?|Stack |Traceback )"
                     rb"\(most recent call first\):", re.M)
_FH_FIRST = re.compile(rb"^(?:Fatal Python error|Timeout \(|(?:Current thread|Thread) 0x|Stack \(|Traceback \(most recent call first)")
_STACK_LINE = re.compile(rb"^(?:\(gdb\) |#\d+ |\s*-{3,}\s*Thread \d+|\s+File \"|\s+from /|Timeout \(|"
                         rb"(?:Current thread|Thread|Stack|Traceback|Fatal Python error|\[Switching)\b|"
                         rb"\s+<(?:no Python frame|built-in))", re.M)
_PYSPY_TEXT = re.compile(rb"^(?:Process \d+: |Thread (?:0x[0-9A-Fa-f]+|\d+) \((?:idle|active|active\+gil|gil)\))", re.M)
_SMI_TEXT = re.compile(rb"NVIDIA-SMI \d|==============NVSMI LOG|<nvidia_smi_log>|memory\.used \[MiB\]|memory\.used, |"
                       rb"Unable to determine the device handle for GPU|No devices were found|NVIDIA-SMI has failed")
# Default-table GPU rows (also grep excerpts of them): `|   0  GeForce GTX 1080    Off  | 00000000:01:00.0  On |`
# and `| 58%   70C    P2    67W / 200W |   1906MiB /  8111MiB |`.
_SMI_ROWS = re.compile(rb"^\|\s{1,8}\d{1,3}\s+\S[^|\n]{0,60}?\s(?:On|Off)\s*\|\s+[0-9A-Fa-f]{4,8}:[0-9A-Fa-f:.]{4,12}\s|"
                       rb"^\|[^|\n]{1,60}\|\s*\d{1,7}MiB\s*/\s*\d{1,7}MiB\s*\|", re.M)  # bounded: linear on junk
_SMI_CSV = re.compile(rb"^(?:timestamp|index|name|pci\.bus_id|uuid|gpu_uuid|gpu_bus_id|pid|memory\.\w+|utilization\.\w+|"
                      rb"temperature\.\w+|power\.[\w.]+)(?: \[[^\]]+\])?(?:, [a-z][\w.]*(?: \[[^\]]+\])?)+\s*$|"
                      rb"nvidia-smi .{0,200}?--query-(?:gpu|compute-apps)=", re.M)
# `free` (repeated) and `vmstat` output: host memory snapshots.
_FREE_HDR = re.compile(rb"^\s+total\s+used\s+free\s+shared\s+(?:buff/cache|buffers)", re.M)
_FREE_ROW = re.compile(rb"^(?:Mem|Swap|Low|High|Total|-/\+ buffers/cache):\s+\S", re.M)
_VMSTAT_HDR = re.compile(rb"^\s*procs\s+-+\s*memory|^\s*r\s+b\s+swpd\s+free\s", re.M)
_VMSTAT_ROW = re.compile(rb"^\s*\d+\s+\d+(?:\s+\d+){14,}", re.M)


def _nl(rx: re.Pattern) -> re.Pattern:
    """`rx` (every branch anchored with `^`, multiline) as `\n`-prefixed, to be run on b"\n" + head: the literal
    prefix lets `re` jump from newline to newline instead of trying every byte (~5x faster on a 16 KB head).

    The same lines match. `findall` counts are the same too for a pattern whose matches never end with a newline
    (a match ending in one would let the original match again at the very next byte, where the copy has no `\n`
    left to consume); that holds for every pattern counted this way (_NCCL_LINE, _DMESG_LINE)."""
    pattern = rx.pattern
    assert pattern.startswith(b"^") and b"|^" not in pattern
    return re.compile(b"\n" + pattern[1:], rx.flags)


_SNIFF_NCCL_NL = _nl(_NCCL_LINE)
_SNIFF_DMESG_NL = _nl(_DMESG_LINE)
_SNIFF_PYSPY_NL = _nl(_PYSPY_TEXT)
_SNIFF_FH_NL = _nl(_FH_HDR)
_SNIFF_GDB_NL = _nl(_GDB_HANG_HDR)
# _SMI_CSV's first branch (a header line of query names); its second (a command echo) needs "--query-".
_SNIFF_CSV_HDR_NL = re.compile(b"\n" + _SMI_CSV.pattern[1:_SMI_CSV.pattern.index(b"|nvidia-smi ")], re.M)
_SNIFF_MEM_HDR_NL = re.compile(b"\n(?:" + _FREE_HDR.pattern[1:] + b"|" + _VMSTAT_HDR.pattern[1:].replace(b"|^", b"|")
                               + b")", re.M)
assert _VMSTAT_HDR.pattern.count(b"|^") == 1 and _FREE_HDR.pattern.startswith(b"^")
# How every line a _SNIFF_*_NL pattern above (but NCCL/dmesg) can match begins: a head with no such line start
# skips them all. Every branch starts with a literal or a class, which `re` rejects in one step per line. A match
# that starts with a blank line's `\s*` also matches on the line the blanks end before (then it starts with a
# non-newline blank, or directly with its word: `total` for _FREE_HDR's `\s+total`).
_SNIFF_GATE_NL = re.compile(
    rb"\n(?:[ \t\r\f\v\-#]|t(?:otal|imestamp|emperature\.)|index|name|p(?:ci\.bus_id|id|ower\.|rocs)|"
    rb"u(?:uid|tilization\.)|gpu_(?:uuid|bus_id)|memory\.|r\s|Process |Thread |Current thread |Stack |Traceback |"
    rb"\(gdb\) |\[Switching to thread )")
_SNIFF_PIPE_NL = re.compile(rb"\n\|")
_SNIFF_DEVICE = re.compile(rb"device(?: handle|s were found)")


def _smi_text(head: bytes) -> bool:
    """_SMI_TEXT.search(head), skipped when no branch's literal (SMI, smi_log, memory.used, device...) is there."""
    if not (b"SMI" in head or (b"<" in head and b"smi_log" in head) or b"memory.used" in head
            or _SNIFF_DEVICE.search(head)):
        return False
    return _SMI_TEXT.search(head) is not None


def _count_at_least(rx_nl: re.Pattern, padded: bytes, need: int) -> bool:
    """len(rx_nl.findall(padded)) >= need, stopping at `need` matches."""
    if need <= 0:
        return True
    n = 0
    for _ in rx_nl.finditer(padded):
        n += 1
        if n >= need:
            return True
    return False


def sniff_kind(head: bytes, relpath: str, _stripped: bool = False) -> str:
    """Decide an input kind from the first bytes of content, with the path as a hint."""
    name = relpath.rsplit("/", 1)[-1].lower()
    if name.endswith(".gz"):
        name = name[:-3]  # (the head is the decompressed content: `train.ipynb.gz` is a notebook)
    if not head:
        return "rank_log"  # empty file: listed, nothing to parse
    if head[:1] == b"\x80" and len(head) > 2 and head[1] <= 5:  # pickle protocol header
        return "flight_recorder"
    if _looks_binary(head):
        return "binary"
    stripped = head.lstrip()
    if name.endswith(".ipynb") and stripped[:1] == b"{" and b'"cells"' in stripped[:65536]:
        return "notebook"  # an executed notebook: its outputs are the run's console (parsers/notebook.py)
    if stripped[:1] in (b"{", b"["):
        kind = _sniff_json(stripped)
        if kind:
            return kind
        if _is_json_document(stripped):
            return "json"
    # Every regex below is run only where a cheap test (a literal, or one newline-to-newline pass) says it can
    # match: the checks and their order are those of the plain cascade, so every decision is the same.
    if _smi_text(head) and (b"NVIDIA-SMI" in head or b"nvidia_smi_log" in head or b"NVSMI" in head
                            or b"memory.used" in head or head.count(b"\n") < 40):
        return "nvidia_smi"
    lines = head.count(b"\n") + 1
    padded = b"\n" + head
    anchored = _SNIFF_GATE_NL.search(padded) is not None
    # every _SMI_ROWS match starts a line with "|"
    if b"|" in head and _SNIFF_PIPE_NL.search(padded) and len(_SMI_ROWS.findall(head)) * 3 >= lines:
        return "nvidia_smi"
    if (anchored and _SNIFF_CSV_HDR_NL.search(padded)) or (b"--query-" in head and _SMI_CSV.search(head)):
        return "nvidia_smi"
    if anchored and _SNIFF_MEM_HDR_NL.search(padded):
        mem_lines = sum(len(rx.findall(head)) for rx in (_FREE_HDR, _FREE_ROW, _VMSTAT_HDR, _VMSTAT_ROW))
        if mem_lines * 2 >= len([ln for ln in head.splitlines() if ln.strip()]):
            return "host_memory"
    if anchored and (b"Python v" in head or b"Thread " in head[:200]) and _SNIFF_PYSPY_NL.search(padded):
        return "pyspy"
    if _PYSPY_ERROR.match(stripped) and (b"py_spy::" in head or b"target process" in head
                                         or stripped.startswith(b"Permission Denied")):
        return "pyspy"  # py-spy's own error text: parsed into a problem ("py-spy could not dump")
    if anchored:
        gdb_hang = _SNIFF_GDB_NL.search(padded)
        if gdb_hang or _SNIFF_FH_NL.search(padded):
            body = [ln for ln in head.splitlines() if ln.strip()]
            # stack lines dominate (a dump, not a log); a faulthandler dump inside a log is left to the rank_log parser
            if len(_STACK_LINE.findall(head)) * 5 >= len(body) * 2 and (gdb_hang or _FH_FIRST.match(body[0])):
                return "stack_dump"
    if _HEADLESS_FRAME.search(padded) and _headless_stack(head):
        return "pyspy"  # frames without py-spy's Process/Thread header (an excerpt pasted from a dump)
    need = max(2, lines // 2)
    if head.count(b"NCCL ") >= need and _count_at_least(_SNIFF_NCCL_NL, padded, need):
        return "nccl_log"  # (every _NCCL_LINE match holds its own "NCCL ")
    if "dmesg" in name or name in ("syslog", "kern.log") or _count_at_least(_SNIFF_DMESG_NL, padded, max(1, lines // 2)):
        return "dmesg"
    if not _stripped:
        # A log shipper's stamps/ids in front of every line hide what the lines are: judge them without it.
        from postmortem.parsers.learned_prefix import strip_head
        bare = strip_head(head)
        if bare != head:
            kind = sniff_kind(bare, relpath, _stripped=True)
            if kind in ("pyspy", "stack_dump", "nccl_log", "notebook"):
                return kind
    return "rank_log"


# py-spy's `func (file.py:line)` frame lines written flush left, as in excerpts pasted without the dump's header.
_HEADLESS_FRAME = re.compile(rb"\n[ \t]*[\w.<>]+ +\([\w./<> -]+\.pyx?:\d+\)")
_HEADLESS_LINE = re.compile(rb"^[ \t]*[\w.<>]+ +\([\w./<> -]+\.pyx?:\d+\)[ \t]*(?:#.*)?$")


def _headless_stack(head: bytes) -> bool:
    """Most non-blank lines are py-spy frame lines (and there are at least three)."""
    body = [ln for ln in head.splitlines() if ln.strip()]
    frames = sum(1 for ln in body if _HEADLESS_LINE.match(ln))
    return frames >= 3 and frames * 5 >= len(body) * 3


_CONTROL_BYTES = bytes(range(0, 9)) + bytes(range(14, 32))


def _looks_binary(head: bytes) -> bool:
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 text
        return False
    sample = head[:4096]
    nul = sample.count(b"\x00")
    ctrl = len(sample) - len(sample.translate(None, _CONTROL_BYTES)) - nul  # bytes < 9 or 13 < b < 32, at C speed
    # DataLoader's C handler writes a single NUL into otherwise normal text: tolerate a few.
    if nul > max(8, len(sample) // 50) or ctrl > len(sample) // 10:
        return True
    invalid = sample[:-4].decode("utf-8", "replace").count("\ufffd")  # the cut at the end may split a character
    return invalid > max(16, len(sample) // 8)


def _sniff_json(stripped: bytes) -> str | None:
    text = stripped[:8192].decode("utf-8", "replace")
    if text.startswith("["):
        if '"thread_id"' in text or '"frames"' in text:
            return "pyspy_json"
        return None
    if '"collector": "postmortem-collect"' in text:
        return "collect_manifest"
    # A flight-recorder dump by its structure: an `entries` list whose records carry the recorder's own fields.
    # (Keys may be sorted, so pg_config/pg_status/version can come after megabytes of entries.)
    if '"entries"' in text and any(k in text for k in ('"pg_config"', '"version"', '"pg_status"',
                                                        '"collective_seq_id"', '"profiling_name"', '"record_id"')):
        return "flight_recorder"
    if '"message"' in text and ('"extraInfo"' in text or '"errorCode"' in text or '"py_callstack"' in text):
        return "torchrun_error"
    try:
        obj = json.loads(stripped.decode("utf-8", "replace")) if len(stripped) < 8192 else None
    except (ValueError, RecursionError):  # deeply nested JSON exhausts the C scanner's recursion
        obj = None
    if isinstance(obj, dict) and "message" in obj:
        return "torchrun_error"
    return None


def _is_json_document(stripped: bytes) -> bool:
    """A whole JSON document (metadata, configs) rather than JSON-lines logging: not a log, not line-parsed."""
    first = stripped.split(b"\n", 1)[0].strip()
    try:
        json.loads(first.decode("utf-8", "replace"))
        return False  # the first line is a complete JSON value: JSON-lines log
    except (ValueError, RecursionError):
        pass
    try:
        json.loads(stripped.decode("utf-8", "replace"))
        return True
    except (ValueError, RecursionError):
        # Cut off by the sniff window: a pretty-printed document still starts with "{\n  \"key\":".
        return bool(re.match(rb'^[\[{]\s*\n\s*["{\[]', stripped))


def discover(path: str) -> list[Source]:
    """List every file under `path` (or the file itself), sorted by display path; unreadable ones carry a problem."""
    root = os.path.abspath(path)
    if not os.path.exists(root) and not os.path.islink(root):
        raise FileNotFoundError(f"no such file or directory: {path}")
    if not os.path.isdir(root) and archive.is_archive(root):
        return _discover_archive(root)
    if not os.path.isdir(root):
        found = [_describe(root, os.path.basename(root), {})]
    else:
        found = list(_walk(root))
    found.sort(key=lambda s: (s.source, s.path))
    return found


def holds_at_least(path: str, limit: int) -> bool:
    """Whether the directory tree at `path` holds at least `limit` bytes of regular files (stops counting there)."""
    total, stack, seen = 0, [path], set()
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            if entry.inode() not in seen:
                                seen.add(entry.inode())
                                stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_size
                            if total >= limit:
                                return True
                    except OSError:
                        continue
        except OSError:
            continue
    return False


class ArchiveSources(list):
    """The sources of an archive's members; holds the temporary copy they are read from for as long as it lives."""

    def __init__(self, items, extracted):
        super().__init__(items)
        self.extracted = extracted


def _discover_archive(path: str) -> list[Source]:
    """Members of a .tar.gz/.tgz/.tar/.zip, named as inside the archive; members not copied carry their reason."""
    try:
        extracted = archive.extract(path)
    except archive.ArchiveError as exc:
        return [Source(path=path, source=display_path(os.path.basename(path)), kind="binary", problem=str(exc),
                       bytes=os.path.getsize(path))]
    found = list(_walk(extracted.root))
    found.extend(Source(path=path, source=name, kind="unknown", problem=problem)
                 for name, disk, problem in extracted if problem)
    found.sort(key=lambda s: (s.source, s.path))
    return ArchiveSources(found, extracted)




def _walk(root: str):
    """Depth-first, iterative (no recursion limit on deep trees); symlinks are followed only inside the tree."""
    root_real = os.path.realpath(root)
    seen_dirs: set[tuple[int, int]] = set()
    seen_files: dict = {}
    stack = [root]
    count = 0
    while stack:
        current = stack.pop()
        try:
            st = os.stat(current)
        except OSError as exc:
            yield _problem(current, root, f"cannot open directory: {exc.strerror or exc}")
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen_dirs:
            yield _problem(current, root, "symlink loop or repeated directory; skipped", kind="unknown")
            continue
        seen_dirs.add(key)
        try:
            with os.scandir(current) as it:
                # Symlinks last: a file reached both directly and through a link is read under its own name.
                entries = sorted(it, key=lambda e: (_is_link(e), e.name))
        except OSError as exc:
            yield _problem(current, root, f"cannot list directory: {exc.strerror or exc}")
            continue
        subdirs = []
        for entry in entries:
            full = entry.path
            rel = _rel(full, root)
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=True)
            except OSError:
                is_link, is_dir = False, False
            if is_link and not _inside(full, root_real):
                yield _outside(full, rel)
                continue
            if is_dir:
                if entry.name in (".git", "__pycache__"):
                    continue
                subdirs.append(full)
                continue
            count += 1
            if count > MAX_FILES:
                yield _problem(full, root, f"more than {MAX_FILES} files; skipped")
                continue
            yield _describe(full, rel, seen_files)
        stack.extend(reversed(subdirs))


def _is_link(entry) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return False


def _inside(full: str, root_real: str) -> bool:
    try:
        real = os.path.realpath(full)
        return os.path.commonpath([real, root_real]) == root_real
    except (OSError, ValueError):
        return False


def _outside(full: str, rel: str) -> Source:
    """A symlink leading out of the analysed tree: listed, never followed (a stranger's bundle could point at /)."""
    src = Source(path=full, source=display_path(rel), **path_hints(rel))
    try:
        st = os.stat(full)
        what = "directory" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else \
            textio.file_type(st.st_mode)
    except OSError:
        what = "missing path"
    src.problem = (f"symlink to a {what} outside the analysed tree; not followed "
                   f"(analyse the target directly if it belongs to the job)")
    return src


def _rel(full: str, root: str) -> str:
    if full.startswith(root) and full[len(root):len(root) + 1] == os.sep:
        rel = full[len(root) + 1:]  # the walk builds paths by joining onto root: no need for relpath's work
    else:
        rel = os.path.relpath(full, root)
    return rel.replace(os.sep, "/") if os.sep != "/" else rel


def _problem(full: str, root: str, why: str, kind: str = "unknown") -> Source:
    rel = _rel(full, root) if full != root else os.path.basename(full)
    return Source(path=full, source=display_path(rel), kind=kind, problem=why)


HEAD_BYTES = 16384

# Files that sit beside a job's logs but are not evidence of the run: its documentation, its code, its configuration
# and build files. Their text quotes errors and settings (a README that shows the traceback it explains, a config with
# the batch size) that never happened in this run, so they are listed and not read. Judged by the file's name only,
# i.e. by input kind; a log named `*.log`/`*.txt`/`*.out` is always read.
_NOT_EVIDENCE_NAME = re.compile(
    r"(?i)^(?:readme|license|licence|copying|changelog|changes|notice|authors|contributing|code_of_conduct|"
    r"dockerfile|makefile|containerfile|requirements[\w.-]*\.txt|pyproject\.toml|setup\.(?:py|cfg)|"
    r"environment\.ya?ml)(?:\.(?:md|markdown|rst|txt|adoc)(?:\.gz)?)?$|"
    r"\.(?:md|markdown|rst|adoc|py|pyi|pyx|ps1|bat|c|cc|cpp|cxx|h|hpp|cu|cuh|js|ts|java|go|"
    r"rs|rb|lua|r|jl|lock|gitignore|gitattributes|editorconfig)(?:\.gz)?$")
# (.ipynb is not here: an executed notebook's outputs are the console of a run started from it; parsers/notebook.py)
NOT_EVIDENCE_PROBLEM = "documentation or code beside the logs, not output of the run; not read"
# The run's launch script and configuration: they state its settings (batch sizes, periods, the world size), which
# the rules compare with what happened; read for those settings only, never for failures (a script can echo errors).
_LAUNCH_CONFIG_NAME = re.compile(r"(?i)\.(?:sh|bash|zsh|fish|slurm|sbatch|yaml|yml|toml|cfg|ini|conf|env)(?:\.gz)?$")


def not_evidence(relpath: str) -> bool:
    """Whether a file's name says it is documentation, code or configuration rather than something the run wrote."""
    return bool(_NOT_EVIDENCE_NAME.search(relpath.rsplit("/", 1)[-1]))


def _describe(full: str, rel: str, seen_files: dict) -> Source:
    """Open the file once (non-blocking, regular files only), read its head, and sniff its kind."""
    src = Source(path=full, source=display_path(rel), **path_hints(rel))
    if not_evidence(rel):
        src.problem = NOT_EVIDENCE_PROBLEM
        try:
            src.bytes = os.path.getsize(full)
        except OSError:
            pass
        return src
    if _LAUNCH_CONFIG_NAME.search(rel.rsplit("/", 1)[-1]) and os.path.isfile(full):
        src.kind = "launch_config"
        try:
            src.bytes = os.path.getsize(full)
        except OSError:
            pass
        return src
    if rel.lower().endswith(archive.ARCHIVE_SUFFIXES) and os.path.isfile(full):
        # Archives are opened only as the analysed path itself: one job per analysis, bounded work.
        src.kind, src.bytes = "binary", os.path.getsize(full)
        src.problem = f"archive inside the tree, not opened; analyse it on its own: postmortem analyze {src.source}"
        return src
    try:
        fd, st = textio.open_regular(full)
    except textio.InputProblem as exc:
        src.problem = str(exc)
        try:  # still say how big an unreadable regular file is
            st = os.stat(full)
            src.bytes = st.st_size if stat.S_ISREG(st.st_mode) else 0
        except OSError:
            pass
        return src
    try:
        src.bytes = st.st_size
        ident = (st.st_dev, st.st_ino)
        if ident in seen_files:
            src.problem = f"same file as {seen_files[ident]} (a link); not read twice"
            return src
        seen_files[ident] = src.source
        raw_head = os.read(fd, HEAD_BYTES)
    except OSError as exc:
        src.problem = f"cannot read: {exc.strerror or exc}"
        return src
    finally:
        os.close(fd)
    head = raw_head
    if raw_head[:2] == textio.GZIP_MAGIC:
        src.compression = "gzip"
        head = textio.read_head(full, HEAD_BYTES)
    encoding = textio.sniff_encoding(head)
    if encoding.startswith("utf-16"):
        # Sniff UTF-16 text by its content, not by its interleaved NULs.
        head = head[: len(head) // 2 * 2].decode(encoding, "replace").encode("utf-8")
    try:
        src.kind = sniff_kind(head, rel)
    except RecursionError:
        src.kind = "json"
    if src.kind == "rank_log" and prose.looks_like_prose(head):  # a write-up beside the logs quotes, never shows
        src.problem = prose.PROBLEM
    elif src.kind == "binary":
        src.problem = "binary content (not a log, dump or JSON file); not parsed"
    elif src.kind == "json":
        src.problem = "JSON document of an unrecognised shape (not a log, py-spy, error or flight-recorder file); not parsed"
    elif src.compression and not head:
        src.problem = "compressed file could not be decompressed"
    return src

"""Stage 1: walk a path and list every input file with its kind, rank hint and any reason it cannot be read."""
from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import asdict, dataclass

from postmortem import textio

KINDS = ("rank_log", "json", "nccl_log", "pyspy", "pyspy_json", "nvidia_smi", "dmesg", "torchrun_error",
         "flight_recorder", "binary", "unknown")

MAX_FILES = 1_000_000  # a guard against pathological trees; beyond it files are listed as skipped


@dataclass
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

    def to_dict(self) -> dict:
        """Plain dict (for pickling to worker processes and for JSON)."""
        return asdict(self)


_PATH_RANK_PATTERNS = [
    # torchrun --log-dir: <run>/attempt_K/<local_rank>/{stdout,stderr}.log|error.json
    (re.compile(r"attempt_(?P<attempt>\d+)/(?P<local_rank>\d+)/(?:std(?:out|err)\.log|error\.json)(?:\.gz)?$"), "local"),
    (re.compile(r"(?:^|[/_.-])nccl_trace_rank_(?P<rank>\d+)", re.I), "global"),
    (re.compile(r"(?:^|[/_.-])rank[_-]?(?P<rank>\d+)(?=[/_.-]|$)", re.I), "global"),
    (re.compile(r"_dump_(?P<rank>\d+)(?:\.\w+)*$"), "global"),
    (re.compile(r"(?:^|/)[A-Za-z][\w]*?-(?P<rank>\d{1,4})\.log(?:\.gz)?$"), "global"),
]
_NCCL_FILE_RE = re.compile(r"nccl[._-](?P<host>[\w-]+)[._](?P<pid>\d+)(?:\.\w+)?$", re.I)


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
_PYSPY_TEXT = re.compile(rb"^(?:Process \d+: |Thread (?:0x[0-9A-Fa-f]+|\d+) \((?:idle|active|active\+gil|gil)\))", re.M)
_SMI_TEXT = re.compile(rb"NVIDIA-SMI \d|==============NVSMI LOG|<nvidia_smi_log>|memory\.used \[MiB\]|memory\.used, |"
                       rb"Unable to determine the device handle for GPU|No devices were found|NVIDIA-SMI has failed")


def sniff_kind(head: bytes, relpath: str) -> str:
    """Decide an input kind from the first bytes of content, with the path as a hint."""
    name = relpath.rsplit("/", 1)[-1].lower()
    if not head:
        return "rank_log"  # empty file: listed, nothing to parse
    if head[:1] == b"\x80" and len(head) > 2 and head[1] <= 5:  # pickle protocol header
        return "flight_recorder"
    if _looks_binary(head):
        return "binary"
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"["):
        kind = _sniff_json(stripped)
        if kind:
            return kind
        if _is_json_document(stripped):
            return "json"
    if _SMI_TEXT.search(head) and (b"NVIDIA-SMI" in head or b"nvidia_smi_log" in head or b"NVSMI" in head
                                   or b"memory.used" in head or head.count(b"\n") < 40):
        return "nvidia_smi"
    if len(_PYSPY_TEXT.findall(head)) >= 1 and (b"Python v" in head or b"Thread " in head[:200]):
        return "pyspy"
    lines = head.count(b"\n") + 1
    if len(_NCCL_LINE.findall(head)) >= max(2, lines // 2):
        return "nccl_log"
    if len(_DMESG_LINE.findall(head)) >= max(1, lines // 2) or "dmesg" in name or name in ("syslog", "kern.log"):
        return "dmesg"
    return "rank_log"


def _looks_binary(head: bytes) -> bool:
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 text
        return False
    sample = head[:4096]
    nul = sample.count(b"\x00")
    ctrl = sum(1 for b in sample if b < 9 or 13 < b < 32) - nul
    # DataLoader's C handler writes a single NUL into otherwise normal text: tolerate a few.
    return nul > max(8, len(sample) // 50) or ctrl > len(sample) // 10


def _sniff_json(stripped: bytes) -> str | None:
    text = stripped[:8192].decode("utf-8", "replace")
    if text.startswith("["):
        if '"thread_id"' in text or '"frames"' in text:
            return "pyspy_json"
        return None
    if '"entries"' in text and ('"pg_config"' in text or '"version"' in text or '"pg_status"' in text):
        return "flight_recorder"
    if '"message"' in text and ('"extraInfo"' in text or '"errorCode"' in text or '"py_callstack"' in text):
        return "torchrun_error"
    try:
        obj = json.loads(stripped.decode("utf-8", "replace")) if len(stripped) < 8192 else None
    except ValueError:
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
    except ValueError:
        pass
    try:
        json.loads(stripped.decode("utf-8", "replace"))
        return True
    except ValueError:
        # Cut off by the sniff window: a pretty-printed document still starts with "{\n  \"key\":".
        return bool(re.match(rb'^[\[{]\s*\n\s*["{\[]', stripped))


def discover(path: str) -> list[Source]:
    """List every file under `path` (or the file itself), sorted by display path; unreadable ones carry a problem."""
    root = os.path.abspath(path)
    if not os.path.exists(root) and not os.path.islink(root):
        raise FileNotFoundError(f"no such file or directory: {path}")
    if os.path.isfile(root):
        base = os.path.dirname(root)
        found = [_describe(root, os.path.basename(root))]
    else:
        base = root
        found = list(_walk(root))
    found.sort(key=lambda s: s.source)
    del base
    return found


def _walk(root: str):
    seen_dirs: set[tuple[int, int]] = set()
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
            entries = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError as exc:
            yield _problem(current, root, f"cannot list directory: {exc.strerror or exc}")
            continue
        subdirs = []
        for entry in entries:
            full = entry.path
            rel = _rel(full, root)
            try:
                is_dir = entry.is_dir(follow_symlinks=True)
            except OSError:
                is_dir = False
            if is_dir:
                if entry.name in (".git", "__pycache__"):
                    continue
                subdirs.append(full)
                continue
            count += 1
            if count > MAX_FILES:
                yield _problem(full, root, f"more than {MAX_FILES} files; skipped")
                continue
            yield _describe(full, rel)
        stack.extend(reversed(subdirs))


def _rel(full: str, root: str) -> str:
    rel = os.path.relpath(full, root)
    return rel.replace(os.sep, "/")


def _problem(full: str, root: str, why: str, kind: str = "unknown") -> Source:
    return Source(path=full, source=_rel(full, root) if full != root else os.path.basename(full), kind=kind,
                  problem=why)


def _describe(full: str, rel: str) -> Source:
    src = Source(path=full, source=rel, **path_hints(rel))
    try:
        st = os.stat(full)  # follows symlinks; a dangling link raises
    except OSError as exc:
        src.problem = f"cannot stat: {exc.strerror or exc} (dangling symlink?)"
        return src
    if not stat.S_ISREG(st.st_mode):
        what = "FIFO" if stat.S_ISFIFO(st.st_mode) else "device" if (stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(
            st.st_mode)) else "socket" if stat.S_ISSOCK(st.st_mode) else "special file"
        src.problem = f"not a regular file ({what}); not read"
        return src
    src.bytes = st.st_size
    if not os.access(full, os.R_OK):
        src.problem = "permission denied"
        return src
    try:
        with open(full, "rb") as fh:
            magic = fh.read(2)
    except OSError as exc:
        src.problem = f"cannot read: {exc.strerror or exc}"
        return src
    if magic == textio.GZIP_MAGIC:
        src.compression = "gzip"
    head = textio.read_head(full, 16384)
    src.kind = sniff_kind(head, rel)
    if src.kind == "binary":
        src.problem = "binary content (not a log, dump or JSON file); not parsed"
    elif src.kind == "json":
        src.problem = "JSON document of an unrecognised shape (not a log, py-spy, error or flight-recorder file); not parsed"
    elif src.compression and not head:
        src.problem = "compressed file could not be decompressed"
    return src

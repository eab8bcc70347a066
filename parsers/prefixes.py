"""Launcher and logging prefixes (FORMATS.md §0, §2.1, §4.1, §5), declared as data and stripped left to right."""
from __future__ import annotations

from dataclasses import dataclass

import regex

# Each prefix: name, anchored pattern, and sample lines with the fields they must yield (checked by load_prefixes).
# Groups that carry meaning: rank, local_rank, host, ts, level, pid. Everything else is consumed and dropped.
PREFIX_DEFS: list[dict] = [
    # torchrun --tee with `--role rank` (TorchTitan's launch): the tee's `[rank0]:` before torch's own `[rank0]: `
    # on a traceback line (two stacked) is the tee's, a local rank
    {"name": "torchrun_tee_rank_role", "pattern": r"\[rank(?P<local_rank>\d+)\]:(?=\[rank\d+\]:)",
     "samples": [("[rank0]:[rank0]: Traceback (most recent call last):", {"local_rank": "0"})]},
    {"name": "torch_excepthook", "pattern": r"\[rank(?P<rank>\d+)\]:\s?",
     "samples": [("[rank1]: ValueError: corrupt sample at step 3", {"rank": "1"})]},
    # torchrun --tee: `[{role}{local_rank}]:`; the role may be empty (TorchX's dist.ddp: `[1]:hello`), but a bare
    # `[1]:` alone on its line is the index of a failure in torchrun's own summary, not a prefix
    {"name": "torchrun_tee", "pattern": r"\[(?P<role>[A-Za-z_][A-Za-z_-]*?)?(?P<local_rank>\d+)\]:(?=.)",
     "samples": [("[default1]:[rank1]: ValueError: x", {"local_rank": "1"}),
                 ("[trainer0]:hello", {"local_rank": "0"}), ("[1]:Traceback (most recent call last):",
                                                             {"local_rank": "1"})]},
    # TorchX (`torchx run` / `torchx log`): `{role}/{replica} ` before each line of a replica (a node's agent); the
    # replica is a node, not a rank
    {"name": "torchx_replica", "pattern": r"(?P<host>[A-Za-z_][\w.-]{0,63}/\d{1,5}) (?=\S|  )",
     "samples": [("train/0 [1]:ValueError: x", {"host": "train/0"}),
                 ("trainer/3 W1129 02:34:21.110000 15113 torch/distributed/run.py:874] x", {"host": "trainer/3"})]},
    {"name": "mpirun_tag", "pattern": r"\[(?P<job>\d+),(?P<rank>\d+)\](?:\[(?P<host>[^:\]]+):(?P<pid>\d+)\])?<(?:stdout|stderr|stddiag)>:\s?",
     "samples": [("[1,3]<stdout>:test-nccl-efa-worker-0:23:75 [3] NCCL INFO Connected NVLS tree", {"rank": "3"}),
                 ("[1,0][node1:123]<stderr>:x", {"rank": "0", "host": "node1"})]},
    # SageMaker's MPI launcher (and Open MPI's --tag-output with names): `[1,mpirank:3,algo-1]<stdout>:`
    {"name": "sagemaker_mpi", "pattern": r"\[\d+,mpirank:(?P<rank>\d+),(?P<host>[\w.-]+)\]<(?:stdout|stderr)>:\s?",
     "samples": [("[1,mpirank:3,algo-1]<stdout>:[rank3]: ValueError: x", {"rank": "3", "host": "algo-1"})]},
    {"name": "lightning_rank", "pattern": r"\[rank: (?P<rank>\d+)\]\s",
     "samples": [("[rank: 1] Child process with PID 5 terminated with code 1.", {"rank": "1"})]},
    {"name": "rank_bracket", "pattern": r"\[(?:Rank|RANK) (?P<rank>\d+)\]:?\s",
     "samples": [("[Rank 0] step=100, skipped=0, lr=[0.001]", {"rank": "0"}), ("[RANK 3] hello", {"rank": "3"})]},
    # icefall / lhotse / VALL-E's setup_logger (icefall/utils.py): `%(asctime)s %(levelname)s [%(filename)s:%(lineno)d]
    # ({rank}/{world_size}) %(message)s` once the process group exists (the timestamp is stripped before this).
    {"name": "icefall_logger", "pattern": r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) \[[\w.-]+:\d+\] \((?P<rank>\d+)/\d+\) ",
     "samples": [("INFO [trainer.py:650] (5/8) Reaches end of dataloader.", {"rank": "5", "level": "INFO"})]},
    {"name": "ray_actor", "pattern": r"\((?P<actor>[A-Za-z_][\w.]*) pid=(?P<pid>\d+)(?:, ip=(?P<ip>[\d.]+))?\)\s",
     "samples": [("(RayWorkerWrapper pid=1019) INFO 01-29 07:44:20 selector.py:120] x", {"pid": "1019"})]},
    {"name": "logviewer_lineno", "pattern": r"\[\d{1,9}\] (?=\[)",
     "samples": [("[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] x", {})]},
    {"name": "wrapper_stream", "pattern": r"(?:stderr|stdout): ",
     "samples": [("stderr: ERROR:torch.distributed.elastic.multiprocessing.api:failed", {})]},
    # journald / syslog (`journalctl -u train`, /var/log/syslog): `Nov 27 04:58:10 host tag[pid]: `
    {"name": "syslog_line",
     "pattern": r"(?P<ts>(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d\d:\d\d:\d\d) "
                r"(?P<host>[\w.-]{1,64}) (?!kernel:)[\w./-]{1,64}(?:\[\d{1,10}\])?: ",
     "samples": [("Nov 27 04:58:10 gpu-node-3 python3[41000]: [rank1]: ValueError: x",
                  {"ts": "Nov 27 04:58:10", "host": "gpu-node-3"})]},
    # `docker compose logs`: the service's container name, padded, and a bar
    {"name": "compose_service", "pattern": r"[\w.-]{1,64}-\d{1,4} {1,40}\| ",
     "samples": [("trainer-1  | [rank1]: ValueError: x", {})]},
    # `kubectl logs --prefix`: [pod/NAME/CONTAINER]
    {"name": "kubectl_prefix", "pattern": r"\[pod/[\w.-]{1,253}/[\w.-]{1,63}\] ",
     "samples": [("[pod/train-worker-0/pytorch] [rank1]: ValueError: x", {})]},
    # kubelet's CRI container log files (/var/log/containers/*.log, `kubectl logs` of a node's files):
    # `<RFC 3339 time> <stream> <P|F> <line>`
    {"name": "cri_container_log",
     "pattern": r"(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) (?:stdout|stderr) [PF] ",
     "samples": [("2026-11-27T04:58:10.123456789Z stderr F [rank1]: ValueError: x",
                  {"ts": "2026-11-27T04:58:10.123456789Z"})]},
    # Hydra's job logging (`[%(asctime)s][%(name)s][%(levelname)s] - %(message)s`): the stamp's bracket runs
    # straight into the logger's
    {"name": "hydra_stamp", "pattern": r"\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\](?=\[)",
     "samples": [("[2026-11-29 02:43:26,549][train][ERROR] - Training failed", {"ts": "2026-11-29 02:43:26,549"})]},
    {"name": "iso_timestamp",
     "pattern": r"\[?(?P<ts>\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\]?(?: \|)?[ \t]",
     "samples": [("[2024-05-08 08:47:31,261] torch.distributed.elastic.multiprocessing.api: [WARNING] x",
                  {"ts": "2024-05-08 08:47:31,261"}),
                 ("2023-07-26 04:37:11.717 | INFO     | utils.train:start:110 - x", {"ts": "2023-07-26 04:37:11.717"})]},
    # Python logging with transformers'/accelerate's example format: `%(asctime)s - %(levelname)s - %(name)s - ...`
    # with datefmt `%m/%d/%Y %H:%M:%S` (month first; schema reads it so).
    {"name": "us_date_timestamp",
     "pattern": r"\[?(?P<ts>\d\d/\d\d/\d{4} \d\d:\d\d:\d\d(?:[.,]\d+)?)\]?(?: -)? ",
     "samples": [("06/12/2025 09:12:05 - INFO - __main__ - Training config: x", {"ts": "06/12/2025 09:12:05"})]},
    {"name": "syslog_timestamp",
     "pattern": r"(?P<ts>(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} \d\d:\d\d:\d\d) (?:(?P<host>[\w.-]+) (?=\S+:))?",
     "samples": [("Nov 20 16:03:25 RuntimeError: NCCL error", {"ts": "Nov 20 16:03:25"}),
                 ("May 15 23:09:30 node7 kernel: Out of memory", {"host": "node7"})]},
]


@dataclass(frozen=True)
class Prefix:
    """A compiled prefix definition."""
    name: str
    regex: regex.Pattern


class PrefixError(ValueError):
    """A prefix definition whose samples do not parse."""


def sample_match(find, what: str, line: str, want: dict, error: type):
    """find(line) for one sample of a declaration; raises `error` unless it matches and gives the declared values."""
    m = find(line)
    if not m:
        raise error(f"{what}: sample does not match: {line!r}")
    for key, value in want.items():
        if m.group(key) != value:
            raise error(f"{what}: {key}={m.group(key)!r}, want {value!r} in {line!r}")
    return m


def load_prefixes(defs: list[dict] = PREFIX_DEFS) -> list[Prefix]:
    """Compile prefix definitions, rejecting any whose sample lines do not yield the declared fields."""
    out = []
    for d in defs:
        rx = regex.compile(d["pattern"])
        for line, want in d["samples"]:
            sample_match(rx.match, f"prefix {d['name']}", line, want, PrefixError)
        out.append(Prefix(d["name"], rx))
    return out


PREFIXES = load_prefixes()
_FIRST_CHARS = set("[(sS0123456789JFMASOND")
# A logger's level word starts a prefix only after a timestamp was taken off the same line (icefall's
# `asctime LEVEL [file:line] (rank/world)`): c10/glog lines that begin with their level skip the prefix regex.
_AFTER_STAMP_CHARS = set("DIWEC")
_FIELDS = ("rank", "local_rank", "host", "ts", "pid")


def _combined(prefixes: list[Prefix]) -> tuple[regex.Pattern, dict[str, list[tuple[str, int]]]]:
    """All prefixes as one ordered alternation, each branch's groups renamed apart: one match call instead of one
    per prefix, and the first branch that matches is the first prefix that matches. Also, per branch (by its group
    name), the (field, group number) pairs it yields (numbers: the regex module looks names up slowly)."""
    branches, names_of = [], []
    for i, p in enumerate(prefixes):
        pattern = p.regex.pattern
        assert "(?P=" not in pattern and "\\g<" not in pattern  # no references to the renamed groups
        for name in p.regex.groupindex:
            pattern = pattern.replace(f"(?P<{name}>", f"(?P<p{i}_{name}>")
        branches.append(f"(?P<b{i}>{pattern})")
        names_of.append(list(p.regex.groupindex))
    rx = regex.compile("|".join(branches))
    fields = {f"b{i}": [(k, rx.groupindex[f"p{i}_{k}"]) for k in _FIELDS if k in names]
              for i, names in enumerate(names_of)}
    return rx, fields


_ALL_RE, _BRANCH_FIELDS = _combined(PREFIXES)


def _first_prefix_match(msg: str):
    """The match of the first prefix (in order) that matches a non-empty start of `msg`, one regex at a time."""
    for p in PREFIXES:
        m = p.regex.match(msg)
        if m and m.end() > 0:
            return m
    return None


def _note(info: dict, key: str, value: str | None) -> None:
    """Keep the first statement of a field (ranks as ints, the others when not empty), except the time: of stacked
    stamps the innermost is the program's own clock, the outer ones only say when a collector received the line."""
    if key in info and not (key == "ts" and value):
        return
    if key in ("rank", "local_rank"):
        if value is not None:
            info[key] = int(value)
    elif value:
        info[key] = value


# c10/glog-style level prefixes stay part of the message (they carry the level and file:line), but we read them.
C10_PREFIX = regex.compile(
    r"\[(?P<level>[IWEF])(?:(?P<mmdd>\d{4}) (?P<hms>\d\d:\d\d:\d\d)(?P<frac>\.\d+) )?\s*(?P<file>[\w.]+):(?P<line>\d+)\] ")
GLOG_PREFIX = regex.compile(
    r"(?P<level>[IWEF])(?P<mmdd>\d{4}) (?P<hms>\d\d:\d\d:\d\d)(?P<frac>\.\d+) +(?P<tid>\d+) (?P<file>[\w./-]+):(?P<line>\d+)\] ")
PYLOG_LEVEL = regex.compile(r"(?:\[(?P<l1>ERROR|WARNING|INFO|DEBUG|CRITICAL)\]|(?P<l2>ERROR|WARNING|CRITICAL):[\w.]+:)")


def strip_prefixes(line: str) -> tuple[str, dict]:
    """Strip stacked launcher/log prefixes from the left; return the message and what the prefixes said."""
    info: dict = {}
    msg = line
    for _ in range(8):  # prefixes stack a few deep at most
        if not msg or msg[0] not in _FIRST_CHARS and not (msg[0] in _AFTER_STAMP_CHARS and "ts" in info) \
                and " | " not in msg[:110] and not _replica_like(msg):
            break  # (docker compose's `service-1  | ` and TorchX's `role/0 ` start with any letter)
        m = _ALL_RE.match(msg)
        if m is None:
            break
        branch = _BRANCH_FIELDS.get(m.lastgroup)
        if m.end() > 0 and branch is not None:
            for key, group in branch:
                _note(info, key, m.group(group))
        else:  # an empty match (then a later prefix may match), or no branch known: one prefix at a time
            m = _first_prefix_match(msg)
            if m is None:
                break
            g = m.groupdict()
            for key in _FIELDS:
                _note(info, key, g.get(key))
        msg = msg[m.end():]
    m = _level(msg)
    if m is not None:
        info["level"] = m.group("level")
        if "ts" not in info and m.group("mmdd"):
            # glog's month, day and time (no year): `--MM-DDThh:mm:ss.ffffff`, the ISO 8601 form of a date without
            # a year; the table builder takes the year from the other sources (schema.resolve_years)
            mmdd = m.group("mmdd")
            info["ts"] = f"--{mmdd[:2]}-{mmdd[2:]}T{m.group('hms')}{m.group('frac')}"
    return msg, info


def _replica_like(msg: str) -> bool:
    """Whether a line may start with TorchX's `role/N ` (a cheap test before the prefix regex)."""
    sp = msg.find(" ", 2, 72)
    return sp > 0 and msg[sp - 1].isdigit() and "/" in msg[1:sp]


def _level(msg: str):
    """The c10/glog level prefix match at the start of a message (level, month-day, time), or None."""
    if msg[:1] == "[":
        return C10_PREFIX.match(msg)
    if msg[:1] in "IWEF":
        return GLOG_PREFIX.match(msg)
    return None

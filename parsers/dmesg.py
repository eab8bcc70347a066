"""Kernel logs (dmesg, journalctl -k, syslog/kern.log): OOM-killer kills, Xid/SXid, ECC, PCIe AER and NVLink faults.

postmortem.parsers.textlog already turns single OOM/Xid lines into `host_oom`/`gpu_hw` events; this parser adds what one line
alone cannot give: every timestamp prefix (FORMATS.md §3.3) as `ts` or an `uptime_s` attr, lines re-joined where a
terminal wrapped them, OOM kills with the invoking task, constraint and cgroup limit read from the lines around
them, Xid meanings, and multi-line "fallen off the bus" reports. Its rows use their own kinds (`kernel_oom_kill`,
`kernel_xid`, `kernel_gpu_error`) so they never duplicate textlog's.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone

from postmortem.parsers.base import ParseResult, register
from postmortem.parsers.xid import xid_info
from postmortem.ingest import textio
from postmortem.ingest.discover import Source
from postmortem.tables.joins import normalize_bus_id

MAX_EVENTS_PER_KIND = 5000
MAX_MESSAGE_CHARS = 4096     # kernel records are < 1 KiB; longer lines are junk or hostile
WRAP_MIN_CHARS = 60          # a physical line this long that is followed by an unprefixed line was wrapped
PAD_RUN_RE = re.compile(r"(?<=\S) {20,}(?=\S)")  # terminal padding pasted into the middle of a word

_MON = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
PREFIX_RE = re.compile(
    r"^(?:<\d{1,3}>)?"                                                           # /dev/kmsg priority
    r"(?:(?:kern|user|daemon|syslog|auth|local\d)\s*:\s*(?P<lvl>emerg|alert|crit|err|warn|notice|info|debug)\s*:\s)?"
    r"(?:\[\s*(?P<up>\d+\.\d+)\]\s?"                                             # dmesg raw
    rf"|\[(?P<ctime>{_DAY} {_MON} +\d{{1,2}} \d\d:\d\d:\d\d \d{{4}})\]\s?"        # dmesg -T
    r"|(?P<iso>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s+"  # --time-format iso, rsyslog
    rf"|(?P<sys>{_MON} +\d{{1,2}} \d\d:\d\d:\d\d(?:\.\d+)?)\s+)"                 # syslog / journalctl short
    r"(?:(?P<host>[\w.-]+) kernel:\s?)?"
    r"(?:\[\s*(?P<up2>\d+\.\d+)\]\s?)?")

CONSTRAINT_RE = re.compile(r"oom-kill:constraint=(?P<constraint>\w+)(?P<rest>.*)")
# comm is at most 15 chars in the kernel; the bound also keeps the lazy match linear on hostile lines.
KILL_RE = re.compile(r"(?:(?P<scope>Memory cgroup out of memory|Out of memory(?: \(oom_kill_allocating_task\))?)"
                     r": )?Kill(?P<ed>ed)? process (?P<pid>\d+) \((?P<comm>.{0,64}?)\)(?P<rest>(?:[ ,].*)?)$")
MEMCG_LIMIT_RE = re.compile(r"^memory: usage (?P<usage>\d+)kB, limit (?P<limit>\d+)kB")
KV_KB_RE = re.compile(r"(?P<k>total-vm|anon-rss|file-rss|shmem-rss|pgtables):\s*(?P<v>\d+)\s*kB")
XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9a-fA-F:.]+)\): (?P<xid>\d+)(?:, pid=(?P<pid>'?[^,]*?'?))?"
                    r"(?:, name=(?P<name>[^,]*))?(?:,\s*(?P<msg>.*))?$")
SXID_RE = re.compile(r"nvidia-nvswitch(?P<sw>\d+): SXid \((?:PCI:)?(?P<bus>[^)]*)\): (?P<sxid>\d+),\s*"
                     r"(?:(?P<sev>Non-fatal|Fatal),\s*)?(?P<msg>.*)")
GPU_UUID_RE = re.compile(r"NVRM: GPU at PCI:(?P<bus>[0-9a-fA-F:.]+): (?P<uuid>GPU-[0-9a-fA-F-]+)")
THE_GPU_RE = re.compile(r"NVRM: The NVIDIA GPU (?P<bus>[0-9a-fA-F:.]+)")
BUS_IN_RE = re.compile(r"\b(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?)\b")
AER_RE = re.compile(r"(?:(?P<drv>[\w-]{1,40}) (?P<dev>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d): )?AER: (?P<what>.*)")
EDAC_RE = re.compile(r"EDAC (?P<mc>\w+): (?P<count>\d+) (?P<kind>CE|UE) (?P<msg>.*)")


def parse_prefix(line: str) -> tuple[dict, str]:
    """Split a kernel-log line into its timestamp/host facts and the message (no prefix -> empty facts)."""
    m = PREFIX_RE.match(line)
    if not m or m.end() == 0 or not any(m.group(g) for g in ("up", "ctime", "iso", "sys", "host", "up2")):
        return {}, line
    facts: dict = {}
    up = m.group("up") or m.group("up2")
    if up:
        facts["uptime_s"] = float(up)
    if m.group("ctime"):
        facts["ts"] = _strptime(m.group("ctime"), "%a %b %d %H:%M:%S %Y")
    if m.group("iso"):
        facts["ts"] = iso_to_utc(m.group("iso"))
    if m.group("sys"):
        facts["syslog_time"] = m.group("sys")  # no year in this format: kept as text, never guessed
    if m.group("host"):
        facts["host"] = m.group("host")
    if m.group("lvl"):
        facts["level"] = m.group("lvl")
    return facts, line[m.end():]


def _strptime(text: str, fmt: str) -> str | None:
    try:
        return datetime.strptime(re.sub(r"\s+", " ", text), fmt).isoformat()
    except ValueError:
        return None


def iso_to_utc(text: str) -> str | None:
    """`2024-04-29T14:55:41,678628+02:00` -> `2024-04-29T12:55:41.678628` (UTC); no offset -> as written."""
    t = text.replace(",", ".").replace(" ", "T", 1)
    if t.endswith("Z"):
        t = t[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(t)
    except ValueError:
        return None
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
    return dt.isoformat()


def logical_lines(lines):
    """Undo terminal wrapping: drop padding runs inside a line and join an unprefixed line onto a long prefixed one."""
    pending: tuple[int, str] | None = None
    pending_prefixed = False
    last_len = 0
    for lineno, raw in lines:
        text = PAD_RUN_RE.sub("", raw.rstrip())
        prefixed = bool(parse_prefix(text)[0])
        if pending is not None and pending_prefixed and not prefixed and text.strip() \
                and last_len >= WRAP_MIN_CHARS and len(pending[1]) + len(text) <= 2 * MAX_MESSAGE_CHARS:
            pending = (pending[0], pending[1] + text.strip())
            last_len = len(raw.rstrip())
            continue
        if pending is not None:
            yield pending
        pending, pending_prefixed, last_len = (lineno, text), prefixed, len(raw.rstrip())
    if pending is not None:
        yield pending


class _KernelLog:
    """Walks logical lines, keeping the context that multi-line kernel reports need (OOM sequence, fallen-off GPU)."""

    def __init__(self, source: Source, result: ParseResult):
        self.source, self.result = source, result
        self.invoker: dict | None = None
        self.constraints: dict[int, dict] = {}
        self.memcg_limit_kb: int | None = None
        self.sacrifice: dict[int, dict] = {}
        self.the_gpu: tuple[int, str] | None = None
        self.counts: dict[str, int] = {}
        self.dropped: dict[str, int] = {}
        self.uuids: dict[str, str] = {}

    def add(self, lineno: int, facts: dict, kind: str, message: str, attrs: dict, level: str, pid=None) -> None:
        n = self.counts.get(kind, 0)
        if n >= MAX_EVENTS_PER_KIND:
            self.dropped[kind] = self.dropped.get(kind, 0) + 1
            return
        self.counts[kind] = n + 1
        for key in ("uptime_s", "syslog_time"):
            if key in facts:
                attrs[key] = facts[key]
        attrs["format"] = f"dmesg-{kind}"
        self.result.add("events", {
            "source": self.source.source, "line": lineno, "rank": self.source.rank,
            "host": facts.get("host") or self.source.host, "ts": facts.get("ts"), "kind": kind,
            "message": message[:1000], "template": _TEMPLATES[kind], "details": attrs, "level": level, "pid": pid})

    def feed(self, lineno: int, line: str) -> None:
        facts, msg = parse_prefix(line)
        msg = msg.strip()[:MAX_MESSAGE_CHARS]
        if not msg:
            return
        if "oom" in msg or "Kill" in msg or msg.startswith("memory: usage"):
            if self._oom(lineno, facts, msg):
                return
        if "NVRM" in msg or "nvswitch" in msg or "NVLink" in msg or "nvlink" in msg:
            if self._nvidia(lineno, facts, msg):
                return
        if "AER:" in msg:
            self._aer(lineno, facts, msg)
        elif msg.startswith("EDAC ") or "[Hardware Error]" in msg:
            self._host_hw(lineno, facts, msg)

    # ---- OOM killer
    def _oom(self, lineno: int, facts: dict, msg: str) -> bool:
        # A plain find, not a lazy `(.+?) invoked` regex, which rescans the line from every start (quadratic).
        at = msg.find(" invoked oom-killer:")
        if at > 0:
            args = dict(re.findall(r"(\w+)=([^,\s]+)", msg[at:at + 500]))
            self.invoker = {"invoker": msg[:at].strip()[-64:], "order": args.get("order"),
                            "gfp_mask": args.get("gfp_mask")}
            self.memcg_limit_kb = None
            return True
        m = MEMCG_LIMIT_RE.match(msg)
        if m:
            self.memcg_limit_kb = int(m.group("limit"))
            return True
        m = CONSTRAINT_RE.search(msg)
        if m:
            kv = dict(re.findall(r"(\w+)=([^,]*)", m.group("rest")))
            pid = _int(kv.get("pid"))
            info = {"constraint": m.group("constraint"), "task_memcg": kv.get("task_memcg"),
                    "oom_memcg": kv.get("oom_memcg"), "task": kv.get("task"), "uid": _int(kv.get("uid")),
                    "global_oom": "global_oom" in m.group("rest")}
            if pid is not None:
                self.constraints[pid] = info
            return True
        m = KILL_RE.search(msg)
        if not m:
            return False
        pid = int(m.group("pid"))
        if not m.group("ed"):  # old kernels: "Kill process N (comm) score S or sacrifice child", then "Killed process"
            sm = re.search(r"score (\d+)", m.group("rest"))
            self.sacrifice[pid] = {"lineno": lineno, "facts": facts, "comm": m.group("comm"), "msg": msg,
                                   "score": int(sm.group(1)) if sm else None, "scope": m.group("scope")}
            return True
        old = self.sacrifice.pop(pid, None)
        if old is None and self.sacrifice:
            # The kernel chose pid N ("Kill process N ... or sacrifice child") but killed one of N's children.
            chosen = max(self.sacrifice, key=lambda p: self.sacrifice[p]["lineno"])
            old = self.sacrifice.pop(chosen)
            old["selected_pid"] = chosen
        old = old or {}
        if old.get("selected_pid") is not None:
            self.constraints.setdefault(pid, {})["selected_pid"] = old["selected_pid"]
        self._kill(lineno, facts, msg, pid, m.group("comm"), m.group("scope") or old.get("scope"), m.group("rest"),
                   old.get("score"))
        return True

    def _kill(self, lineno, facts, msg, pid, comm, scope, rest, score) -> None:
        attrs: dict = {"pid": pid, "comm": comm[:64]}
        for km in KV_KB_RE.finditer(rest or ""):
            attrs[km.group("k").replace("-", "_") + "_kb"] = int(km.group("v"))
        uid = re.search(r"UID:?\s*(\d+)", rest or "")
        adj = re.search(r"oom_score_adj:(-?\d+)", rest or "")
        if uid:
            attrs["uid"] = int(uid.group(1))
        if adj:
            attrs["oom_score_adj"] = int(adj.group(1))
        if score is not None:
            attrs["score"] = score
        info = self.constraints.pop(pid, None) or {}
        attrs.update({k: v for k, v in info.items() if v not in (None, "", False) and k != "global_oom"})
        cgroup = (scope or "").startswith("Memory cgroup") or info.get("constraint") == "CONSTRAINT_MEMCG"
        attrs["scope"] = "cgroup" if cgroup else "global"
        if self.invoker:
            attrs.update({k: v for k, v in self.invoker.items() if v is not None})
        if cgroup and self.memcg_limit_kb is not None:
            attrs["memcg_limit_kb"] = self.memcg_limit_kb
        rss = attrs.get("anon_rss_kb")
        text = (f"kernel OOM killer ({attrs['scope']}) killed pid {pid} ({comm})"
                + (f", anon-rss {rss} kB" if rss is not None else ""))
        self.add(lineno, facts, "kernel_oom_kill", text, attrs, "E", pid)
        self.invoker = None

    # ---- NVIDIA driver
    def _nvidia(self, lineno: int, facts: dict, msg: str) -> bool:
        m = XID_RE.search(msg)
        if m:
            code = int(m.group("xid"))
            meaning, origin = xid_info(code)
            pid_text = (m.group("pid") or "").strip("'")
            attrs = {"xid": code, "meaning": meaning, "origin": origin, "bus_raw": m.group("bus"),
                     "bus_id": normalize_bus_id(m.group("bus")), "detail": (m.group("msg") or "").strip()[:500]}
            if m.group("name") and m.group("name") != "<unknown>":
                attrs["process_name"] = m.group("name").strip()
            pid = int(pid_text) if pid_text.isdigit() else None
            text = f"Xid {code} on GPU {attrs['bus_id']}: {meaning or 'unknown code'} — {attrs['detail']}"
            self.add(lineno, facts, "kernel_xid", text, attrs, "E" if origin != "application" else "W", pid)
            return True
        m = SXID_RE.search(msg)
        if m:
            attrs = {"type": "sxid", "sxid": int(m.group("sxid")), "severity": m.group("sev"),
                     "switch": int(m.group("sw")), "bus_raw": m.group("bus"), "detail": m.group("msg")[:500]}
            self.add(lineno, facts, "kernel_gpu_error", f"NVSwitch SXid {attrs['sxid']}: {m.group('msg')}", attrs,
                     "E" if m.group("sev") == "Fatal" else "W")
            return True
        m = GPU_UUID_RE.search(msg)
        if m:
            bus = normalize_bus_id(m.group("bus"))
            if bus:
                self.uuids[bus] = m.group("uuid")
            return True
        m = THE_GPU_RE.search(msg)
        if m:
            self.the_gpu = (lineno, m.group("bus"))
            return True
        low = msg.lower()
        if "fallen off the bus" in low or "gpu is lost" in low:
            bus = _bus_in(msg)
            if bus is None and self.the_gpu and lineno - self.the_gpu[0] <= 3:
                bus = self.the_gpu[1]
            attrs = {"type": "fallen_off_bus", "bus_raw": bus, "bus_id": normalize_bus_id(bus)}
            self.add(lineno, facts, "kernel_gpu_error", f"GPU {attrs['bus_id'] or '?'} fell off the bus: {msg}",
                     attrs, "E")
            return True
        if "nvlink" in low and re.search(r"error|fatal|fail|down|training", low):
            attrs = {"type": "nvlink", "bus_raw": _bus_in(msg), "bus_id": normalize_bus_id(_bus_in(msg)),
                     "fatal": "fatal" in low}
            self.add(lineno, facts, "kernel_gpu_error", msg, attrs, "E" if attrs["fatal"] else "W")
            return True
        if "RmInitAdapter failed" in msg or "rm_init_adapter failed" in msg:
            attrs = {"type": "gpu_init_failed", "bus_raw": _bus_in(msg), "bus_id": normalize_bus_id(_bus_in(msg))}
            self.add(lineno, facts, "kernel_gpu_error", msg, attrs, "E")
            return True
        if "ecc" in low and ("uncorrectable" in low or "double bit" in low or "dbe" in low):
            attrs = {"type": "gpu_ecc", "bus_raw": _bus_in(msg), "bus_id": normalize_bus_id(_bus_in(msg))}
            self.add(lineno, facts, "kernel_gpu_error", msg, attrs, "E")
            return True
        return False

    # ---- PCIe and host memory
    def _aer(self, lineno: int, facts: dict, msg: str) -> None:
        m = AER_RE.search(msg)
        if not m:
            return
        what = m.group("what")
        low = what.lower()
        if "uncorrected" in low and "non-fatal" in low:
            severity = "non_fatal"
        elif "uncorrected" in low or "fatal" in low:
            severity = "fatal"
        elif "corrected" in low:
            severity = "corrected"
        else:
            return  # detail lines (status/mask, error bits) add nothing the header line lacks
        recv = re.search(r"error received: (?:id=)?(?P<bus>[0-9a-fA-F:.]+)", what)
        bus = recv.group("bus") if recv else m.group("dev")
        attrs = {"type": "pcie_aer", "severity": severity, "driver": m.group("drv"), "device": m.group("dev"),
                 "bus_raw": bus, "bus_id": normalize_bus_id(bus), "detail": what[:300]}
        self.add(lineno, facts, "kernel_gpu_error", msg, attrs, "W" if severity == "corrected" else "E")

    def _host_hw(self, lineno: int, facts: dict, msg: str) -> None:
        m = EDAC_RE.search(msg)
        if m:
            attrs = {"type": "host_mem_ecc", "corrected": m.group("kind") == "CE", "count": int(m.group("count")),
                     "controller": m.group("mc")}
        else:
            attrs = {"type": "host_hw_error", "corrected": "corrected" in msg.lower() and "uncorrected" not in msg.lower()}
        self.add(lineno, facts, "kernel_hw_error", msg, attrs,
                 "W" if attrs.get("corrected") else "E")

    def finish(self) -> None:
        for pid, old in self.sacrifice.items():  # a "Kill process" line whose "Killed process" line is missing
            self._kill(old["lineno"], old["facts"], old["msg"], pid, old["comm"], old["scope"], "", old["score"])
        if self.uuids:
            self.result.meta["gpu_uuid_by_bus"] = dict(self.uuids)
        if self.dropped:
            self.result.problems.append("kernel events capped: " + ", ".join(
                f"{k} x{v} not kept" for k, v in sorted(self.dropped.items())))


_TEMPLATES = {"kernel_oom_kill": "kernel OOM killer killed a process", "kernel_xid": "NVIDIA Xid",
              "kernel_gpu_error": "kernel GPU/PCIe/NVLink error", "kernel_hw_error": "kernel host hardware error"}


def _bus_in(msg: str) -> str | None:
    m = BUS_IN_RE.search(msg)
    return m.group("bus") if m else None


def _int(text) -> int | None:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


@register("dmesg")
def parse_dmesg(source: Source) -> ParseResult:
    """Read a kernel log into `kernel_oom_kill`, `kernel_xid`, `kernel_gpu_error` and `kernel_hw_error` events."""
    result = ParseResult()
    stats = textio.ReadStats()
    log = _KernelLog(source, result)
    for lineno, line in logical_lines(textio.iter_lines(source.path, stats)):
        log.feed(lineno, line)
    log.finish()
    result.lines, result.bytes = stats.lines, stats.bytes
    result.problems.extend(stats.problems)
    return result

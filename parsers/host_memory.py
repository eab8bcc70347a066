"""Host memory snapshots from repeated `free` and from `vmstat` output -> `host_mem` events, one per snapshot.

Values are converted to KiB. Units come from the echoed command (`free -m`, `vmstat -S M`) or from the values'
own suffixes (`free -h`: `62Gi`); otherwise the tools' default (KiB) applies and the event says it was assumed.
A `date` line (or an ISO timestamp line) just before a snapshot becomes its `ts`.
"""
from __future__ import annotations

import math
import re
from datetime import datetime

from postmortem.parsers import learned_prefix
from postmortem.parsers.base import ParseResult, register
from postmortem.ingest import textio
from postmortem.ingest.discover import Source

FREE_HDR_RE = re.compile(r"^\s+total\s+used\s+free\s+shared\s+")
VMSTAT_HDR_RE = re.compile(r"^\s*r\s+b\s+swpd\s+")
FREE_CMD_RE = re.compile(r"\bfree\b(?P<args>(?:\s+-{1,2}[\w-]+(?:[= ]\d+)?)*)")
VMSTAT_CMD_RE = re.compile(r"\bvmstat\b.{0,80}?-S\s*(?P<unit>[kKmM])")
DATE_RES = [
    (re.compile(r"^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} "
                r"\d\d:\d\d:\d\d(?: [A-Z]{2,5})? \d{4}$"), None),
    (re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?$"), "iso"),
]
HUMAN_RE = re.compile(r"^(?P<n>\d+(?:[.,]\d+)?)(?P<u>[BKMGTP]?)(?P<i>i?)$")
_FREE_FLAG_KIB = {"-b": 1 / 1024, "--bytes": 1 / 1024, "-k": 1.0, "--kibi": 1.0, "--kilo": 1000 / 1024,
                  "-m": 1024.0, "--mebi": 1024.0, "--mega": 1e6 / 1024, "-g": 1024.0 ** 2, "--gibi": 1024.0 ** 2,
                  "--giga": 1e9 / 1024, "--tebi": 1024.0 ** 3, "--tera": 1e12 / 1024}
_VMSTAT_UNIT_KIB = {"k": 1000 / 1024, "K": 1.0, "m": 1e6 / 1024, "M": 1024.0}
MAX_SNAPSHOTS = 50_000  # per file; longer loops are thinned, keeping the last snapshot
_SUFFIX_KIB = {"B": 1 / 1024, "K": 1.0, "M": 1024.0, "G": 1024.0 ** 2, "T": 1024.0 ** 3, "P": 1024.0 ** 4}


def _date(line: str) -> str | None:
    s = line.strip()
    for rx, kind in DATE_RES:
        if rx.match(s):
            if kind == "iso":
                try:
                    return datetime.fromisoformat(s.replace("Z", "+00:00")).isoformat()
                except ValueError:
                    return None
            t = re.sub(r"\s+", " ", s)
            t = re.sub(r" [A-Z]{2,5} (\d{4})$", r" \1", t)
            try:
                return datetime.strptime(t, "%a %b %d %H:%M:%S %Y").isoformat()
            except ValueError:
                return None
    return None


def to_kib(token: str, factor: float | None) -> float | None:
    """One `free`/`vmstat` cell in KiB: human suffixes (`62Gi`, `5.6G`, `0B`) decide their own unit."""
    m = HUMAN_RE.match(token.strip())
    if not m:
        return None
    n = float(m.group("n").replace(",", "."))
    if m.group("u"):
        return n * _SUFFIX_KIB[m.group("u")]
    return n * (factor if factor is not None else 1.0)


class _HostMem:
    """Collects `free`/`vmstat` snapshots line by line and emits one event per snapshot."""

    def __init__(self, source: Source, result: ParseResult):
        self.source, self.result = source, result
        self.free_cols: list[str] | None = None
        self.vm_cols: list[str] | None = None
        self.free_factor: float | None = None
        self.vm_factor: float | None = None
        self.pending_ts: str | None = None
        self.snap: dict | None = None
        self.index = 0
        self.stride = 1
        self.held: dict | None = None

    def feed(self, lineno: int, line: str) -> None:
        s = line.strip()
        if not s:
            return
        ts = _date(s)
        if ts:
            self.flush()
            self.pending_ts = ts
            return
        cm = FREE_CMD_RE.search(s)
        if cm and ("$" in s or s.startswith(("free", "while", "watch"))):
            for flag in cm.group("args").split():
                if flag.split("=")[0] in _FREE_FLAG_KIB:
                    self.free_factor = _FREE_FLAG_KIB[flag.split("=")[0]]
        vm = VMSTAT_CMD_RE.search(s)
        if vm:
            self.vm_factor = _VMSTAT_UNIT_KIB[vm.group("unit")]
        if FREE_HDR_RE.match(line):
            self.flush()
            self.free_cols = s.split()
            return
        if VMSTAT_HDR_RE.match(line):
            cols = s.split()
            if cols and re.match(r"^[A-Z]{2,5}$", cols[-1]):  # vmstat -t names the zone of its timestamp column
                cols = cols[:-1]
            self.vm_cols = cols
            return
        if s.startswith("procs "):
            return
        if s.startswith("Mem:") and self.free_cols:
            self.flush()
            self._free_mem(lineno, s)
        elif s.startswith("-/+ buffers/cache:") and self.snap and self.snap["tool"] == "free":
            vals = s.split(":", 1)[1].split()
            if len(vals) >= 2:
                # Old procps counts buffers/cache as used on the Mem: line; this line has the real figure.
                self.snap["details"]["used_with_cache_kb"] = self.snap["details"].get("used_kb")
                self.snap["details"]["used_kb"] = to_kib(vals[0], self.free_factor)
                self.snap["details"]["available_kb"] = to_kib(vals[1], self.free_factor)
        elif s.startswith("Swap:") and self.snap and self.snap["tool"] == "free":
            vals = s.split(":", 1)[1].split()
            if len(vals) >= 2:
                self.snap["details"]["swap_total_kb"] = to_kib(vals[0], self.free_factor)
                self.snap["details"]["swap_used_kb"] = to_kib(vals[1], self.free_factor)
            self.flush()
        elif self.vm_cols and re.match(r"^\d", s):
            self._vmstat_row(lineno, s)

    def _free_mem(self, lineno: int, s: str) -> None:
        vals = s.split(":", 1)[1].split()
        cells = dict(zip(self.free_cols or [], vals))
        f = self.free_factor
        attrs = {"tool": "free", "total_kb": to_kib(cells.get("total", ""), f),
                 "used_kb": to_kib(cells.get("used", ""), f), "free_kb": to_kib(cells.get("free", ""), f),
                 "shared_kb": to_kib(cells.get("shared", ""), f),
                 "buff_cache_kb": to_kib(cells.get("buff/cache", ""), f),
                 "available_kb": to_kib(cells.get("available", ""), f)}
        if "buff/cache" not in cells and "buffers" in cells:  # old procps, and `free -w`
            b, c = to_kib(cells.get("buffers", ""), f), to_kib(cells.get("cached", cells.get("cache", "")), f)
            attrs["buff_cache_kb"] = (b or 0) + (c or 0) if b is not None or c is not None else None
        human = any(re.search(r"[A-Za-z]$", v) for v in vals)
        attrs["unit_assumed"] = f is None and not human
        self.snap = {"tool": "free", "line": lineno, "details": attrs}

    def _vmstat_row(self, lineno: int, s: str) -> None:
        vals = s.split()
        if len(vals) < len(self.vm_cols or []):
            return
        cells = dict(zip(self.vm_cols or [], vals))
        f = self.vm_factor
        attrs = {"tool": "vmstat", "swap_used_kb": to_kib(cells.get("swpd", ""), f),
                 "free_kb": to_kib(cells.get("free", ""), f), "buff_kb": to_kib(cells.get("buff", ""), f),
                 "cache_kb": to_kib(cells.get("cache", ""), f), "unit_assumed": f is None}
        for key in ("r", "b", "si", "so", "wa"):
            if key in cells and cells[key].isdigit():
                attrs[key] = int(cells[key])
        ts = None
        if len(vals) >= len(self.vm_cols or []) + 2:  # vmstat -t: date and time after the last column
            ts = _date(" ".join(vals[len(self.vm_cols):len(self.vm_cols) + 2]))
        self.snap = {"tool": "vmstat", "line": lineno, "details": attrs}
        if ts:
            self.pending_ts = ts
        self.flush()

    def flush(self) -> None:
        snap, self.snap = self.snap, None
        if snap is None:
            return
        # inf/nan (a mangled "1e999 kB") have no integer value: dropped like a missing one.
        attrs = {k: (round(v) if isinstance(v, float) else v) for k, v in snap["details"].items()
                 if v is not None and not (isinstance(v, float) and not math.isfinite(v))}
        attrs["snapshot"] = self.index
        attrs["format"] = f"host-memory-{snap['tool']}"
        if snap["tool"] == "free":
            msg = (f"host memory (free): used {attrs.get('used_kb')} kB of {attrs.get('total_kb')} kB, "
                   f"available {attrs.get('available_kb')} kB, swap used {attrs.get('swap_used_kb')} kB")
        else:
            msg = (f"host memory (vmstat): free {attrs.get('free_kb')} kB, cache {attrs.get('cache_kb')} kB, "
                   f"swap used {attrs.get('swap_used_kb')} kB, si {attrs.get('si')} so {attrs.get('so')}")
        row = {"source": self.source.source, "line": snap["line"], "rank": self.source.rank, "host": self.source.host,
               "ts": self.pending_ts, "kind": "host_mem", "message": msg,
               "template": f"host memory snapshot ({snap['tool']})", "details": attrs, "level": "I", "pid": None}
        self.pending_ts = None
        self.index += 1
        if attrs["snapshot"] % self.stride:
            self.held = row  # thinned out unless it is the last snapshot
            return
        self.held = None
        kept = self.result.rows.setdefault("events", [])
        kept.append(row)
        if len(kept) > MAX_SNAPSHOTS:  # a very long loop: every other snapshot, always the last
            self.stride *= 2
            kept[:] = [r for r in kept if r["details"]["snapshot"] % self.stride == 0]

    def finish(self) -> None:
        """Flush the open snapshot and keep the last one even when thinning skipped it."""
        self.flush()
        if self.held is not None:
            self.result.rows.setdefault("events", []).append(self.held)
        if self.stride > 1:
            self.result.problems.append(f"{self.index} memory snapshots; every {self.stride}th kept (and the last)")


@register("host_memory")
def parse_host_memory(source: Source) -> ParseResult:
    """Read repeated `free` / `vmstat` output into `host_mem` events (used/total/available/swap in KiB)."""
    result = ParseResult()
    stats = textio.ReadStats()
    mem = _HostMem(source, result)
    for lineno, line in learned_prefix.strip_stream(textio.iter_lines(source.path, stats)):
        mem.feed(lineno, line)
    mem.finish()
    result.lines, result.bytes = stats.lines, stats.bytes
    result.problems.extend(stats.problems)
    return result

"""nvidia-smi output of every common shape -> `gpu` rows (one per GPU per snapshot) and `gpu_health` events.

Shapes (FORMATS.md §7): the default table in its four layouts (also grep excerpts of GPU rows separated by `--`),
looped output (`-l N`), `--query-gpu/--query-compute-apps ... --format=csv[,noheader][,nounits]`, `-q` text and
`-q -x` XML (parsed hardened), and the error text printed when a GPU or the driver is gone (-> a row with lost=True).
One file may mix shapes (a script that runs several queries in a loop); each line is dispatched on what it looks like.
"""
from __future__ import annotations

import csv
import functools
import math
import operator
import re
from datetime import datetime

from postmortem.parsers import learned_prefix
from postmortem.parsers import nvidia_smi_query as q
from postmortem.parsers.base import ParseResult, register
from postmortem.parsers.safeload import UnsafeInput, parse_xml_hardened
from postmortem.ingest import textio
from postmortem.ingest.discover import Source
from postmortem.tables.joins import normalize_bus_id

MAX_XML_CHARS = 16 * 1024 * 1024  # one `-q -x` document; a real one is ~20 KB per GPU
MAX_Q_LINES = 200_000             # one `-q` block
MAX_GPU_ROWS = 200_000            # per file; longer loops are thinned, keeping the last snapshot
MAX_TABLE_LINE = 200              # table rows are <= 89 chars; longer `|` lines are not table rows

_TS_LINE_RE = re.compile(r"^(?P<ts>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
                         r" +\d{1,2} \d\d:\d\d:\d\d)(?: (?P<tz>[A-Z]{2,5}))? (?P<year>\d{4})\s*$")
_HEADER_RE = re.compile(r"NVIDIA-SMI (?P<smi>[\d.]+)\s+Driver Version: (?P<driver>[\d.]+)"
                        r"(?:\s+CUDA Version: (?P<cuda>[\d.]+|N/A))?")
_MEM_CELL_RE = re.compile(r"(?<!\d)(?P<used>\d+)\s*MiB\s*/\s*(?P<total>\d+)\s*MiB")  # from a number's start
_PERSIST = {"On", "Off", "WDDM", "TCC", "N/A"}
_PROC_TYPES = {"C", "G", "M", "C+G", "M+C"}
_LOST_RES = [
    re.compile(r"Unable to determine the device handle for (?:GPU|gpu)\s?(?P<bus>[0-9A-Fa-f:.]{1,24}): (?P<why>.+)"),
    re.compile(r"(?P<why>NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver)"),
    re.compile(r"GPU (?P<bus>[0-9A-Fa-f]{1,8}:[0-9A-Fa-f:.]{1,16}):? (?P<why>GPU is lost)"),
]
_CSV_TOKEN_RE = re.compile(r"^[a-z][a-z0-9_.]*(?: \[[^\]]+\])?$")
_QUERY_CMD_RE = re.compile(r"--query-(?P<what>gpu|compute-apps)=(?P<fields>[\w.,]+)")
_CSV_TS_PARTS = re.compile(r"^(\d{4})/(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?$")
_CSV_TS_RE = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?$")

# CSV header names (and the query names a command echo uses) -> our field.
_CSV_FIELDS = {
    "timestamp": "ts", "index": "gpu_index", "pci.bus_id": "bus_id", "gpu_bus_id": "bus_id", "uuid": "uuid",
    "gpu_uuid": "uuid", "name": "name", "gpu_name": "name", "memory.used": "mem_used_mib",
    "memory.total": "mem_total_mib", "utilization.gpu": "util_pct", "temperature.gpu": "temp_c",
    "power.draw": "power_w", "power.draw.instant": "power_w", "power.draw.average": "power_w",
    "ecc.errors.uncorrected.volatile.total": "ecc_uncorrected",
    "ecc.errors.uncorrected.aggregate.total": "ecc_uncorrected_agg",
    "pid": "pid", "process_name": "process_name", "used_gpu_memory": "used_mib", "used_memory": "used_mib",
}
_APP_FIELDS = {"pid", "process_name", "used_mib"}


def _parse_ts(text: str | None) -> str | None:
    """nvidia-smi's local timestamps (`Fri Oct 25 11:21:22 2024`, CSV `2025/05/22 09:42:33.587`) -> ISO, no zone."""
    if not text:
        return None
    m = _CSV_TS_PARTS.match(text.strip())
    if m:  # the per-row CSV stamp: built directly, strptime is the bottleneck on long loops
        y, mo, d, h, mi, sec, frac = m.groups()
        try:
            return datetime(int(y), int(mo), int(d), int(h), int(mi), int(sec),
                            int((frac or "0").ljust(6, "0"))).isoformat()
        except ValueError:
            return None
    t = re.sub(r"\s+", " ", text.strip())
    t = re.sub(r" (?:[A-Z]{2,5}) (\d{4})$", r" \1", t)  # `date` output carries a zone name; nvidia-smi's does not
    for fmt in ("%a %b %d %H:%M:%S %Y", "%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S"):
        try:
            return datetime.strptime(t, fmt).isoformat()
        except ValueError:
            continue
    return None


def _null(value: str | None) -> str | None:
    """`[Not Supported]`, `[N/A]`, `N/A`, `[Unknown Error]` and empty cells are null; others stripped."""
    if value is None:
        return None
    v = value.strip()
    if not v or v[0] == "[" or v == "N/A" or v == "n/a":
        return None
    return v


def _num(value: str | None) -> float | None:
    """A CSV cell as a number: plain (`nounits`) fast, `42.1 W` / `36 %` through the unit-aware reader."""
    if value is None:
        return None
    if " " in value.strip():  # `42.1 W`: float() refuses an inner blank, so skip straight to the unit reader
        v = q.number(value)
    else:
        try:
            v = float(value)
        except ValueError:
            v = q.number(value)
    return v if v is None or math.isfinite(v) else None  # "inf", "nan", a 400-digit cell: damage, not a reading


# Cells repeat down a looped CSV (the stamp of a snapshot on each GPU's row, utilisation, temperature, totals):
# the pure cell readers are memoised (bounded), so a long loop converts each distinct cell once.
_num_c = functools.lru_cache(maxsize=16384)(_num)
_mib_c = functools.lru_cache(maxsize=16384)(q.mib)
_ts_c = functools.lru_cache(maxsize=4096)(_parse_ts)
_bus_c = functools.lru_cache(maxsize=4096)(normalize_bus_id)


def _gpu_row1(cells: list[str]) -> tuple[int, str, str] | None:
    """First line of a GPU in the default table: `0  GeForce GTX 1080    Off` | `00000000:01:00.0  On` | `N/A`.

    Split into tokens rather than matched with one regex: a name of free text between whitespace runs makes such a
    regex backtrack polynomially on hostile lines."""
    if len(cells) < 3:
        return None
    first, second = cells[0].split(), cells[1].split()
    if len(first) < 3 or not first[0].isdigit() or first[-1] not in _PERSIST or len(second) != 2:
        return None
    if second[1] not in ("On", "Off", "N/A") or ":" not in second[0]:
        return None
    ecc = cells[2].split()
    return int(first[0]), second[0], ecc[0] if ecc else ""


def _process_row(cells: list[str]) -> dict | None:
    """A process line: `0  N/A  N/A  255872  C  ...dist_matmul.x  33246MiB` (GI/CI columns only on newer drivers)."""
    if len(cells) != 1:
        return None
    tok = cells[0].split()
    if len(tok) < 5 or not tok[0].isdigit() or not (tok[-1].endswith("MiB") or tok[-1] == "N/A"):
        return None
    for pid_at in (1, 3):  # without / with the GI and CI columns
        if len(tok) > pid_at + 2 and tok[pid_at].isdigit() and tok[pid_at + 1] in _PROC_TYPES:
            mem = tok[-1][:-3] if tok[-1].endswith("MiB") else None
            return {"pid": int(tok[pid_at]), "type": tok[pid_at + 1], "name": " ".join(tok[pid_at + 2:-1]),
                    "used_mib": float(mem) if mem and mem.isdigit() else None, "gpu_index": int(tok[0])}
    return None


class _Snapshot:
    """GPUs seen since the last snapshot boundary, keyed by index/bus id, with processes waiting to be attached."""

    def __init__(self, ts: str | None = None):
        self.ts = ts
        self.gpus: dict = {}
        self.apps: list[dict] = []
        self.csv_gpus = False
        self.awaiting_row2 = None

    def empty(self) -> bool:
        return not self.gpus and not self.apps


class _SmiParser:
    """Line-driven state machine: table, CSV, `-q` and XML sections, each closing snapshots at its own boundaries."""

    def __init__(self, source: Source, result: ParseResult):
        self.source, self.result = source, result
        self.snap = _Snapshot()
        self.index = 0
        self.mode: str | None = None
        self.buf: list[tuple[int, str]] = []
        self.buf_chars = 0
        self.xml_skipping = False
        self.xml_line = 0
        self.csv_fields: list[str | None] = []
        self.csv_pick: list[tuple[int, str]] = []  # (column, field) of the columns we read, in header order
        self.csv_pick_fields: list[str] = []
        self.csv_getter = _no_cells
        self.csv_is_apps = False
        self.cmd_fields: dict[str, list[str]] = {}
        self.warned_headerless = False
        self.meta: dict = {}
        self.stride = 1
        self.held: list[dict] = []

    # ---- snapshots and rows
    def close(self, ts: str | None = None) -> None:
        """End the current snapshot (emitting its rows) and start the next one."""
        if not self.snap.empty():
            self._emit(self.snap)
            self.index += 1
        self.snap = _Snapshot(ts)

    def _gpu(self, key, line: int | None, **fields) -> dict:
        row = {"source": self.source.source, "line": line, "rank": self.source.rank, "host": self.source.host,
               "ts": self.snap.ts, "gpu_index": None, "bus_id": None, "mem_used_mib": None, "mem_total_mib": None,
               "util_pct": None, "temp_c": None, "power_w": None, "processes": [], "ecc_uncorrected": None,
               "lost": False, "snapshot": None}
        row.update(fields)
        self.snap.gpus[key] = row
        return row

    def _emit(self, snap: _Snapshot) -> None:
        rows = list(snap.gpus.values())
        for proc in snap.apps:
            target = self._owner(rows, proc)
            if target is None:
                target = {"source": self.source.source, "line": proc.pop("_line", None), "rank": self.source.rank,
                          "host": self.source.host, "ts": snap.ts, "gpu_index": proc.get("gpu_index"),
                          "bus_id": proc.get("gpu_bus_id"), "mem_used_mib": None, "mem_total_mib": None,
                          "util_pct": None, "temp_c": None, "power_w": None, "processes": [],
                          "ecc_uncorrected": None, "lost": False, "snapshot": None}
                rows.append(target)
            proc.pop("_line", None)
            target["processes"].append(proc)
        for row in rows:
            row["snapshot"] = self.index
        if self.index % self.stride:
            self.held = rows  # thinned out unless it turns out to be the last snapshot
            return
        self.held = []
        kept = self.result.rows.setdefault("gpu", [])
        kept.extend(rows)
        if len(kept) > MAX_GPU_ROWS:
            # A very long loop: keep every other snapshot (and always the last), like the step series.
            self.stride *= 2
            kept[:] = [r for r in kept if r["snapshot"] % self.stride == 0]

    @staticmethod
    def _owner(rows: list[dict], proc: dict) -> dict | None:
        for row in rows:
            if proc.get("gpu_bus_id") and row.get("bus_id") == proc["gpu_bus_id"]:
                return row
            if proc.get("gpu_uuid") and row.get("_uuid") == proc["gpu_uuid"]:
                return row
            if proc.get("gpu_index") is not None and row.get("gpu_index") == proc["gpu_index"] \
                    and not proc.get("gpu_bus_id") and not proc.get("gpu_uuid"):
                return row
        return None

    # ---- dispatch
    def feed(self, lineno: int, line: str) -> None:
        if self.mode == "xml":
            self._feed_xml(lineno, line)
            return
        s = line.strip()
        if "<" in s and ("<?xml" in s or s.startswith("<nvidia_smi_log")):
            self._end_section()
            self.close()
            self.mode, self.buf, self.buf_chars = "xml", [], 0
            self._feed_xml(lineno, line[line.index("<"):])
            return
        if self._lost(lineno, s):
            return
        if s.startswith("==============NVSMI LOG"):
            self._end_section()
            self.close()
            self.mode, self.buf = "q", []
            return
        cmd = _QUERY_CMD_RE.search(s) if "--query-" in s else None
        if cmd and "nvidia-smi" in s:
            fields = [f.strip() for f in cmd.group("fields").split(",") if f.strip()]
            self.cmd_fields["apps" if cmd.group("what") == "compute-apps" else "gpu"] = fields
            return
        header = self._csv_header(s)
        if header is not None:
            self._end_section()
            self._start_csv(header)
            return
        if self.mode == "q":
            if s.startswith(("+--", "|")) or _TS_LINE_RE.match(s):
                self._end_section()
            else:
                if len(self.buf) < MAX_Q_LINES:
                    self.buf.append((lineno, line))
                return
        if self.mode == "csv":
            if "," in s and self._csv_row(lineno, s):
                return
            if s:
                self.mode = None
        elif "," in s and self.mode is None and self._headerless_csv(lineno, s):
            return
        self._table_line(lineno, line, s)

    def _end_section(self) -> None:
        if self.mode == "q":
            self._finish_q()
        self.mode = None

    def finish(self) -> None:
        """Flush whatever section and snapshot are open at end of file."""
        if self.mode == "xml" and self.buf:
            self.result.problems.append("nvidia-smi XML document truncated (no closing </nvidia_smi_log>)")
            self.mode = None
        self._end_section()
        self.close()
        if self.held:
            self.result.rows.setdefault("gpu", []).extend(self.held)
        if self.stride > 1:
            self.result.problems.append(f"{self.index} nvidia-smi snapshots; every {self.stride}th kept "
                                        "(and the last)")
        if self.meta:
            self.result.meta["nvidia_smi"] = dict(self.meta)

    # ---- lost GPU / driver
    def _lost(self, lineno: int, s: str) -> bool:
        if "device handle" not in s and "NVIDIA-SMI has failed" not in s and "GPU is lost" not in s:
            return False
        for rx in _LOST_RES:
            m = rx.search(s)
            if m:
                bus = normalize_bus_id(m.groupdict().get("bus"))
                key = ("lost", bus)
                if key in self.snap.gpus:
                    self.close(self.snap.ts)
                self._gpu(key, lineno, bus_id=bus, lost=True)
                self.meta.setdefault("lost_reasons", {})[bus or "driver"] = m.group("why").strip()[:200]
                return True
        return False

    # ---- default table
    def _table_line(self, lineno: int, line: str, s: str) -> None:
        tm = _TS_LINE_RE.match(s)
        if tm:
            self.close(_parse_ts(s))
            return
        if s == "--":
            self.close()
            return
        hm = _HEADER_RE.search(s)
        if hm:
            if self.snap.gpus:
                self.close()
            self.meta["driver_version"] = hm.group("driver")
            if hm.group("cuda") and hm.group("cuda") != "N/A":
                self.meta["cuda_version"] = hm.group("cuda")
            return
        if not s.startswith("|") or len(s) > MAX_TABLE_LINE:
            return
        cells = [c.strip() for c in s.strip("|").split("|")]
        row1 = _gpu_row1(cells)
        if row1:
            idx, bus, ecc = row1
            if idx in self.snap.gpus:
                self.close()
            self.snap.awaiting_row2 = self._gpu(idx, lineno, gpu_index=idx, bus_id=normalize_bus_id(bus),
                                                ecc_uncorrected=float(ecc) if ecc.isdigit() else None)
            return
        if self.snap.awaiting_row2 is not None and len(cells) >= 3:
            mm = _MEM_CELL_RE.search(cells[1])
            if mm:
                row = self.snap.awaiting_row2
                row["mem_used_mib"], row["mem_total_mib"] = float(mm.group("used")), float(mm.group("total"))
                t = re.search(r"(\d+)C\b", cells[0])
                p = re.search(r"(\d+(?:\.\d+)?)W\s*/", cells[0])
                u = re.match(r"(\d+)%", cells[2])
                row["temp_c"] = float(t.group(1)) if t else None
                row["power_w"] = float(p.group(1)) if p else None
                row["util_pct"] = float(u.group(1)) if u else None
                self.snap.awaiting_row2 = None
                return
        proc = _process_row(cells)
        if proc:
            proc["_line"] = lineno
            self.snap.apps.append(proc)

    # ---- CSV
    @staticmethod
    def _csv_header(s: str) -> list[str] | None:
        if "," not in s or not "a" <= s[:1] <= "z":  # (s is stripped: its first token starts it, [a-z] or no header)
            return None
        tokens = [t.strip() for t in s.split(",")]
        if len(tokens) < 2 or not all(_CSV_TOKEN_RE.match(t) for t in tokens):
            return None
        names = [t.split(" [", 1)[0] for t in tokens]
        if not any(n in _CSV_FIELDS for n in names):
            return None
        return names

    def _start_csv(self, names: list[str]) -> None:
        fields = [_CSV_FIELDS.get(n) for n in names]
        is_apps = bool(_APP_FIELDS & set(fields)) and "gpu_index" not in fields and "mem_used_mib" not in fields
        if (is_apps and self.snap.apps) or (not is_apps and self.snap.csv_gpus):
            self.close()  # the header repeats with every `-l` interval
        self.mode, self.csv_fields, self.csv_is_apps = "csv", fields, is_apps
        self.csv_pick = [(i, f) for i, f in enumerate(fields) if f]
        self.csv_pick_fields = [f for _, f in self.csv_pick]
        at = [i for i, _ in self.csv_pick]
        self.csv_getter = operator.itemgetter(*at) if len(at) > 1 else \
            (lambda cells, i=at[0]: (cells[i],)) if at else _no_cells

    def _headerless_csv(self, lineno: int, s: str) -> bool:
        first = s.split(",", 1)[0].strip()
        if not (_CSV_TS_RE.match(first) or re.match(r"^\d+, ", s) or normalize_bus_id(first) and ":" in first):
            return False
        for what in ("gpu", "apps"):
            fields = self.cmd_fields.get(what)
            if fields and len(fields) == len(_csv_values(s)):
                self._start_csv(fields)
                return self._csv_row(lineno, s)
        if not self.warned_headerless and ("MiB" in s or _CSV_TS_RE.match(first)):
            self.warned_headerless = True
            self.result.problems.append(
                f"line {lineno}: nvidia-smi CSV without a header (noheader) and no echoed --query command; "
                "columns unknown, rows not read")
        return False

    def _csv_row(self, lineno: int, s: str) -> bool:
        values = s.split(",") if '"' not in s else _csv_values(s)
        fields = self.csv_fields
        if len(values) > len(fields) and "name" in fields:  # a GPU/process name with a comma in it
            i = fields.index("name")
            extra = len(values) - len(fields)
            values = values[:i] + [",".join(values[i:i + extra + 1])] + values[i + extra + 1:]
        if len(values) != len(fields):
            return False
        cells = list(map(str.strip, values))
        if "[" in s or "/A" in s or "/a" in s or "" in cells:  # some cell may be null: read each one
            rec = {f: _null(cells[i]) for i, f in self.csv_pick}  # a later column of the same field wins
        else:  # no cell is null: the stripped cells as they are
            rec = dict(zip(self.csv_pick_fields, self.csv_getter(cells)))
        if self.csv_is_apps:
            self._app_row(lineno, rec)
            return True
        get = rec.get
        key = get("gpu_index") or get("bus_id") or get("uuid")
        key = ("csv", key if key is not None else object())
        snap = self.snap
        if key in snap.gpus:
            self.close()
            snap = self.snap
        ts = _ts_c(get("ts"))
        if ts and snap.ts is None:
            snap.ts = ts
        idx = _num_c(get("gpu_index"))
        ecc = _num_c(get("ecc_uncorrected"))
        source = self.source
        row = {"source": source.source, "line": lineno, "rank": source.rank, "host": source.host,
               "ts": ts or snap.ts, "gpu_index": int(idx) if idx is not None else None,
               "bus_id": _bus_c(get("bus_id")), "mem_used_mib": _mib_c(get("mem_used_mib")),
               "mem_total_mib": _mib_c(get("mem_total_mib")), "util_pct": _num_c(get("util_pct")),
               "temp_c": _num_c(get("temp_c")), "power_w": _num_c(get("power_w")), "processes": [],
               "ecc_uncorrected": ecc if ecc is not None else _num_c(get("ecc_uncorrected_agg")),
               "lost": "GPU is lost" in s, "snapshot": None}  # the columns and order of _gpu's rows
        snap.gpus[key] = row
        if get("uuid"):
            row["_uuid"] = rec["uuid"]
        snap.csv_gpus = True
        return True

    def _app_row(self, lineno: int, rec: dict) -> None:
        pid = _num_c(rec.get("pid"))
        proc = {"pid": int(pid) if pid is not None else None, "type": None,
                "name": (rec.get("process_name") or "")[:300], "used_mib": _mib_c(rec.get("used_mib")),
                "gpu_bus_id": _bus_c(rec.get("bus_id")), "_line": lineno}
        if rec.get("uuid"):
            proc["gpu_uuid"] = rec["uuid"]
        self.snap.apps.append(proc)

    # ---- -q text
    def _finish_q(self) -> None:
        lines, self.buf = self.buf, []
        if not lines:
            return
        header, gpus = q.gpus_from_q(lines)
        self._emit_query(header, gpus, lines[0][0])

    # ---- -q -x XML
    def _feed_xml(self, lineno: int, line: str) -> None:
        if not self.buf and not self.xml_skipping:
            self.xml_line = lineno
        if not self.xml_skipping:
            self.buf.append((lineno, line))
            self.buf_chars += len(line) + 1
            if self.buf_chars > MAX_XML_CHARS:
                self.result.problems.append(
                    f"line {self.xml_line}: nvidia-smi XML document over {MAX_XML_CHARS} chars; skipped")
                self.xml_skipping, self.buf = True, []
        if "</nvidia_smi_log>" in line:
            if not self.xml_skipping:
                text = "\n".join(t for _, t in self.buf)
                self._finish_xml(text[: text.rindex("</nvidia_smi_log>") + len("</nvidia_smi_log>")])
            self.mode, self.buf, self.buf_chars, self.xml_skipping = None, [], 0, False

    def _finish_xml(self, text: str) -> None:
        try:
            root = parse_xml_hardened(text)
        except UnsafeInput as exc:
            self.result.problems.append(f"line {self.xml_line}: {exc}")
            return
        except ValueError as exc:
            self.result.problems.append(f"line {self.xml_line}: nvidia-smi XML not parsed: {exc}")
            return
        if root.tag != "nvidia_smi_log":
            self.result.problems.append(f"line {self.xml_line}: XML root <{root.tag[:40]}> is not <nvidia_smi_log>")
            return
        header, gpus = q.gpus_from_xml(root)
        for gpu in gpus:
            gpu["line"] = self.xml_line
        self._emit_query(header, gpus, self.xml_line)

    def _emit_query(self, header: dict, gpus: list[dict], line: int) -> None:
        self.close(_parse_ts(header.get("timestamp")))
        for k in ("driver_version", "cuda_version"):
            if header.get(k) and header[k] != "N/A":
                self.meta[k] = header[k]
        # -q lists GPUs in index order; only a full listing (all attached GPUs) lets position stand for the index.
        full = header.get("attached_gpus") is not None and header["attached_gpus"] == len(gpus)
        for pos, gpu in enumerate(gpus):
            bus = normalize_bus_id(gpu["bus_id"])
            idx = pos if full else None
            row = self._gpu(("q", bus, pos), gpu["line"] or line, gpu_index=idx, bus_id=bus,
                            mem_used_mib=gpu["mem_used_mib"], mem_total_mib=gpu["mem_total_mib"],
                            util_pct=gpu["util_pct"], temp_c=gpu["temp_c"], power_w=gpu["power_w"],
                            ecc_uncorrected=gpu["health"]["ecc_volatile_uncorrected"])
            for proc in gpu["processes"]:
                row["processes"].append(proc)
            self._health_event(gpu, idx, bus, gpu["line"] or line)
        self.close()

    def _health_event(self, gpu: dict, idx: int | None, bus: str | None, line: int) -> None:
        health = {k: v for k, v in gpu["health"].items() if v is not None}
        if not health:
            return
        bad = any(health.get(k) for k in ("ecc_volatile_uncorrected", "ecc_aggregate_uncorrected", "retired_dbe",
                                          "remapped_uncorrectable", "remap_failure"))
        warn = any(health.get(k) for k in ("retired_pending", "remap_pending", "ecc_volatile_corrected",
                                           "remapped_correctable"))
        attrs = {**health, "gpu_index": idx, "bus_id": bus, "snapshot": self.index, "format": "nvidia-smi-q"}
        summary = ", ".join(f"{k}={v}" for k, v in health.items())
        self.result.add("events", {
            "source": self.source.source, "line": line, "rank": self.source.rank, "host": self.source.host,
            "ts": self.snap.ts, "kind": "gpu_health", "message": f"GPU {bus or idx}: {summary}"[:1000],
            "template": "nvidia-smi -q GPU health", "details": attrs, "level": "E" if bad else "W" if warn else "I",
            "pid": None})


@register("nvidia_smi")
def parse_nvidia_smi(source: Source) -> ParseResult:
    """Read one nvidia-smi capture (any shape, or several shapes mixed) into `gpu` rows and `gpu_health` events."""
    result = ParseResult()
    stats = textio.ReadStats()
    parser = _SmiParser(source, result)
    for lineno, line in learned_prefix.strip_stream(textio.iter_lines(source.path, stats)):
        parser.feed(lineno, line)
    parser.finish()
    for row in result.rows.get("gpu", []):
        row.pop("_uuid", None)
    result.lines, result.bytes = stats.lines, stats.bytes
    result.problems.extend(stats.problems)
    return result


def _no_cells(cells: list[str]) -> tuple:
    return ()


def _csv_values(s: str) -> list[str]:
    """One CSV line's fields; a stray CR/quote that the csv module rejects falls back to a plain split."""
    try:
        return next(csv.reader([s], skipinitialspace=True), [])
    except csv.Error:
        return s.split(",")

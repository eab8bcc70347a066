"""Multi-line blocks the line parser folds into rows: torchrun's failure summary, and step reports thinned to a
bounded sample per rank."""
from __future__ import annotations


import regex

from postmortem.parsers.base import ParseResult
from postmortem.ingest.discover import Source


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

    def __init__(self, every_step: bool = False):
        self.cap = float("inf") if every_step else self.CAP  # every_step: a row for every step line, never thinned
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
        if len(rows) > self.cap:
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

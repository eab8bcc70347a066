"""Stage 3, the part without pandas: parse results folded into the tables' column lists as they arrive."""
from __future__ import annotations

from itertools import repeat
from typing import TYPE_CHECKING

from postmortem.tables import schema
from postmortem.tables.numbers import Numbers
from postmortem.ingest.discover import Source

if TYPE_CHECKING:
    from postmortem.tables.model import Tables


def _numeric(col: str) -> str | None:
    dtype = schema.DTYPES.get(col)
    return "q" if dtype == "Int64" else "d" if dtype == "float64" else None


class TableBuilder:
    """The tables, built as the parse results arrive (in any order: `add(index of the source, result)`): each
    result's rows are appended to its tables' column lists and the result is let go, so a job of thousands of files
    never holds its parse results and its tables at once. `finish` puts the rows in the order of the sources."""

    def __init__(self, sources: list[Source]):
        self.sources = sources
        self.acc: dict[str, dict] = {name: {c: Numbers(_numeric(c)) if _numeric(c) else [] for c in schema.columns(name)}
                                     for name in schema.TABLE_NAMES}
        self.counts = dict.fromkeys(schema.TABLE_NAMES, 0)
        self.spans: dict[str, list] = {name: [] for name in schema.TABLE_NAMES}  # (source index, first row, rows)
        self.files: list = [None] * len(sources)  # per source: (lines, problems, fatal, meta) of its result

    def add(self, i: int, res) -> None:
        """Fold the result of sources[i] in (its rows are moved out of it)."""
        acc, counts = self.acc, self.counts
        for table, trows in res.rows.items():
            block = trows if isinstance(trows, schema.Columns) else schema.to_columns(trows)
            schema.check_columns(table, block.data)
            self.spans[table].append((i, counts[table], block.n))
            cols = acc[table]
            for col, values in cols.items():
                got = block.data.get(col)
                got = got if got is not None else repeat(None, block.n)
                if type(values) is Numbers:
                    try:
                        values.extend(got)
                        continue
                    except TypeError:  # not a plain number: the column goes on as a list (values re-read)
                        cols[col] = values = values.as_list()[:counts[table]]
                        got = block.data.get(col) or repeat(None, block.n)
                values.extend(got)
            counts[table] += block.n
        res.rows = {}
        meta = {k: res.meta[k] for k in ("collector_env", "hostpid_rank", "nccl_counts", "summarised", "collect_stall",
                                          "unordered_streams")
                if res.meta.get(k)}
        self.files[i] = (res.lines, tuple(res.problems), _fatal(res), meta or None)

    def finish(self) -> "Tables":
        """The validated tables, rows in the order of the sources (and, within a source, as its parser gave them)."""
        sources = self.sources
        meta: dict = {"hostpid_rank": {}, "world_size_claims": []}
        source_rows = []
        for src, got in zip(sources, self.files):
            lines, problems, fatal, fmeta = got if got is not None else (0, (), False, None)
            fmeta = fmeta or {}
            source_rows.append({
                "source": src.source, "line": None, "rank": src.rank if src.rank is not None else src.local_rank,
                "host": src.host, "ts": None, "kind": src.kind, "compression": src.compression, "bytes": src.bytes,
                "lines": lines, "parsed_ok": src.problem is None and not fatal,
                "problem": "; ".join(problems) if problems else None, "job": None})
            meta.setdefault("collector_env", {}).update(fmeta.get("collector_env", {}))
            for key, value in fmeta.get("hostpid_rank", {}).items():
                meta["hostpid_rank"][key] = value
            # bounded summaries of repetitive lines, the collector's stall settings, other per-source facts
            for key in ("nccl_counts", "summarised", "collect_stall", "unordered_streams"):
                if fmeta.get(key):
                    meta.setdefault(key, {}).update(fmeta[key])
        self.files = []
        acc = self.acc
        for name, spans in self.spans.items():
            if any(a[0] > b[0] for a, b in zip(spans, spans[1:])):  # arrived out of order: rows in source order
                spans = sorted(spans)
                for col, values in acc[name].items():
                    acc[name][col] = values.reordered(spans) if type(values) is Numbers else \
                        [v for _, start, n in spans for v in values[start:start + n]]
        block = schema.to_columns(source_rows)
        acc["sources"], counts = block.data, dict(self.counts, sources=block.n)
        self.acc = {}
        from postmortem.tables.model import assemble  # pandas: loaded by then (api._Preload imports it during the parse)
        return assemble(sources, acc, counts, meta)


def _fatal(res) -> bool:
    return any(p.startswith(("parsers.", "postmortem.parsers.", "truncated or corrupt", "decode error")) or " failed:" in p
               for p in res.problems)

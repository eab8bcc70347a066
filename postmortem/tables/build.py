"""Stage 3: turn per-source parser rows into validated DataFrames, resolving ranks and the job's world size."""
from __future__ import annotations

from postmortem.ingest.discover import Source
from postmortem.tables.fold import TableBuilder
from postmortem.tables.model import Tables, assemble  # noqa: F401 - the stage's public names


def build(sources: list[Source], results: list) -> Tables:
    """Assemble tables from discovered sources and their ParseResults (same order; rows as dicts or Columns; the
    results' rows are moved out of them)."""
    builder = TableBuilder(sources)
    for i, res in enumerate(results):
        builder.add(i, res)
    return builder.finish()

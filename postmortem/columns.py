"""Rows of one table stored column-wise: the form parser processes send back (no pandas here: parser processes
never need it)."""
from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat


@dataclass
class Columns:
    """One table's rows stored column-wise: a fraction of the memory and pickle size of one dict per row. A key no
    row has is absent; a row without a key holds None there."""
    data: dict[str, list]
    n: int

    def __len__(self) -> int:
        return self.n


def to_columns(rows: list[dict]) -> Columns:
    """Row dicts -> Columns (every key any row has becomes a column; the keys are gathered in C)."""
    keys = set().union(*rows) if rows else set()
    return Columns({k: list(map(dict.get, rows, repeat(k))) for k in sorted(keys)}, len(rows))


# Columns whose text repeats across ranks (the same template, stamp, bar or stack printed by every rank): each
# result arrives from its own parser process with its own copies.
SHARED_TEXT = ("template", "message", "ts", "desc", "host", "signature", "thread_name", "exc_type", "exc_message",
               "level", "kind", "phase", "subsys", "state", "op")


def share_text(rows: dict, canon: dict) -> None:
    """Make equal strings of the SHARED_TEXT columns one object across results (`canon`: text -> the object kept),
    as results arrive, so that a 2,048-rank job holds each repeated text once (the parent's peak is these rows)."""
    for cols in rows.values():
        if type(cols) is not Columns:
            continue
        data = cols.data
        for name in SHARED_TEXT:
            values = data.get(name)
            if values:
                data[name] = [canon.setdefault(v, v) if type(v) is str else v for v in values]

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

"""Table schemas (one place, versioned) and the validation applied where each DataFrame is built."""
from __future__ import annotations

import pandas as pd

from postmortem.columns import Columns, to_columns  # noqa: F401 - re-exported

SCHEMA_VERSION = 1

COMMON = ["source", "line", "rank", "host", "ts"]

# Columns beyond COMMON, per table. Order is the column order of the DataFrame.
TABLE_COLUMNS: dict[str, list[str]] = {
    "sources": ["kind", "compression", "bytes", "lines", "parsed_ok", "problem", "job"],
    "events": ["kind", "message", "template", "details", "level", "pid"],
    "tracebacks": ["exc_type", "exc_message", "frames", "last_user_frame", "chained_from", "end_line"],
    "steps": ["step", "total", "epoch", "loss", "lr", "step_time", "phase", "desc"],
    "collectives": ["pg", "seq", "op", "numel_in", "numel_out", "timeout_ms", "elapsed_ms", "state",
                    "last_enqueued", "last_completed", "dtype"],
    "stacks": ["pid", "thread", "thread_name", "active", "owns_gil", "frames", "signature", "dump"],
    "gpu": ["gpu_index", "bus_id", "mem_used_mib", "mem_total_mib", "util_pct", "temp_c", "power_w",
            "processes", "ecc_uncorrected", "lost", "snapshot"],
    "nccl": ["level", "subsys", "comm_id", "nranks", "cuda_dev", "bus_id", "version", "message", "pid",
             "nccl_rank"],
}

# dtypes enforced on build; anything not listed stays object (lists/dicts/strings).
DTYPES: dict[str, str] = {
    "line": "Int64", "rank": "Int64", "bytes": "Int64", "lines": "Int64", "step": "Int64", "total": "Int64",
    "seq": "Int64", "numel_in": "Int64", "numel_out": "Int64", "timeout_ms": "Int64", "elapsed_ms": "Int64",
    "last_enqueued": "Int64", "last_completed": "Int64", "pid": "Int64", "gpu_index": "Int64",
    "nranks": "Int64", "cuda_dev": "Int64", "nccl_rank": "Int64", "end_line": "Int64", "chained_from": "Int64",
    "loss": "float64", "lr": "float64", "step_time": "float64", "epoch": "float64",
    "mem_used_mib": "float64", "mem_total_mib": "float64", "util_pct": "float64", "temp_c": "float64",
    "power_w": "float64", "ecc_uncorrected": "float64", "snapshot": "Int64",
}

TABLE_NAMES = list(TABLE_COLUMNS)
_ALLOWED = {t: frozenset(COMMON + cols) for t, cols in TABLE_COLUMNS.items()}  # checked once per parsed file


def columns(table: str) -> list[str]:
    """All columns of a table, common ones first."""
    return COMMON + TABLE_COLUMNS[table]


def empty_frame(table: str) -> pd.DataFrame:
    """An empty DataFrame with the table's columns and dtypes."""
    return frame_from_rows(table, [])


def frame_from_rows(table: str, rows: list[dict]) -> pd.DataFrame:
    """Build a validated DataFrame for `table` from row dicts; unknown keys are an error, missing ones null."""
    block = to_columns(rows)
    return frame_from_columns(table, block.data, block.n)


def check_columns(table: str, names) -> None:
    """Raise ValueError for a column the table does not have."""
    extra = set(names) - _ALLOWED[table]
    if extra:
        raise ValueError(f"table {table}: unknown columns {sorted(extra)}")


def frame_from_columns(table: str, data: dict[str, list], n: int) -> pd.DataFrame:
    """Build a validated DataFrame for `table` from column lists of length n (absent columns are null)."""
    cols = columns(table)
    check_columns(table, data)
    out = {}
    for col in cols:
        values = pd.Series(data[col] if col in data else [None] * n, dtype=object)
        if col == "ts":
            out[col] = pd.to_datetime(values, utc=True, errors="coerce")
        elif col in DTYPES:
            out[col] = _coerce(values, DTYPES[col])
        else:
            out[col] = values
    return pd.DataFrame(out, columns=cols)


def _coerce(series: pd.Series, dtype: str) -> pd.Series:
    if dtype == "Int64":
        return pd.to_numeric(series, errors="coerce").round().astype("Int64")
    return pd.to_numeric(series, errors="coerce").astype(dtype)


def validate(table: str, df: pd.DataFrame) -> None:
    """Raise ValueError when a DataFrame does not have exactly the table's columns."""
    if list(df.columns) != columns(table):
        raise ValueError(f"table {table}: columns {list(df.columns)} != {columns(table)}")

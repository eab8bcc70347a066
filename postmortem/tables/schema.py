"""Table schemas (one place, versioned) and the validation applied where each DataFrame is built."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from postmortem.tables.columns import Columns, to_columns  # noqa: F401 - re-exported

if TYPE_CHECKING:
    import pandas as pd

# pandas is imported where frames are built, not with this module: the parent folds parse results into column
# lists (postmortem.tables.fold) while pandas is still being imported beside the parser processes.

SCHEMA_VERSION = 1

COMMON = ["source", "line", "rank", "host", "ts"]

# Columns beyond COMMON, per table. Order is the column order of the DataFrame.
TABLE_COLUMNS: dict[str, list[str]] = {
    "sources": ["kind", "compression", "bytes", "lines", "parsed_ok", "problem", "job"],
    "events": ["kind", "message", "template", "details", "level", "pid"],
    "tracebacks": ["exc_type", "exc_message", "frames", "last_user_frame", "chained_from", "end_line"],
    "steps": ["step", "total", "epoch", "loss", "lr", "step_time", "phase", "desc", "elapsed_s", "grad_norm",
              "loss_scale", "skipped", "nan_iters"],
    "collectives": ["pg", "seq", "op", "numel_in", "numel_out", "timeout_ms", "elapsed_ms", "state",
                    "last_enqueued", "last_completed", "dtype"],
    "stacks": ["pid", "thread", "thread_name", "active", "owns_gil", "frames", "signature", "dump"],
    "gpu": ["gpu_index", "bus_id", "mem_used_mib", "mem_total_mib", "util_pct", "temp_c", "power_w",
            "processes", "ecc_uncorrected", "lost", "snapshot"],
    "nccl": ["level", "subsys", "comm_id", "nranks", "cuda_dev", "bus_id", "version", "message", "pid",
             "nccl_rank"],
    "last_lines": ["key", "message", "seen", "distance"],
}

# dtypes enforced on build; anything not listed stays object (lists/dicts/strings).
DTYPES: dict[str, str] = {
    "line": "Int64", "rank": "Int64", "bytes": "Int64", "lines": "Int64", "step": "Int64", "total": "Int64",
    "seq": "Int64", "numel_in": "Int64", "numel_out": "Int64", "timeout_ms": "Int64", "elapsed_ms": "Int64",
    "last_enqueued": "Int64", "last_completed": "Int64", "pid": "Int64", "gpu_index": "Int64",
    "nranks": "Int64", "cuda_dev": "Int64", "nccl_rank": "Int64", "key": "Int64", "distance": "Int64", "end_line": "Int64", "chained_from": "Int64",
    "loss": "float64", "lr": "float64", "step_time": "float64", "epoch": "float64", "elapsed_s": "float64",
    "grad_norm": "float64", "loss_scale": "float64", "skipped": "Int64", "nan_iters": "Int64",
    "mem_used_mib": "float64", "mem_total_mib": "float64", "util_pct": "float64", "temp_c": "float64",
    "power_w": "float64", "ecc_uncorrected": "float64", "snapshot": "Int64",
}

BOOL_COLUMNS = frozenset({"parsed_ok", "seen"})

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


def frame_from_columns(table: str, data: dict[str, list], n: int, ts_ref=None) -> pd.DataFrame:
    """Build a validated DataFrame for `table` from column lists of length n (absent columns are null).

    `ts_ref` (a UTC Timestamp) gives stamps without a year (glog's `W1121 14:03:58`, syslog's `Nov 20 16:03:25`) the
    year that puts them nearest to it; without it they stay NaT, and `df.attrs["ts_without_year"]` counts them."""
    import pandas as pd
    cols = columns(table)
    check_columns(table, data)
    out = {}
    undated = 0
    for col in cols:
        raw = data.get(col)
        if isinstance(raw, pd.Series) and col in DTYPES:  # typed already (postmortem.tables.fold.Numbers)
            out[col] = raw
            continue
        values = pd.Series(raw if raw is not None else [None] * n, dtype=object)
        if col == "ts":
            out[col], undated = times(values, ts_ref)
        elif col in BOOL_COLUMNS:
            out[col] = values.fillna(False).astype(bool)
        elif col in DTYPES:
            out[col] = _coerce(values, DTYPES[col])
        else:
            out[col] = values
    df = pd.DataFrame(out, columns=cols)
    if undated:
        df.attrs["ts_without_year"] = undated
    return df


TS_DTYPE = "datetime64[ns, UTC]"
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                                       "Dec"), 1)}
_SYSLOG_TS = re.compile(r"^(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(\d{1,2}) (\d\d:\d\d:\d\d(?:[.,]\d+)?)$")
_SLASH_DATE = re.compile(r"^(\d\d)/(\d\d)/(\d{4})(?:[ T_](.*))?$")
_NO_YEAR = re.compile(r"^--(\d\d)-(\d\d)T(.+)$")
_HAS_YEAR = re.compile(r"(?<!\d)(?:1[6-9]|2\d)\d\d(?!\d)")


def _normal_stamp(text: str) -> str | None:
    """A stamp the ISO parser failed on, in a form that says what it knows: `YYYY-MM-DD ...` for `MM/DD/YYYY ...`
    (transformers' logging format; day first only when the first number cannot be a month), `--MM-DDT...` for a
    date without a year (syslog), the text itself when it names a year, else None: a time with no date is unknown,
    never today's date."""
    m = _SLASH_DATE.match(text)
    if m:
        a, b, year, rest = m.groups()
        month, day = (a, b) if int(a) <= 12 else (b, a)
        return f"{year}-{month}-{day}" + (f" {rest}" if rest else "")
    if _NO_YEAR.match(text):
        return text
    m = _SYSLOG_TS.match(text)
    if m:
        return f"--{_MONTHS[m.group(1)]:02d}-{int(m.group(2)):02d}T{m.group(3)}"
    return text if _HAS_YEAR.search(text) else None


def year_for(month: int, day: int, ref: pd.Timestamp) -> int:
    """The year that puts month/day nearest to `ref` (a stamp without a year read beside dated ones)."""
    import pandas as pd
    best, gap = ref.year, None
    for year in (ref.year - 1, ref.year, ref.year + 1):
        try:
            d = abs((pd.Timestamp(year=year, month=month, day=day, tz="UTC") - ref).total_seconds())
        except ValueError:  # 29 February of a year that has none
            continue
        if gap is None or d < gap:
            best, gap = year, d
    return best


def times(values: pd.Series, ref: pd.Timestamp | None = None) -> tuple[pd.Series, int]:
    """UTC datetimes in one unit for every table (pandas would pick s or us per table from the values), and how many
    stamps had no year and were left NaT for want of `ref`."""
    import pandas as pd
    # Each line's own format: inferring one format from the first value would turn every other shape (an ISO `T…Z`
    # stamp after a `2024-05-01 10:00:00` one) into NaT. ISO first (fast), then the rest one by one.
    # (numbers are no times here: a hostile file could put one where a stamp goes)
    values = values.map(lambda v: v if v is None or isinstance(v, (str, pd.Timestamp)) else None)
    ts = pd.to_datetime(values, utc=True, errors="coerce", format="ISO8601")
    rest = ts.isna() & values.notna()
    undated = 0
    if rest.any():
        import warnings
        fixed = []
        years: dict[tuple[int, int], int] = {}   # a log repeats a few days: one year lookup per month/day
        for v in values[rest]:
            v = _normal_stamp(v) if isinstance(v, str) else v
            if isinstance(v, str):
                m = _NO_YEAR.match(v)
                if m:
                    if ref is None:
                        undated += 1
                        v = None
                    else:
                        month, day = int(m.group(1)), int(m.group(2))
                        if 1 <= month <= 12 and 1 <= day <= 31:
                            year = years.get((month, day))
                            if year is None:
                                year = years[(month, day)] = year_for(month, day, ref)
                            v = f"{year:04d}-{month:02d}-{day:02d}T{m.group(3)}"
                        else:
                            v = None
            fixed.append(v)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            other = pd.to_datetime(pd.Series(fixed, index=values[rest].index, dtype=object), utc=True,
                                   errors="coerce", format="mixed")
        ts = ts.astype("datetime64[us, UTC]")  # one unit for both parts (ISO may have picked s, mixed us)
        ts[rest] = other.astype("datetime64[us, UTC]")
    try:
        return ts.astype(TS_DTYPE), undated
    except (OverflowError, ValueError):  # a year past 2262 does not fit in ns: such a time is as good as unknown
        return pd.to_datetime(ts.where(ts.dt.year.between(1678, 2261)), utc=True).astype(TS_DTYPE), undated


def _times(values: pd.Series) -> pd.Series:
    """times() without a year reference (stamps without a year stay NaT)."""
    return times(values)[0]


def conform(df: pd.DataFrame, dtypes: dict[str, str]) -> pd.DataFrame:
    """`df` with every listed column in its documented dtype (in place; returned for chaining). pandas 3 infers
    `str` for a column of strings and `datetime64[s, UTC]` from second-resolution stamps; the notebook API promises
    `object` and `datetime64[ns, UTC]` (docs/tables.md), whatever pandas version built the frame."""
    import pandas as pd
    for col, dtype in dtypes.items():
        if col not in df.columns or str(df[col].dtype) == dtype:
            continue
        if dtype == "object":
            df[col] = pd.Series(df[col].to_numpy(dtype=object, na_value=None), index=df.index, dtype=object)
        elif dtype.startswith("datetime64"):
            df[col] = pd.to_datetime(df[col], utc=True, errors="coerce").astype(dtype)
        elif dtype == "Int64":
            df[col] = pd.to_numeric(df[col], errors="coerce").astype("Int64")
        elif dtype == "bool":
            df[col] = df[col].fillna(False).astype(bool)
        else:
            df[col] = df[col].astype(dtype)
    return df


def documented_dtypes(table: str) -> dict[str, str]:
    """Column -> the dtype docs/tables.md gives it (the `ranks` table's from postmortem.ranks.state)."""
    if table == "ranks":
        from postmortem.ranks.state import COLUMN_DOCS
        return {c: d for c, (d, _) in COLUMN_DOCS.items()}
    return {c: dtype_of(c) for c in columns(table)}


def _coerce(series: pd.Series, dtype: str) -> pd.Series:
    import pandas as pd
    if dtype == "Int64":
        return pd.to_numeric(series, errors="coerce").round().astype("Int64")
    return pd.to_numeric(series, errors="coerce").astype(dtype)


def validate(table: str, df: pd.DataFrame) -> None:
    """Raise ValueError when a DataFrame does not have exactly the table's columns."""
    if list(df.columns) != columns(table):
        raise ValueError(f"table {table}: columns {list(df.columns)} != {columns(table)}")


# What each table and column holds: the notebook API's docstrings and docs/tables.md are built from this.
TABLE_DOCS: dict[str, str] = {
    "sources": "one row per input file: what it is, how big, whether it parsed and why not",
    "events": "one row per interesting log line (errors, exits, OOMs, timeouts, config echoes, checkpoints ...)",
    "tracebacks": "one row per Python exception (chained exceptions are rows of their own)",
    "steps": "one row per training/eval/sample step report of a rank (progress bars, `step N loss x` lines). On "
             "big logs not every step line is a row: a job's text is read line by line up to 512 KiB in all (shared "
             "by its files) and sampled beyond, and each rank's series keeps at most 512 rows, thinned by half when "
             "full; always kept are each series' first and last row, every anomaly (a non-finite loss, a loss "
             "spike), the row that stood when an error or another event was printed, and each rank's last step. "
             "`postmortem.analyze(path, all_steps=True)` (CLI `--all-steps`) keeps a row for every step line "
             "(slower and bigger on big logs)",
    "collectives": "one row per collective seen in a watchdog message or a flight-recorder record",
    "stacks": "one row per thread in a stack dump (py-spy, faulthandler, gdb) of a process",
    "gpu": "one row per GPU per nvidia-smi snapshot",
    "nccl": "one row per NCCL_DEBUG line kept (setup, WARN lines)",
    "last_lines": "each rank's last lines in each file (at most 20 per rank and file), whatever they say: what "
                  "the odd-lines stage compares across ranks",
}

COLUMN_DOCS: dict[str, str] = {
    "source": "input file, relative to the analysed path (inside an archive: the member name)",
    "line": "1-based line number in `source` (null for whole-file facts)",
    "rank": "global rank the row belongs to (null when no prefix, message or path names it; never guessed)",
    "host": "host name where known",
    "ts": "time of the line, UTC (null when the line carries no time)",
    "kind": "sources: input kind (rank_log, nccl_log, pyspy, nvidia_smi, dmesg, flight_recorder ...); "
            "events: event kind (error, traceback, oom, watchdog_timeout, exit, config, checkpoint_save ...)",
    "compression": "gzip when the file was compressed, else null",
    "bytes": "file size on disk",
    "lines": "lines read",
    "parsed_ok": "False when the file was skipped or its parser failed",
    "problem": "why the file was skipped or read only in part (null when fine)",
    "job": "label of the job the file belongs to when several jobs were found",
    "message": "the line's text (cut at 1000 characters)",
    "template": "the message with numbers, ranks, paths and addresses masked (groups repeated messages)",
    "details": "dict of values the parser extracted (exit code, signal, path, sizes ...)",
    "level": "log level letter or word where the line has one (E, W, I, error ...)",
    "pid": "process id where the line or dump names one",
    "exc_type": "exception class, e.g. torch.OutOfMemoryError",
    "exc_message": "exception message",
    "frames": "list of dicts (func, file, line, ...); tracebacks: outermost first; stacks: innermost first",
    "last_user_frame": "the innermost frame outside site-packages/the standard library (dict) or null",
    "chained_from": "row position of the exception this one was raised while handling, or null",
    "end_line": "last line of the traceback in `source`",
    "step": "step or batch number reported",
    "total": "total steps of the progress bar, where shown",
    "epoch": "epoch where reported",
    "loss": "loss where reported",
    "lr": "learning rate where reported",
    "step_time": "seconds per step where reported",
    "phase": "train, eval or sample",
    "desc": "the progress bar's description or the line format the step came from",
    "elapsed_s": "seconds the progress bar had been running (tqdm's `[elapsed<remaining]`), where shown",
    "grad_norm": "gradient norm where the line reports it (Megatron `grad norm`, fairseq `gnorm`, HF `grad_norm`)",
    "loss_scale": "fp16 loss scale where the line reports it (Megatron, fairseq, a loop's `loss_scale=`)",
    "skipped": "skipped (overflow) steps the line reports: Megatron's count since its last report, DeepSpeed's "
               "`skipped=` since the start",
    "nan_iters": "iterations with a non-finite loss or gradient norm the line reports: Megatron's `number of nan "
                 "iterations`, else 1 where its loss or gradient norm is nan/inf",
    "pg": "process group name/id",
    "seq": "collective sequence number within the process group",
    "op": "collective operation (allreduce, broadcast, barrier ...)",
    "numel_in": "input element count",
    "numel_out": "output element count",
    "timeout_ms": "timeout of the collective in milliseconds",
    "elapsed_ms": "time the collective had run when reported, in milliseconds",
    "state": "scheduled, started, completed or timed_out",
    "last_enqueued": "last sequence number enqueued by the rank (watchdog messages)",
    "last_completed": "last sequence number completed by the rank (watchdog messages)",
    "dtype": "tensor dtype of the collective",
    "thread": "thread id or name as dumped",
    "thread_name": "thread name where the dump has one",
    "active": "True when the thread was running (py-spy), else False or null",
    "owns_gil": "True when the thread held the GIL (py-spy), else False or null",
    "signature": "hashable summary of the frames; equal stacks share it (used to group ranks)",
    "dump": "which dump the thread came from (file and time)",
    "gpu_index": "GPU index on its host",
    "bus_id": "PCI bus id",
    "mem_used_mib": "GPU memory used, MiB",
    "mem_total_mib": "GPU memory total, MiB",
    "util_pct": "GPU utilisation, percent",
    "temp_c": "temperature, degrees C",
    "power_w": "power draw, W",
    "processes": "list of dicts (pid, name, used_mib) of the processes on the GPU",
    "ecc_uncorrected": "uncorrected ECC error count",
    "lost": "True when nvidia-smi reported the GPU lost / fallen off the bus",
    "snapshot": "index of the nvidia-smi snapshot within its file",
    "subsys": "NCCL subsystem (INIT, NET, COLL ...)",
    "comm_id": "NCCL communicator id",
    "nranks": "communicator size",
    "cuda_dev": "CUDA device of the rank",
    "version": "NCCL version",
    "nccl_rank": "rank within the NCCL communicator",
    "key": "the line's template key: a checksum of its text with digits, blanks and bar glyphs removed (lines of "
           "one shape share it)",
    "seen": "last_lines: the rank printed the same template earlier in the file (its start or earlier in its tail)",
    "distance": "last_lines: how many of the rank's lines in this file follow this one (0: its last line)",
}


def dtype_of(col: str) -> str:
    """The pandas dtype a column has in every built table."""
    if col == "ts":
        return TS_DTYPE
    return DTYPES.get(col, "bool" if col in BOOL_COLUMNS else "object")


def reference_markdown() -> str:
    """docs/tables.md: every table of `Analysis.tables` with its columns, dtypes and meaning."""
    out = ["# Tables of `postmortem.analyze(path).tables`", "",
           "Generated from `postmortem/tables/schema.py` (`python -m postmortem.tables.schema > docs/tables.md`); a test keeps "
           "them equal.", "",
           f"Schema version {SCHEMA_VERSION}. Each table is a pandas DataFrame and an attribute of `a.tables` "
           "(`a.tables.events`, tab-completes in Jupyter); `a.tables.as_dict()` gives them all and "
           "`a.tables.meta` the job-level facts (world size, ranks seen, versions). `Int64` is pandas' nullable "
           "integer (missing = `<NA>`), times are `datetime64[ns, UTC]` (missing = `NaT`), `object` columns hold "
           "strings, lists or dicts as described.", ""]
    for table in TABLE_NAMES:
        out += [f"## `{table}`", "", TABLE_DOCS[table][:1].upper() + TABLE_DOCS[table][1:] + ".", "",
                "| column | dtype | meaning |", "|---|---|---|"]
        out += [f"| `{c}` | {dtype_of(c)} | {COLUMN_DOCS[c]} |" for c in columns(table)]
        out.append("")
    from postmortem.ranks.state import COLUMN_DOCS as RANK_DOCS
    out += ["## `ranks`", "",
            "One row per rank of the world: where each rank was when the job stopped (`a.ranks`, also "
            "`a.tables.ranks`), built by `postmortem/ranks/state.py` before any rule runs; every fact keeps the "
            "`source:line` it came from in a `*_at` column.", "",
            "| column | dtype | meaning |", "|---|---|---|"]
    out += [f"| `{c}` | {dtype} | {meaning} |" for c, (dtype, meaning) in RANK_DOCS.items()]
    out.append("")
    from postmortem.ranks.odd_lines import COLUMN_DOCS as ODD_DOCS
    out += ["## `odd_lines`", "",
            "The odd lines, found without knowing their words (`a.tables.odd_lines`, `postmortem/ranks/odd_lines.py`): "
            "each rank's last lines (`last_lines`) reduced to template keys and compared across ranks. `minority`: a "
            "template a minority of ranks printed near their end, new there; `missing`: a template every rank but a "
            "minority printed near its end (the ranks listed did not). With `--baseline GOOD_RUN` (API: "
            "`analyze(path, baseline=...)`) a template the good run printed is not new. `suspect` rows point at the "
            "culprits when the ranks' ends alone name none; the verdict cites them.", "",
            "| column | dtype | meaning |", "|---|---|---|"]
    out += [f"| `{c}` | {dtype} | {meaning} |" for c, (dtype, meaning) in ODD_DOCS.items()]
    out.append("")
    out += ["## `Analysis` attributes", "",
            "| attribute | what |", "|---|---|",
            "| `a.verdict` | the answer (`Verdict`): category, phase, rule, confidence, culprit_ranks, step, summary (one "
            "sentence), why (the mechanism, a paragraph), fix (what to change, from the root mechanism), evidence "
            "(the cited lines: `Evidence` with source, line, rank, text), mechanism (an id such as `uneven_batches`), "
            "next (what to do now, `NextAction`: domain, action, hosts, why, evidence, recurrence; docs/json.md) |",
            "| `a.findings` | DataFrame, one row per finding, the verdict's first: rule, category, phase, confidence "
            "(float64), severity, title, culprit_ranks / affected_ranks (lists of int), first_culprit (Int64), step "
            "(Int64), time (datetime64[ns, UTC]: when its first cited line was written), cascade_of, summary (one "
            "sentence), explanation, remediation, evidence (list of dicts) |",
            "| `a.finding_list` | the same findings as `Finding` objects (what rules and reports use) |",
            "| `a.evidence_gaps` | list of dicts: missing, why, how |",
            "| `a.sources` | list of discovered `Source` objects |",
            "| `a.world_size` | world size (from the logs, or inferred) |",
            "| `a.to_json()`, `a.to_html(lang=...)`, `a.to_text(lang=...)` | the report in each format (`lang`: en, zh) |",
            "| `a.figures` | dict of the report's charts as matplotlib Figures (timeline, steps, gpu_memory: those with "
            "data); `a.figures(lang=\"zh\")` labels them in Chinese |", "",
            "Steps per rank over time, where the lines carry times (any log run under `postmortem collect` does; "
            "so does `samples/uneven_batches_barrier`):", "",
            "```python",
            "st = a.tables.steps",
            "st = st[st.phase.eq(\"train\") & st.ts.notna() & st['rank'].notna()]",
            "st.pivot_table(index=\"ts\", columns=\"rank\", values=\"step\", aggfunc=\"max\").plot(drawstyle=\"steps-post\")",
            "```", ""]
    return "\n".join(out)


if __name__ == "__main__":
    print(reference_markdown(), end="")

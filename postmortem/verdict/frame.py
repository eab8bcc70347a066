"""The findings as a DataFrame (`Analysis.findings`): one row per finding with fixed dtypes and its sentence."""
from __future__ import annotations

from postmortem.verdict.findings import Finding
from postmortem.verdict.sentences import finding_sentence

FINDING_COLUMNS = {
    "rule": "object", "category": "object", "phase": "object", "confidence": "float64", "severity": "object",
    "title": "object", "culprit_ranks": "object", "affected_ranks": "object", "first_culprit": "Int64",
    "step": "Int64", "time": "datetime64[ns, UTC]", "cascade_of": "object", "summary": "object", "explanation": "object",
    "remediation": "object", "evidence": "object",
}


def findings_frame(findings: list[Finding], times: list | None = None):
    """One row per finding in the given order (the verdict's first), with fixed dtypes even when empty; `times`
    (one per finding, or None) fills the `time` column: when the finding's first cited line was written."""
    import pandas as pd
    times = times if times is not None else [None] * len(findings)
    rows = [{**{k: v for k, v in f.to_dict().items() if k in FINDING_COLUMNS},
             "first_culprit": f.culprit_ranks[0] if f.culprit_ranks else None, "time": when,
             "summary": finding_sentence(f)} for f, when in zip(findings, times)]
    data = {c: pd.Series([r[c] for r in rows], dtype=object) for c in FINDING_COLUMNS}
    df = pd.DataFrame(data, columns=list(FINDING_COLUMNS))
    for col, dtype in FINDING_COLUMNS.items():
        if dtype == "Int64":
            df[col] = pd.to_numeric(df[col], errors="coerce").astype("Int64")
        elif dtype == "float64":
            df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
        elif dtype.startswith("datetime64"):
            df[col] = pd.to_datetime(df[col], utc=True, errors="coerce").astype(dtype)
    return df

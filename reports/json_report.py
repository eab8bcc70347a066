"""The `--format json` output: exactly the contract in docs/json.md, deterministic."""
from __future__ import annotations

import json

import pandas as pd

from postmortem.tables.schema import SCHEMA_VERSION


def to_dict(analysis) -> dict:
    """Analysis -> contract dict."""
    meta = analysis.tables.meta
    src_rows = analysis.tables.sources
    # Whole columns as lists, one dict per file (iterrows builds a Series per row: slow for thousands of files).
    cols = [src_rows[c].tolist() for c in ("source", "kind", "rank", "bytes", "lines", "problem")]
    sources = [{"source": source, "kind": kind, "rank": _int(rank), "bytes": _int(size), "lines": _int(lines),
                "problem": problem if isinstance(problem, str) else None}
               for source, kind, rank, size, lines, problem in zip(*cols)]
    return {
        "schema_version": SCHEMA_VERSION,
        "input": analysis.input,
        "world_size": meta.get("world_size"),
        "world_size_inferred": bool(meta.get("world_size_inferred", True)),
        "ranks_seen": list(meta.get("ranks_seen", [])),
        "verdict": analysis.verdict.to_dict() if analysis.verdict else None,
        "findings": [f.to_dict() for f in analysis.finding_list],
        "evidence_gaps": list(analysis.evidence_gaps),
        "sources": sources,
        **({"rule_errors": list(meta["rule_errors"])} if meta.get("rule_errors") else {}),
    }


def _int(v):
    try:
        return None if pd.isna(v) else int(v)
    except (TypeError, ValueError):
        return None


def to_json(analysis, indent: int | None = 2) -> str:
    """Analysis -> contract JSON text."""
    # allow_nan=False: the contract is strict JSON; a NaN slipping through is a bug to see, not to ship.
    return json.dumps(to_dict(analysis), indent=indent, ensure_ascii=False, default=str, allow_nan=False)

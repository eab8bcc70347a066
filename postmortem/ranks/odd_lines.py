"""Stage: the odd lines, found without knowing their words (the spatial and temporal log patterns of L4, FSE 2025).

Every line reduces to its template key (`last_lines.key`: its shape with digits and blanks removed). Compared
across ranks, over each rank's last lines:
- `minority`: a template a minority of ranks printed near their end, new there (not printed by that rank before,
  nor in a `--baseline` run): `end of data after 41 steps, exiting` on rank 1 only;
- `missing`: a template every rank but a minority printed near its end: the ranks that did not print it (a
  timeout every rank but one reported) are the odd ones.
A line of a consequence class (timeouts, closed or reset peers, the launcher's SIGTERM and summaries) is kept but
marked `cascade`; tracebacks are left to the tracebacks table. `suspect` marks the rows that point at a culprit.
"""
from __future__ import annotations

import re

import pandas as pd

from postmortem.ranks.ends import _PEER_GONE, _WAIT_MSG

COLUMNS = ["template", "example", "key", "kind", "ranks", "count", "at", "distance", "new", "cascade", "suspect"]
COLUMN_DOCS = {
    "template": ("object", "the line with numbers, paths and addresses masked"),
    "example": ("object", "one line of the template as printed"),
    "key": ("Int64", "the template key (last_lines.key)"),
    "kind": ("object", "minority (printed by a minority of ranks near their end) or missing (printed by all but a "
                       "minority: `ranks` are the ones that did not print it)"),
    "ranks": ("object", "the odd ranks (list): those that printed it (minority) or did not (missing)"),
    "count": ("Int64", "how many of the ranks' last lines hold the template"),
    "at": ("object", "source:line of the latest such line of each rank (list; for missing: of the others)"),
    "distance": ("Int64", "fewest lines between the line and its rank's last line"),
    "new": ("object", "True when absent from the --baseline run, False when it occurs there, null without one"),
    "cascade": ("bool", "a consequence class (timeout, closed peer, launcher stop): the line reports another rank"),
    "suspect": ("bool", "points at a culprit: not a cascade (minority), new near the end, within NEAR lines of the "
                        "end; or the cascade every rank but a minority printed (missing)"),
}
NEAR = 8          # a line this close to its rank's end is "near its end"
_NOISE = re.compile(r"^\s|^(?:Traceback \(most recent call last\)|During handling of the above|"
                    r"The above exception was|\^+$|~+$)|^File \"")
_LAUNCHER = re.compile(r"(?i)closing signal|exitcode|error_file|^\s*(?:time|host|rank|traceback)\s*:|"
                       r"ChildFailedError|Root Cause|Failures:|^=+$|^-+$|FAILED|SIGTERM|SIGKILL|got signal|"
                       r"Signal \d+ \(SIG")
_MASKS = [(re.compile(r"0x[0-9a-fA-F]+"), "<HEX>"), (re.compile(r"(?:/[\w.@+-]+)+/?"), "<PATH>"),
          (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<IP>"), (re.compile(r"\d+(?:\.\d+)?"), "<N>")]


def template(text: str) -> str:
    """Drain-style template of a line: hex, paths, addresses and numbers masked."""
    t = str(text)[:300]
    for rx, mask in _MASKS:
        t = rx.sub(mask, t)
    return t


def is_cascade(text: str) -> bool:
    """A line that reports another rank's failure or an outside stop (by class, not by one job's wording)."""
    t = str(text)[:600]
    return bool(_PEER_GONE.search(t) or _WAIT_MSG.search(t) or _LAUNCHER.search(t))


def empty() -> pd.DataFrame:
    """The odd_lines table with no rows (documented columns and dtypes)."""
    return _typed(pd.DataFrame({c: pd.Series([], dtype=object) for c in COLUMNS}))


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    for col, (dtype, _) in COLUMN_DOCS.items():
        if dtype == "Int64":
            df[col] = pd.to_numeric(df[col], errors="coerce").astype("Int64")
        elif dtype == "bool":
            df[col] = df[col].fillna(False).astype(bool)
    return df[COLUMNS]


def odd_lines(tables, baseline: set[int] | None = None) -> pd.DataFrame:
    """The odd_lines table: templates a minority of ranks printed near their end, and those all but a minority did."""
    ll = tables.frames.get("last_lines") if hasattr(tables, "frames") else tables
    if ll is None or ll.empty:
        return empty()
    ll = ll[ll["rank"].notna()]
    keep = [not _NOISE.search(str(m)) for m in ll["message"].tolist()]
    ll = ll[pd.Series(keep, index=ll.index, dtype=bool)]
    ranks = sorted(int(r) for r in ll["rank"].unique())
    n = len(ranks)
    if n < 2 and not baseline:
        return empty()
    by_key: dict = {}
    for rank, key, msg, seen, dist, src, line in zip(ll["rank"].tolist(), ll["key"].tolist(), ll["message"].tolist(),
                                                     ll["seen"].tolist(), ll["distance"].tolist(),
                                                     ll["source"].tolist(), ll["line"].tolist()):
        k = by_key.setdefault(int(key), {"ranks": {}, "count": 0, "example": str(msg).strip(), "new_here": False})
        k["count"] += 1
        r = k["ranks"].setdefault(int(rank), {"distance": int(dist), "at": f"{src}:{int(line)}"})
        if int(dist) < r["distance"]:
            r["distance"] = int(dist)
        r["at"] = f"{src}:{int(line)}"
        if not seen:
            k["new_here"] = True
    rows = []
    for key, k in by_key.items():
        holders = sorted(k["ranks"])
        cascade = is_cascade(k["example"])
        new = None if baseline is None else key not in baseline
        near = min(v["distance"] for v in k["ranks"].values())
        if len(holders) * 2 < n:
            suspect = (not cascade and k["new_here"] and near <= NEAR and new is not False)
            rows.append({"template": template(k["example"]), "example": k["example"][:300], "key": key,
                         "kind": "minority", "ranks": holders, "count": k["count"],
                         "at": [k["ranks"][r]["at"] for r in holders], "distance": near, "new": new,
                         "cascade": cascade, "suspect": suspect})
        elif n >= 3 and (n - len(holders)) * 2 < n and len(holders) < n and near <= NEAR:
            lacking = [r for r in ranks if r not in k["ranks"]]
            rows.append({"template": template(k["example"]), "example": k["example"][:300], "key": key,
                         "kind": "missing", "ranks": lacking, "count": k["count"],
                         "at": [k["ranks"][r]["at"] for r in holders][:8], "distance": near, "new": new,
                         "cascade": cascade, "suspect": cascade})
        elif baseline is not None and new and near <= NEAR and not cascade:
            # printed by many ranks, but never in the run that worked: new to this failure, not to one rank
            rows.append({"template": template(k["example"]), "example": k["example"][:300], "key": key,
                         "kind": "new", "ranks": holders, "count": k["count"],
                         "at": [k["ranks"][r]["at"] for r in holders][:8], "distance": near, "new": new,
                         "cascade": cascade, "suspect": False})
    if not rows:
        return empty()
    df = pd.DataFrame(rows)
    df = df.sort_values(["suspect", "distance", "count"], ascending=[False, True, True], kind="stable")
    return _typed(df.reset_index(drop=True))


BASELINE_MAX_LINES = 5_000_000  # a baseline run read beyond this is a sample of its templates, not all of them


def baseline_keys(path: str) -> set[int]:
    """Every template key of a run of the same job that worked (`--baseline`): each line of its text files, its
    launcher prefixes stripped as for the analysed run. Read once, line by line (a baseline is read in full)."""
    from postmortem.parsers.line_records import template_keys
    from postmortem.ingest import textio
    from postmortem.ingest.discover import discover
    keys: set[int] = set()
    budget = BASELINE_MAX_LINES
    for src in discover(path):
        if src.problem or src.kind not in ("rank_log", "unknown", "nccl_log"):
            continue
        try:
            got, n = template_keys(src.path, budget)
        except (OSError, textio.InputProblem, EOFError, ValueError):
            continue
        keys |= got
        budget -= n
        if budget <= 0:
            break
    return keys

"""Context lines around cited evidence: one bounded streaming pass per file, stopping after the last line needed."""
from __future__ import annotations

from postmortem.ingest import textio

MAX_SCAN_LINES = 2_000_000   # a cited line deeper than this in its file is shown without context (keeps renders fast)
MAX_SHOWN_CHARS = 500        # context lines are cut here; the cited text itself comes from the finding


def read_context(wanted: dict[str, set[int]], radius: int = 2, cut: int = MAX_SHOWN_CHARS) -> dict[tuple[str, int], list[tuple[int, str]] | str]:
    """For each (path, line) in `wanted`, the lines line-radius..line+radius as (number, text).

    The value is a reason string ("not_readable", "too_far") instead of lines when the context cannot be shown.
    """
    out: dict[tuple[str, int], list[tuple[int, str]] | str] = {}
    for path in sorted(wanted):
        lines = sorted(n for n in wanted[path] if isinstance(n, int) and n > 0)
        if not lines:
            continue
        reachable = [n for n in lines if n <= MAX_SCAN_LINES]
        for n in lines:
            if n > MAX_SCAN_LINES:
                out[(path, n)] = "too_far"
        if not reachable:
            continue
        keep = set()
        for n in reachable:
            keep.update(range(max(1, n - radius), n + radius + 1))
        stop = max(keep)
        got: dict[int, str] = {}
        try:
            lines_iter = textio.iter_lines(path, start=min(keep))
            try:
                for no, text in lines_iter:
                    if no in keep:
                        got[no] = _cut(text, cut)
                    if no >= stop:
                        break
            finally:
                lines_iter.close()  # closes the file now, not when the generator is collected
        except (OSError, textio.InputProblem, ValueError):
            for n in reachable:
                out[(path, n)] = "not_readable"
            continue
        for n in reachable:
            if n not in got:
                out[(path, n)] = "not_readable"
                continue
            out[(path, n)] = [(k, got[k]) for k in range(max(1, n - radius), n + radius + 1) if k in got]
    return out


def _cut(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    if "\r" in text:
        # a progress bar redrawn with carriage returns: what the terminal showed last is its last redraw
        parts = [p for p in text.split("\r") if p.strip()]
        text = ("… " if len(parts) > 1 else "") + (parts[-1] if parts else "")
    return text if len(text) <= limit else text[:limit] + " …"


def unique_evidence(evidence: list, paths: dict[str, str]) -> list:
    """Cited lines once each (by file and line, or by text when the line is unknown), blank citations filled from
    their file or dropped: what the terminal and the HTML report show."""
    from postmortem.verdict.findings import Evidence
    seen: set = set()
    out, blank = [], {}
    for e in evidence:
        key = (e.source, e.line) if e.line is not None else (e.source, None, (e.text or "").strip())
        if key in seen:
            continue
        seen.add(key)
        out.append(e)
        if e.line is not None and paths.get(e.source):
            blank.setdefault(paths[e.source], set()).add(int(e.line))
    got = read_context(blank, radius=0, cut=WHOLE_LINE_CHARS) if blank else {}
    filled = []
    for e in out:
        text = e.text or ""
        lines = got.get((paths.get(e.source), int(e.line) if e.line is not None else None))
        line = lines[0][1] if isinstance(lines, list) and lines else ""
        # The whole line where the citation is blank or a cut copy of it; a rule's own wording stays.
        if line.strip() and (not text.strip() or (text.strip() in line and len(line) > len(text))
                             or (_cut_short(text) and text.strip()[:60] in line)):
            text = line
        if text.strip():
            filled.append(e if text == e.text else Evidence(e.source, e.line, e.rank, text))
    return filled


WHOLE_LINE_CHARS = 4000   # a cited line is shown whole up to here (rules cut their citations at 400 characters)


def _cut_short(text: str | None) -> bool:
    """Blank, or long enough that the rule may have cut it."""
    return not (text or "").strip() or len(text) >= 399


def where(source: str, line) -> str:
    """`file:line`, or just the file when the citation has no line."""
    return f"{source}:{line}" if line is not None else str(source)


def first_time(analysis, finding) -> "object | None":
    """The earliest time among the cited lines of `finding` (culprit ranks first), or None when none has one."""
    import pandas as pd
    t = analysis.tables
    cited = {(e.source, e.line) for e in finding.evidence if e.line is not None}
    culprits = set(finding.culprit_ranks)
    best = None
    for name in ("events", "tracebacks", "stacks", "steps", "collectives", "nccl", "gpu"):
        df = t.frames.get(name)
        if df is None or not len(df) or not df["ts"].notna().any():
            continue
        rows = df[df["ts"].notna()]
        if name == "events":   # a config echo says what was set, at start-up: not when anything went wrong
            rows = rows[~rows["kind"].isin(["config"])]
        hit = rows[[(s, ln) in cited for s, ln in zip(rows["source"], rows["line"].astype(object))]]
        if culprits and len(hit) and hit["rank"].isin(list(culprits)).any():
            hit = hit[hit["rank"].isin(list(culprits))]
        if len(hit):
            ts = hit["ts"].min()
            best = ts if best is None or ts < best else best
    return None if best is None or pd.isna(best) else best

"""Context lines around cited evidence: one bounded streaming pass per file, stopping after the last line needed."""
from __future__ import annotations

from postmortem import textio

MAX_SCAN_LINES = 2_000_000   # a cited line deeper than this in its file is shown without context (keeps renders fast)
MAX_SHOWN_CHARS = 500        # context lines are cut here; the cited text itself comes from the finding


def read_context(wanted: dict[str, set[int]], radius: int = 2) -> dict[tuple[str, int], list[tuple[int, str]] | str]:
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
            lines_iter = textio.iter_lines(path)
            try:
                for no, text in lines_iter:
                    if no in keep:
                        got[no] = _cut(text)
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


def _cut(text: str) -> str:
    text = text.replace("\r", " ")
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + " …"

"""A rank's own last words: the error it logged itself just before it stopped (`ERROR trainer: data check failed:
empty batch at step 14 (shard 1); exiting`), read from its last lines. A rank that says it is stopping and then
exits with an error code left on purpose: its line, not its peers' closed connections and not a template about
native crashes, is the story of its end."""
from __future__ import annotations

import re

import pandas as pd

from postmortem.verdict.findings import Evidence

NEAR = 6  # the words are among the rank's last lines (a wrapper's own `Training failed` may follow them)
_ERROR = re.compile(r"(?<![\w.-])(?:ERROR|FATAL|CRITICAL)(?![\w.-])|(?<![\w/])[EF]\d{4} \d\d:\d\d")
_STOPPING = re.compile(r"(?i)\b(?:exiting|aborting|giving up|shutting down|cannot continue|can't continue|"
                       r"stopping (?:training|the run|now)|exit(?:ing)? with (?:code|status))\b")
# the launcher's own lines about a rank (its stop signals, its summary), never the rank's words
_LAUNCHER = re.compile(r"closing signal|exitcode|ChildFailedError|Root Cause|error_file|Signal \d+ \(SIG|"
                       r"ProcessRaisedException|ProcessExitedException")
_NOISE = re.compile(r"^\s*(?:Traceback \(most recent call last\)|File \"|During handling|The above exception|"
                    r"\^+\s*$|~+\s*$)")


def after_words(text: str) -> bool:
    """A line that follows a rank's own last words without adding any: a traceback's lines, a peer's closed
    connection or a timeout it reports, the launcher's lines about it."""
    from postmortem.ranks.ends import _PEER_GONE, _WAIT_MSG
    t = str(text)[:600]
    return bool(not t.strip() or _NOISE.search(t) or _PEER_GONE.search(t) or _WAIT_MSG.search(t)
                or _LAUNCHER.search(t) or _exception_line(t) or t.startswith(("  ", "\t")))


def _said(message: str) -> int:
    """2: says it stops (`...; exiting`), 1: an error line of its own, 0: neither."""
    from postmortem.ranks.ends import _PEER_GONE, _WAIT_MSG
    text = str(message)[:600]
    if _NOISE.search(text) or _PEER_GONE.search(text) or _WAIT_MSG.search(text) or _LAUNCHER.search(text) \
            or _exception_line(text):
        return 0
    if _STOPPING.search(text):
        return 2
    return 1 if _ERROR.search(text) else 0


def _exception_line(text: str) -> bool:
    from postmortem import catalog
    try:
        return catalog.exception_line(text) is not None
    except Exception:  # noqa: BLE001 - a line the catalog cannot read is no exception line
        return False


def last_words(tables, ranks: set | None = None) -> dict[int, tuple[int, Evidence]]:
    """rank -> (2 stop / 1 error, the line) for every rank (of `ranks`, when given) whose last lines hold an error
    it logged itself."""
    ll = tables.frames.get("last_lines") if hasattr(tables, "frames") else None
    if ll is None or ll.empty:
        return {}
    ll = ll[ll["rank"].notna() & ll["distance"].notna() & (ll["distance"] <= NEAR)]
    if ranks is not None:
        ll = ll[ll["rank"].isin(list(ranks))]
    out: dict = {}
    for rank, src, line, msg, dist in zip(ll["rank"].tolist(), ll["source"].tolist(), ll["line"].tolist(),
                                          ll["message"].tolist(), ll["distance"].tolist()):
        kind = _said(str(msg))
        if not kind:
            continue
        r = int(rank)
        key = (kind, -int(dist))
        if r not in out or key > out[r][0]:
            out[r] = (key, Evidence(src, None if pd.isna(line) else int(line), r, str(msg).strip()[:300]))
    return {r: (k[0], e) for r, (k, e) in out.items()}


def apply(tables, rows: dict) -> None:
    """A rank that exited with an error code and no exception (`left`), or whose end nothing recorded (`running`)
    but whose last lines say it stops, ended on its own words: `end` becomes `exited` with that line as its detail
    and `root` as its cause (postmortem.ranks.ends fills the rest)."""
    # only ranks whose end is open to their words are read (a job of thousands of ranks killed or timed out has
    # hundreds of thousands of last lines)
    words = last_words(tables, {r for r, rr in rows.items() if rr.get("end") in ("left", "running")})
    for r, rr in rows.items():
        if r not in words:
            continue
        kind, ev = words[r]
        end = rr.get("end")
        if end == "left" or (end == "running" and kind == 2):
            code = rr.get("exit")
            how = f"exit {code}" if code is not None and not pd.isna(code) else "it stopped"
            rr.update(end="exited", end_detail=f"{how} after logging: {ev.text}"[:300], end_cause="root",
                      end_at=f"{ev.source}:{ev.line}" if ev.line is not None else ev.source, end_category=None)


def last_own_line(tables, rank: int) -> Evidence | None:
    """The last line a rank printed of its own (not a traceback, a peer's error or the launcher's words), as evidence:
    what it was doing when its peers waited; None when its last lines hold none."""
    ll = tables.frames.get("last_lines") if hasattr(tables, "frames") else None
    if ll is None or ll.empty:
        return None
    mine = ll[(ll["rank"] == rank) & ll["distance"].notna()].sort_values("distance")
    for src, line, msg in zip(mine["source"].tolist(), mine["line"].tolist(), mine["message"].tolist()):
        if not after_words(str(msg)):
            return Evidence(src, None if pd.isna(line) else int(line), rank, str(msg).strip()[:300])
    return None


def rank_row(tables, rank: int):
    """The rank's row of the `ranks` table (a Series), or None when the table or the rank is not there."""
    ranks = tables.frames.get("ranks") if hasattr(tables, "frames") else None
    if ranks is None or ranks.empty:
        return None
    sel = ranks[ranks["rank"] == rank]
    return None if sel.empty else sel.iloc[0]


def ending_line(tables, rank: int) -> Evidence | None:
    """The line where a rank's ending shows (its first error, else how it ended: the `ranks` table's
    first_error_at / end_at), as evidence; None when no line of it is known."""
    row = rank_row(tables, rank)
    if row is None:
        return None
    for at, text in (("first_error_at", "first_error"), ("end_at", "end_detail")):
        where, what = row.get(at), row.get(text)
        if not isinstance(where, str) or ":" not in where:
            continue
        src, _, line = where.rpartition(":")
        return Evidence(src, int(line) if line.isdigit() else None, rank,
                        str(what).strip()[:300] if isinstance(what, str) else "")
    return None

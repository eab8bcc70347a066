"""Rows of the report's per-rank tables: how every rank ended (ranks that ended alike grouped past a few) and the
odd lines."""
from __future__ import annotations

import re

import pandas as pd

from postmortem.reports import i18n
from postmortem.verdict.sentences import clip
from postmortem.reports.sections import rank_ranges
from postmortem.reports.view_types import (EndRow, OddRow)
from postmortem.reports.view_evidence import _RANK_TAG


MAX_END_ROWS = 40
# what the end rows read of the `ranks` table (_doing and end_rows)
_END_COLUMNS = ("rank", "stack_class", "stack_at", "stack_where", "last_activity", "last_enqueued", "last_completed",
                "last_started", "first_error", "end", "last_step", "exit")
GROUP_ABOVE = 16          # up to this many ranks every rank has its own row; above it ranks that ended alike share one


def _stack_rows(stacks) -> dict[str, dict]:
    """`source:line` -> stacks row, to name the user's frame of a rank's end stack."""
    if stacks is None or not len(stacks):
        return {}
    at = [f"{s}:{int(ln)}" if ln == ln and ln is not None and ln is not pd.NA else str(s)
          for s, ln in zip(stacks["source"].tolist(), stacks["line"].tolist())]
    # (only the frames are read: a records dict per dumped rank costs ~40 us each at thousands of ranks)
    return {a: {"frames": fr} for a, fr in zip(at, stacks["frames"].tolist())}


def _doing(rec: dict, stacks: dict, t, lang: str) -> str:
    """What a rank was doing at the end, in words: its end stack's class and the frame in the user's code (or the
    deciding frame), else its last activity."""
    from postmortem.stacks import blocking_frame, last_user_frame

    def cell(v) -> str:
        return "" if v is None or v is pd.NA or (not isinstance(v, (str, list)) and v != v) else str(v)
    cls = cell(rec.get("stack_class"))
    if cls:
        row = stacks.get(cell(rec.get("stack_at")))
        frames = row.get("frames") if row else None
        where = cell(rec.get("stack_where"))
        if isinstance(frames, list) and frames:
            # (both remember their answer per shared frames list: postmortem.stacks.classify._per_stack)
            f = last_user_frame(frames) or blocking_frame(frames)
            if f:
                file = str(f.get("file") or "").rsplit("/", 1)[-1]
                where = f"{f.get('func')} ({file}:{f.get('line')})" if f.get("line") is not None else \
                    f"{f.get('func')} ({file})" if file else str(f.get("func"))
        words = t.get(f"stk_{cls}", cls.replace("_", " ")) if cls != "unknown" else ""
        return f"{words}: {where}" if words and where else words or where
    act = cell(rec.get("last_activity"))
    return i18n.value_words(lang, "act_", act) if act and act != "unknown" else ""


def end_rows(ranks, culprits, affected=(), t=None, lang: str = "en", stacks=None,
             stopped: dict | None = None) -> tuple[list[EndRow], int]:
    """The `ranks` table as report rows: one per rank for small jobs, else ranks that ended alike share a row
    (culprits first, then the ranks that waited); at most MAX_END_ROWS, and how many more groups there were."""
    if ranks is None or ranks.empty:
        return [], 0
    t = t or i18n.catalogue(lang)
    stacks_at = _stack_rows(stacks)
    stopped = stopped or {}
    culprits, affected = set(culprits), set(affected)

    def cell(v) -> str:
        return "" if v is None or v is pd.NA or (not isinstance(v, (str, list)) and v != v) else str(v)

    alone = len(ranks) <= GROUP_ABOVE
    ends = []
    cols = [c for c in _END_COLUMNS if c in ranks.columns]
    # column lists zipped into records (to_dict("records") boxes every cell and took ~1 s at 16,384 ranks), of the
    # columns read here only
    for rec in (dict(zip(cols, vals)) for vals in zip(*(ranks[c].tolist() for c in cols))):
        r = int(rec["rank"])
        role = "culprit" if r in culprits else "affected" if r in affected else "other"
        doing = _doing(rec, stacks_at, t, lang)
        coll = ""
        if cell(rec.get("last_enqueued")) or cell(rec.get("last_completed")):
            coll = f"{cell(rec.get('last_enqueued')) or '?'} / {cell(rec.get('last_completed')) or '?'}"
        elif cell(rec.get("last_started")):
            coll = f"#{cell(rec.get('last_started'))}"
        err = clip(cell(rec.get("first_error")), 140)
        ended = t.get(f"ended_{cell(rec.get('end'))}", "") if cell(rec.get("end")) else ""
        ends.append((r, role, cell(rec.get("last_step")), doing, coll, err, cell(rec.get("exit")), ended))
    # ranks name themselves in their errors ("[Rank 7] Watchdog caught ..."): alike once that is masked
    masked = sub_each(_RANK_TAG, "#", [e[5] for e in ends])
    groups: dict[tuple, list[int]] = {}
    shown_err: dict[tuple, str] = {}
    for (r, role, step, doing, coll, err, ex, ended), err_key in zip(ends, masked):
        key = (r if alone else None, role, step, doing, coll, err_key, ex, ended)
        groups.setdefault(key, []).append(r)
        shown_err.setdefault(key, err)
    if len(groups) > MAX_END_ROWS:
        groups, shown_err = _alike(groups, shown_err)
    order = {"culprit": 0, "affected": 1, "other": 2}
    rows = []
    for key, members in sorted(groups.items(), key=lambda kv: (order[kv[0][1]], kv[1][0])):
        _, role, step, doing, coll, _, ex, ended = key
        err = shown_err[key]
        where = [stopped[m] for m in members if stopped.get(m)]
        stop = where[0] if where and len(set(where)) == 1 else f"{min(where)} … {max(where)}" if where else ""
        if not where and role == "culprit" and not (step or doing or err or ex):
            stop = t["fig_silent"]
        label = rank_ranges(members) + (f" ({len(members)})" if len(members) > 1 else "")
        rows.append(EndRow(label, len(members), role == "culprit", step, doing, coll, err, ex, role=role,
                           role_words={"culprit": t["role_culprit"], "affected": t["role_affected"]}.get(role, ""),
                           stopped=stop, ended=ended))
    return rows[:MAX_END_ROWS], max(0, len(rows) - MAX_END_ROWS)


_NUMBER = re.compile(r"\d+")
_JOIN = "\x1f"  # (ASCII's unit separator: no pattern here matches it or across it)


def sub_each(rx: re.Pattern, repl: str, texts: list[str]) -> list[str]:
    """[rx.sub(repl, t) for t in texts], as one sub over the texts joined by a character none of them holds (and
    `rx` cannot match), else text by text."""
    if len(texts) < 2 or any(_JOIN in t for t in texts):
        return [rx.sub(repl, t) for t in texts]
    out = rx.sub(repl, _JOIN.join(texts)).split(_JOIN)
    return out if len(out) == len(texts) else [rx.sub(repl, t) for t in texts]


def _alike(groups: dict, shown_err: dict) -> tuple[dict, dict]:
    """Groups of ranks that ended alike, ignoring the numbers that only say which one it was (its pid, its time, a
    count in its message) and where each stopped counting steps (shown as a range): a job of thousands of ranks,
    whose end rows would otherwise be one per rank. Each row shows its lowest rank's words as the example."""
    merged: dict = {}
    keys = list(groups)
    # (each text masked in one pass over all of them: a regex call per rank cost ~4 us, 0.2 s at 16,384 ranks)
    doings, errors, exits = (sub_each(_NUMBER, "N", [k[i] for k in keys]) for i in (3, 5, 6))
    for key, doing, err, ex in zip(keys, doings, errors, exits):
        members = groups[key]
        _, role, step, _, coll, _, _, ended = key
        # (the error is shown cut at a length: masked, its start is what ranks that ended alike share)
        alike = (role, doing, coll, err[:60], ex, ended)
        got = merged.setdefault(alike, [[], [], None])
        got[0].extend(members)
        if step:
            got[1].append(int(step))
        if got[2] is None or members[0] < got[2][0]:
            got[2] = (members[0], key)
    out: dict = {}
    errs: dict = {}
    for members, steps, (_, key) in merged.values():
        _, role, _, doing, coll, err, ex, ended = key
        lo, hi = (min(steps), max(steps)) if steps else (None, None)
        step = "" if lo is None else str(lo) if lo == hi else f"{lo}–{hi}"
        new = (None, role, step, doing, coll, err, ex, ended)
        out[new] = sorted(members)
        errs[new] = shown_err[key]
    return out, errs


MAX_ODD_ROWS = 8


def odd_rows(odd, t, culprits: set | None = None) -> tuple[list[OddRow], int]:
    """The odd-lines table as report rows: the suspects first, then the rest that are not cascades; at most
    MAX_ODD_ROWS, and how many more there were. With a verdict that names culprits, only rows whose ranks are among
    them are marked as pointing at the culprit (an odd rank the verdict clears is shown, not marked)."""
    if odd is None or odd.empty:
        return [], 0
    keep = odd[odd["suspect"] | ~odd["cascade"]]
    rows = []
    for rec in keep.to_dict("records"):
        kind = "new" if rec["kind"] == "new" else rec["kind"]
        at = ", ".join(str(x) for x in (rec["at"] or [])[:2])
        ranks = [int(r) for r in rec["ranks"]]
        points = bool(rec["suspect"]) and (not culprits or bool(set(ranks) & culprits))
        rows.append(OddRow(rank_ranges(ranks), t[f"odd_{kind}"], clip(str(rec["example"]), 200),
                           at, points, rec["new"] is True))
    rows.sort(key=lambda r: not r.suspect)  # (stable) the rows that point at the verdict's culprits first
    return rows[:MAX_ODD_ROWS], max(0, len(rows) - MAX_ODD_ROWS)

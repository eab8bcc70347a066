"""The evidence the report cites: the root's lines with their context, the same line printed by many ranks shown
once, overlapping contexts merged."""
from __future__ import annotations

import re

import pandas as pd

from postmortem.reports import i18n
from postmortem.verdict.sentences import clip
from postmortem.reports.evidence import WHOLE_LINE_CHARS, read_context, unique_evidence
from postmortem.reports.sections import rank_ranges
from postmortem.reports.view_types import (AlsoAt, ContextLine, EvidenceItem, MAX_CITED_CHARS, _str)


def _cited(text: str) -> str:
    text = str(text)
    return text if len(text) <= MAX_CITED_CHARS else text[:MAX_CITED_CHARS] + " …"


def _line_no(v) -> int | None:
    """A cited line number as a plain int (rules may hand over NumPy/pandas integers or None)."""
    try:
        return None if v is None or pd.isna(v) else int(v)
    except (TypeError, ValueError):
        return None


def _evidence(root, t, paths, anchors, radius, limit, analysis=None) -> tuple[list[EvidenceItem], int]:
    from postmortem.reports.decisive import decisive_lines
    lines = _verdict_lines(root, analysis)
    if not lines:
        return [], 0
    cited = unique_evidence(lines, paths)
    shown = cited[:limit]
    wanted: dict[str, set[int]] = {}
    decisive: dict[int, list] = {}
    for i, e in enumerate(shown):
        path, line = paths.get(e.source), _line_no(e.line)
        got = decisive_lines(analysis, str(e.source), line, path) if analysis is not None and radius > 0 else None
        if got:
            decisive[i] = got
        elif path and line is not None:
            wanted.setdefault(path, set()).add(line)
    ctx = read_context(wanted, radius, cut=WHOLE_LINE_CHARS) if radius > 0 else {}
    items = []
    for i, e in enumerate(shown):
        line = _line_no(e.line)
        rank = _line_no(e.rank)
        item = EvidenceItem(source=str(e.source), line=_str(line), rank=_str(rank), text=clip(e.text, MAX_CITED_CHARS),
                            anchor=anchors.get(str(e.source), ""),
                            rank_label=i18n.fmt(t, "rank_badge", rank=rank) if rank is not None else "")
        path = paths.get(e.source)
        got = ctx.get((path, line)) if path and line is not None else None
        if i in decisive:
            item.context = [ContextLine(c.no, c.text, c.hit, c.gap, _block_label(c.label, t)) for c in decisive[i]]
            if all(c.no is None for c in decisive[i]):
                item.line = ""   # decoded from a JSON field: no line numbers of the file
        elif isinstance(got, list):
            item.context = [ContextLine(no, text, no == line) for no, text in got]
            hit = next((text for no, text in got if no == line), "")
            if item.text.strip() and item.text.strip() in hit:
                item.text = ""   # the highlighted line says it all; a rule's own wording of it stays in the header
        elif radius > 0 and line is not None:   # a citation with no line (a whole-file fact) needs no excuse
            why = "why_too_far" if got == "too_far" else "why_not_readable"
            item.note = i18n.fmt(t, "evidence_no_context", why=t[why])
        items.append(item)
    merged = _merge_overlapping(items, shown, t)
    return _same_lines_once(merged, t), len(cited) - len(shown)


def _verdict_lines(root, analysis) -> list:
    """The lines the verdict rests on: its own (root and mechanism findings), else the root finding's."""
    v = getattr(analysis, "verdict", None) if analysis is not None else None
    if v is not None and getattr(v, "evidence", None):
        return list(v.evidence)
    return list(root.evidence) if root is not None else []


def _block_label(label: str, t) -> str:
    if not label:
        return ""
    if label == "holds_gil":
        return t["ev_holds_gil"]
    if label.startswith("same_library:"):
        return i18n.fmt(t, "ev_same_library", lib=label.split(":", 1)[1])
    return label


# (the word-boundary alternatives share one look-behind: `re` tried each `\b...` at every position, 4x slower over
# the end rows of thousands of ranks; the same matches, as `\b` before a word character is "no word character before")
_RANK_TAG = re.compile(r"\[(?:rank|default|Rank )\d+\]:?|(?<!\w)(?:rank ?\d+\b|pid:? ?\d+|Thread \d+|Process \d+|"
                       r"0x[0-9a-fA-F]{6,}\b)")


def _same_lines_once(items: list[EvidenceItem], t) -> list[EvidenceItem]:
    """Blocks that show the same lines on different ranks (ranks 1-3 all in `dist.barrier()` at train.py:65) become
    one block naming every rank and linking the other copies; the block that differs stays on its own."""
    out: list[EvidenceItem] = []
    keys: dict[tuple, int] = {}
    ranks: dict[int, set] = {}
    for item in items:
        key = (_RANK_TAG.sub("#", item.text),
               tuple((_RANK_TAG.sub("#", c.text), c.hit, c.gap) for c in item.context)) if item.context else None
        j = keys.get(key) if key is not None else None
        if j is None:
            if key is not None:
                keys[key] = len(out)
            ranks[len(out)] = {int(item.rank)} if item.rank.isdigit() else set()
            out.append(item)
            continue
        first = out[j]
        first.also.append(AlsoAt(f"{item.source}:{item.line}" if item.line else item.source, item.anchor, item.rank))
        if item.rank.isdigit():
            ranks[j].add(int(item.rank))
        if len(ranks[j]) > 1:
            first.rank_label = i18n.fmt(t, "ranks_badge", ranks=rank_ranges(ranks[j]))
        first.also_label = i18n.fmt(t, "ev_same_lines", n=len(first.also))
    return out


def _merge_overlapping(items: list[EvidenceItem], cited, t) -> list[EvidenceItem]:
    """Cited lines of one file whose context windows touch become one block with several highlighted lines."""
    out: list[EvidenceItem] = []
    ranks: list[set] = []
    by_source: dict[str, int] = {}
    for item, e in zip(items, cited):
        j = by_source.get(item.source)
        if item.context and j is not None and out[j].context and \
                item.context[0].no <= out[j].context[-1].no + 1 and out[j].context[0].no <= item.context[-1].no + 1:
            block = out[j]
            lines = {c.no: c for c in block.context}
            for c in item.context:
                if c.no not in lines or c.hit:
                    lines[c.no] = c
            block.context = [lines[n] for n in sorted(lines)]
            block.line = ", ".join(str(c.no) for c in block.context if c.hit)
            if _line_no(e.rank) is not None:
                ranks[j].add(_line_no(e.rank))
                block.rank_label = i18n.fmt(t, "rank_badge", rank=rank_ranges(ranks[j]))
            continue
        by_source[item.source] = len(out)
        out.append(item)
        ranks.append({_line_no(e.rank)} if _line_no(e.rank) is not None else set())
    return out

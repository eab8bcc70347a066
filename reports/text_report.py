"""The terminal summary: verdict first, then evidence, other findings, gaps and unreadable sources."""
from __future__ import annotations

import re
import textwrap

from postmortem.findings import CATEGORY_WORDS
from postmortem.sentences import as_int, ranks_phrase
from postmortem.stacks import rank_ranges
from reports.evidence import first_time, unique_evidence, where


def render_text(analysis, width: int = 100) -> str:
    """Plain-text summary of an Analysis (same verdict as the JSON and HTML)."""
    out: list[str] = []
    v = analysis.verdict
    if v is None:
        return "postmortem: no readable input files.\n"
    root = analysis.finding_list[0] if analysis.finding_list else None
    out.append(f"VERDICT  {v.category}  ({CATEGORY_WORDS.get(v.category, v.category)})  confidence {v.confidence:.2f}")
    out.extend("  " + line for line in _wrap(v.summary, width - 2))
    if v.culprit_ranks:
        out.append(f"  culprit: {ranks_phrase(v.culprit_ranks)}")
    if v.phase and v.phase != "unknown":
        out.append(f"  phase:   {v.phase}")
    if as_int(v.step) is not None:
        out.append(f"  step:    {as_int(v.step)}")
    when = first_time(analysis, root) if root else None
    if when is not None:
        out.append(f"  time:    {when:%Y-%m-%d %H:%M:%S} UTC")
    if root:
        out.append("")
        out.append("WHY")
        out.extend("  " + line for line in _wrap(root.explanation, width - 2))
        out.append("FIX")
        out.extend("  " + line for line in _wrap(root.remediation, width - 2))
        paths = {s.source: s.path for s in (analysis.sources or [])}
        cited = unique_evidence(root.evidence, paths)
        if cited:
            out.append("EVIDENCE")
            for e in cited[:8]:
                rank = f"  [rank {e.rank}]" if e.rank is not None else ""
                out.append(f"  {where(e.source, e.line)}{rank}")
                out.extend("      " + line for line in _wrap(e.text.strip(), width - 6, keep=True))
            if len(cited) > 8:
                out.append(f"  ... {len(cited) - 8} more cited lines (--format json or -o report.html shows all)")
    others = analysis.finding_list[1:]
    if others:
        out.append("")
        out.append("OTHER FINDINGS")
        for f in others[:10]:
            tag = f" (cascade of {f.cascade_of})" if f.cascade_of else ""
            head = f"  {f.confidence:.2f} {f.category:22} "
            out.extend(textwrap.wrap(f"{f.title}{tag}", width, initial_indent=head,
                                     subsequent_indent=" " * len(head)) or [head])
    if analysis.evidence_gaps:
        out.append("")
        out.append("EVIDENCE GAPS (collect next time)")
        for g in analysis.evidence_gaps:
            out.append(f"  - {g['missing']}: {g['how']}")
    meta = analysis.tables.meta
    src = analysis.tables.sources
    bad = src[src["problem"].notna()]
    out.append("")
    ws = meta.get("world_size")
    out.append(f"INPUT  {len(src)} files, world size {ws if ws is not None else '?'}"
               f"{' (inferred)' if meta.get('world_size_inferred') else ''}, ranks seen "
               f"{_ranges(meta.get('ranks_seen', []))}")
    for _, r in bad.head(20).iterrows():
        out.append(f"  skipped/partial: {r['source']}: {r['problem']}")
    for err in analysis.tables.meta.get("rule_errors") or []:
        out.append(f"  rule error (its finding is missing): {err}")
    return terminal_safe("\n".join(out) + "\n")


_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """Control characters from untrusted log text shown escaped (`\\x1b`), so a log cannot drive the terminal."""
    return _CONTROL_RE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _wrap(text: str, width: int, keep: bool = False) -> list[str]:
    """Word-wrapped lines; `keep` wraps long tokens too (paths, stack frames) so no character is lost."""
    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=not keep) or [""]


def _ranges(ranks: list[int]) -> str:
    return rank_ranges(ranks) or "none"

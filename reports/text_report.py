"""The terminal summary: verdict first, then evidence, other findings, gaps and unreadable sources."""
from __future__ import annotations

import re

from postmortem.findings import CATEGORY_WORDS
from postmortem.stacks import rank_ranges


def render_text(analysis, width: int = 100) -> str:
    """Plain-text summary of an Analysis (same verdict as the JSON and HTML)."""
    out: list[str] = []
    v = analysis.verdict
    if v is None:
        return "postmortem: no readable input files.\n"
    out.append(f"VERDICT  {v.category}  ({CATEGORY_WORDS.get(v.category, v.category)})  confidence {v.confidence:.2f}")
    if v.phase:
        out.append(f"  phase:   {v.phase}")
    if v.culprit_ranks:
        out.append(f"  culprit: rank {', '.join(map(str, v.culprit_ranks))}")
    if v.step is not None:
        out.append(f"  step:    {v.step}")
    out.append(f"  {v.summary}")
    root = analysis.findings[0] if analysis.findings else None
    if root:
        out.append("")
        out.append("WHY")
        out.extend("  " + line for line in _wrap(root.explanation, width - 2))
        out.append("FIX")
        out.extend("  " + line for line in _wrap(root.remediation, width - 2))
        if root.evidence:
            out.append("EVIDENCE")
            for e in root.evidence[:8]:
                rank = f" [rank {e.rank}]" if e.rank is not None else ""
                out.append(f"  {e.source}:{e.line}{rank}  {e.text[: width - 20]}")
    others = analysis.findings[1:]
    if others:
        out.append("")
        out.append("OTHER FINDINGS")
        for f in others[:10]:
            tag = f" (cascade of {f.cascade_of})" if f.cascade_of else ""
            out.append(f"  {f.confidence:.2f} {f.category:22} {f.title[:60]}{tag}")
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


def _wrap(text: str, width: int) -> list[str]:
    import textwrap
    return textwrap.wrap(text, width) or [""]


def _ranges(ranks: list[int]) -> str:
    return rank_ranges(ranks) or "none"

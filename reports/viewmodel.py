"""View model for the HTML report: small plain values, built from the Analysis; templates only loop and print."""
from __future__ import annotations

from postmortem.findings import CATEGORY_WORDS


def build_view(analysis, **options) -> dict:
    """Plain dict the templates render."""
    v = analysis.verdict
    src = analysis.tables.sources
    return {
        "input": analysis.input,
        "verdict": None if v is None else {
            "category": v.category, "words": CATEGORY_WORDS.get(v.category, v.category), "phase": v.phase,
            "confidence": f"{v.confidence:.2f}", "culprits": ", ".join(map(str, v.culprit_ranks)) or "—",
            "step": "—" if v.step is None else v.step, "summary": v.summary},
        "root": analysis.findings[0].to_dict() if analysis.findings else None,
        "findings": [f.to_dict() for f in analysis.findings[1:]],
        "gaps": list(analysis.evidence_gaps),
        "sources": [{"source": r["source"], "kind": r["kind"], "bytes": r["bytes"], "lines": r["lines"],
                     "problem": r["problem"] or ""} for _, r in src.iterrows()],
        "world_size": analysis.tables.meta.get("world_size"),
    }

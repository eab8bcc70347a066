"""Stage 5: from all findings pick the root cause (earliest cause that explains the rest); mark cascades."""
from __future__ import annotations

from postmortem.findings import Finding, Verdict
from postmortem.sentences import verdict_sentence

# Categories that are usually consequences of something else when another finding is present.
SYMPTOM_CATEGORIES = ("collective_timeout", "rank_crash", "nccl_error", "unknown")


def decide(findings: list[Finding], has_inputs: bool, failure_signals: bool) -> tuple[Verdict | None, list[Finding]]:
    """Return the verdict and the findings sorted by confidence (highest first), with cascade_of filled in."""
    if not has_inputs:
        return None, []
    ordered = sorted(findings, key=lambda f: (-f.confidence, f.order, f.rule))
    if not ordered:
        if failure_signals:
            return Verdict("unknown", None, None, 0.3, [], None,
                           "Something failed, but no rule recognises the evidence."), []
        return Verdict("no_failure", None, None, 0.6, [], None,
                       "No failure signal in the inputs (no exception, timeout, kill or error line)."), []
    root = ordered[0]
    for f in ordered[1:]:
        if f.category == root.category and f.rule != root.rule:
            f.cascade_of = root.rule if f.confidence < root.confidence else None
        elif f.category in root.explains or f.category in SYMPTOM_CATEGORIES:
            f.cascade_of = root.rule
    summary = verdict_sentence(root)
    return Verdict(root.category, root.phase, root.rule, root.confidence, list(root.culprit_ranks), root.step,
                   summary), ordered

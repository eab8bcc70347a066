"""Stage 5: from all findings pick the root cause (earliest cause that explains the rest); mark cascades."""
from __future__ import annotations

from postmortem.findings import Finding, Verdict
from postmortem.sentences import verdict_sentence

# Categories that are usually consequences of something else when another finding is present.
SYMPTOM_CATEGORIES = ("collective_timeout", "rank_crash", "nccl_error", "unknown")


def decide(findings: list[Finding], has_inputs: bool, signals=None, ranks=None) -> tuple[Verdict | None, list[Finding]]:
    """Return the verdict and the findings sorted by confidence (highest first), with cascade_of filled in.

    `signals` (postmortem.signals.Signals, or a bool for "some failure signal") decides between `unknown` and
    `no_failure` when no rule fired, and how sure `no_failure` is."""
    if not has_inputs:
        return None, []
    ordered = sorted(findings, key=lambda f: (-f.confidence, f.order, f.rule))
    if not ordered:
        return _no_finding(signals), []
    root = ordered[0]
    if root.step is None and root.culprit_ranks:
        root.step = culprit_step(ranks, root.culprit_ranks)
    for f in ordered[1:]:
        if f.category == root.category and f.rule != root.rule:
            f.cascade_of = root.rule if f.confidence < root.confidence else None
        elif f.category in root.explains or f.category in SYMPTOM_CATEGORIES:
            f.cascade_of = root.rule
    summary = verdict_sentence(root)
    return Verdict(root.category, root.phase, root.rule, root.confidence, list(root.culprit_ranks), root.step,
                   summary), ordered


def _no_finding(signals) -> Verdict:
    """No rule fired: `unknown` when anything says the job failed, else `no_failure`, confident only with a
    positive end (an end-of-training marker or a zero exit) and no hint that progress stopped short."""
    failed = signals if isinstance(signals, bool) else bool(signals and signals.failure)
    if failed:
        what = "" if isinstance(signals, bool) else "; ".join(dict.fromkeys(w for w, _ in signals.failure))
        return Verdict("unknown", None, None, 0.3, [], None,
                       "The job failed" + (f" ({what})" if what else "")
                       + ", but the inputs do not show why; see the evidence gaps for what to collect.")
    weak = [] if isinstance(signals, bool) or signals is None else signals.weak
    ended = [] if isinstance(signals, bool) or signals is None else signals.normal_end
    if weak:
        return Verdict("no_failure", None, None, 0.4, [], None,
                       "No error in the inputs, but " + weak[0][0] + " with no end-of-run marker: the job may "
                       "have been stopped without a trace; see the evidence gaps.")
    if ended:
        return Verdict("no_failure", None, None, 0.85, [], None,
                       f"The job ended normally ({ended[0][0]}) and nothing in the inputs says otherwise.")
    return Verdict("no_failure", None, None, 0.5, [], None,
                   "No failure signal in the inputs (no exception, timeout, kill or error line), but no end-of-run "
                   "marker either.")


def culprit_step(ranks, culprits: list[int]) -> int | None:
    """The culprits' last training step from the `ranks` table (when they all stopped at the same one)."""
    if ranks is None or getattr(ranks, "empty", True):
        return None
    steps = ranks[ranks["rank"].isin(list(culprits))]["last_step"].dropna().unique()
    return int(steps[0]) if len(steps) == 1 else None

"""Stage 5: from all findings pick the root cause (earliest cause that explains the rest); mark cascades."""
from __future__ import annotations

from postmortem.verdict.findings import Finding, Verdict
from postmortem.verdict.sentences import verdict_sentence

# Categories that are usually consequences of something else when another finding is present.
SYMPTOM_CATEGORIES = ("collective_timeout", "rank_crash", "nccl_error", "unknown")


# Rules whose finding says that nothing in the inputs shows why (a bare timeout): no cascade of another root.
UNEXPLAINED_ONLY = ("bare-collective-timeout",)
EXPLAINS_AT = 0.6  # a root below this is a guess (work no line shows): "nothing shows why" still holds beside it

# Below this strength the asymmetry's culprits are not lent to a finding that names none.
LEND_STRENGTH = 0.5
# A verdict without culprits is at most this sure when several ranks' ends are known and did not fail alike.
NO_CULPRIT_CAP = 0.75


def decide(findings: list[Finding], has_inputs: bool, signals=None, ranks=None,
           culprits=None) -> tuple[Verdict | None, list[Finding]]:
    """Return the verdict and the findings sorted by confidence (highest first), with cascade_of filled in.

    `signals` (postmortem.verdict.signals.Signals, or a bool for "some failure signal") decides between `unknown` and
    `no_failure` when no rule fired, and how sure `no_failure` is. `culprits` (postmortem.ranks.culprits.Culprits) names
    the culprits when the root finding names none, and caps the confidence of a verdict without culprits."""
    if not has_inputs:
        return None, []
    ordered = sorted(findings, key=lambda f: (-f.confidence, f.order, f.rule))
    if not ordered:
        return _no_finding(signals, culprits), []
    root = ordered[0]
    _follow_culprits(root, culprits, ranks)
    # The asymmetry's own finding adds nothing below a root that names the same culprits, and its odd-lines guess
    # is no rival to a root that explains the failure.
    ordered = [root] + [f for f in ordered[1:] if not (
        f.rule == "end-state-asymmetry" and (set(f.culprit_ranks) <= set(root.culprit_ranks) or f.category == "unknown"))]
    # A finding whose claim is that nothing explains the failure is false once a root explains it.
    if root.rule not in UNEXPLAINED_ONLY and root.confidence >= EXPLAINS_AT:
        ordered = [root] + [f for f in ordered[1:] if not (f.rule in UNEXPLAINED_ONLY and f.category in
                                                            root.explains + SYMPTOM_CATEGORIES)]
    if root.step is None and root.culprit_ranks:
        root.step = culprit_step(ranks, root.culprit_ranks)
    for f in ordered[1:]:
        if f.category == root.category and f.rule != root.rule:
            f.cascade_of = root.rule if f.confidence < root.confidence else None
        elif f.category in root.explains or f.category in SYMPTOM_CATEGORIES:
            f.cascade_of = root.rule
        elif (not f.culprit_ranks and root.culprit_ranks and culprits is not None
              and culprits.mechanism == "root-failure" and set(culprits.ranks) & set(root.culprit_ranks)):
            f.cascade_of = root.rule  # the root's rank ended on its own; what the rest did (waits) followed
    if culprits is not None and culprits.alike:
        # every rank failed alike: a finding below the root that picks one of them (the first in some order) names
        # no culprit either
        alike = set(culprits.affected)
        for f in ordered[1:]:
            if f.culprit_ranks and set(f.culprit_ranks) <= alike:
                f.affected_ranks = sorted(set(f.affected_ranks) | set(f.culprit_ranks))
                f.culprit_ranks = []
    summary = verdict_sentence(root)
    return Verdict(root.category, root.phase, root.rule, root.confidence, list(root.culprit_ranks), root.step,
                   summary, reason=root.reason), ordered


def _follow_culprits(root: Finding, culprits, ranks) -> None:
    """Confidence follows the culprit: a root finding without culprits borrows the end-state asymmetry's (when it
    is strong enough), and stays hedged when none can be named although several ranks' ends are known."""
    if root.category == "no_failure" or culprits is None or (root.category == "job_stopped" and root.explains):
        return  # (a job stopped while healthy: no rank is to blame; the `explains` of a stop that cut a healthy job)
    if not root.culprit_ranks and culprits.ranks and culprits.strength >= LEND_STRENGTH and not root.alike:
        root.culprit_ranks = list(culprits.ranks)
        root.affected_ranks = sorted((set(root.affected_ranks) | set(culprits.affected)) - set(culprits.ranks))
        root.explanation = f"{root.explanation} Culprit from how the ranks ended: {culprits.reason}."
        root.evidence = list(root.evidence) + [e for e in culprits.evidence if e not in root.evidence][:3]
        return
    if culprits.alike and root.culprit_ranks and set(root.culprit_ranks) >= set(culprits.affected):
        # every rank failed alike: a finding that names them all names no culprit
        root.affected_ranks = sorted(set(root.affected_ranks) | set(root.culprit_ranks))
        root.culprit_ranks = []
        return
    if root.culprit_ranks or culprits.alike or root.confidence < 0.8:
        return
    known = 0 if ranks is None or "end" not in getattr(ranks, "columns", ()) else int(ranks["end"].notna().sum())
    if known >= 2:
        root.confidence = min(root.confidence, NO_CULPRIT_CAP)


def _no_finding(signals, culprits=None) -> Verdict:
    """No rule fired: `unknown` when anything says the job failed, else `no_failure`, confident only with a
    positive end (an end-of-training marker or a zero exit) and no hint that progress stopped short."""
    failed = signals if isinstance(signals, bool) else bool(signals and signals.failure)
    if failed:
        what = "" if isinstance(signals, bool) else "; ".join(dict.fromkeys(w for w, _ in signals.failure))
        named = list(culprits.ranks) if culprits is not None and culprits.ranks else []
        return Verdict("unknown", None, None, 0.3, named, None,
                       "The job failed" + (f" ({what})" if what else "")
                       + (f"; {culprits.reason}" if named else "")
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

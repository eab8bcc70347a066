"""A job's history beside the verdict: each later torchrun attempt judged on its own, and earlier runs of the same job
given together (resubmissions, a --baseline that failed too), compared by postmortem.verdict.recurrence; then the next action
(postmortem.verdict.next_action) that follows."""
from __future__ import annotations

from postmortem.verdict import recurrence as rec_mod
from postmortem.verdict.next_facts import next_for as _next_for


def restarts(tables, verdict, findings, work, selected) -> rec_mod.Recurrence | None:
    """Recurrence across torchrun's attempts: the verdict is about the first; each later one (at most three) is
    judged from its own lines. A later attempt that cannot be judged is left out, never guessed."""
    from postmortem.verdict.judge import judge
    from postmortem.ingest.attempts import attempt_views
    views = attempt_views(tables)
    if len(views) < 2:
        return None
    outcomes = [rec_mod.outcome_of("attempt 1", verdict, findings, work)]
    split_count = tables.meta.get("attempts").count if tables.meta.get("attempts") is not None else len(views)
    numbers = list(range(1, min(split_count, 3) + 1))[1:] + ([split_count] if split_count > 3 else [])
    for n, view in zip(numbers, views[1:]):
        view.meta.pop("culprits", None)
        view.meta.pop("signals", None)
        try:
            v, f = judge(view, selected)
        except Exception:  # noqa: BLE001 - a later attempt's oddity must not take the first one's verdict down
            continue
        if v is None:
            continue
        out = rec_mod.outcome_of(f"attempt {n}", v, f, view)
        if v.category == "no_failure" and v.confidence < 0.8:
            # its files hold nothing that shows how it ended: said so, never taken for a clean run
            out.category, out.signature = "unknown", "no trace of how it ended"
        outcomes.append(out)
    return rec_mod.compare("restarts", outcomes, 0)


def resubmissions(current, earlier: list) -> rec_mod.Recurrence | None:
    """Recurrence across runs given together, oldest first (`earlier`: Analyses of the runs before `current`)."""
    runs = [a for a in earlier if a is not None and a.verdict is not None]
    if not runs or current.verdict is None:
        return None
    outcomes = [rec_mod.outcome_of(f"run {i + 1}", a.verdict, a.finding_list, a.tables, str(a.input))
                for i, a in enumerate(runs)]
    outcomes.append(rec_mod.outcome_of(f"run {len(runs) + 1}", current.verdict, current.finding_list,
                                       current.tables, str(current.input)))
    return rec_mod.compare("resubmissions", outcomes, len(outcomes) - 1)


def next_for(verdict, findings, tables, recurrence=None):
    """The verdict's next action with its recurrence (see postmortem.verdict.next_action)."""
    return _next_for(verdict, findings, tables, recurrence)


def redecide(current, recurrence) -> None:
    """Decide `current`'s next action again with a recurrence found across runs, said in the verdict's why."""
    if current.verdict is None or recurrence is None:
        return
    current.verdict.next = _next_for(current.verdict, current.finding_list, current.tables, recurrence)

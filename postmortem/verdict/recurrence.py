"""Recurrence: the same root cause again in a later torchrun attempt or a resubmitted run, and whether the job got
further in between. A failure that comes back where it was, unchanged, will not go away by restarting.

Each attempt (postmortem.ingest.attempts) or run is judged on its own; its outcome is reduced to a signature (the root's
category, and the exception class for an exception) and its progress (the furthest training step any rank reported,
checkpoints saved and loaded). Pure functions over those outcomes decide; the analysis of the attempts is in api.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Outcome:
    """One attempt's or run's verdict, reduced to what recurrence compares."""
    label: str                      # "attempt 2", "run 1"
    category: str
    signature: str                  # category, plus the exception class when the root is an exception
    culprit_ranks: list[int] = field(default_factory=list)
    last_step: int | None = None    # the furthest training step any rank reported
    saved: int = 0                  # checkpoint saves seen
    loaded: int = 0                 # checkpoint loads seen
    evidence: list[dict] = field(default_factory=list)   # the root's first cited line
    source: str = ""                # the run's path (resubmissions)

    def to_dict(self) -> dict:
        return {"label": self.label, "category": self.category, "signature": self.signature,
                "culprit_ranks": list(self.culprit_ranks), "last_step": self.last_step, "saved": self.saved,
                "loaded": self.loaded, "source": self.source}


@dataclass
class Recurrence:
    """Across attempts or runs: did the verdict's root come again, and did the job progress in between."""
    kind: str                       # "restarts" or "resubmissions"
    outcomes: list[Outcome]         # earliest first
    verdict_index: int              # which outcome the verdict is about
    same_root: bool = False
    progressed: bool = False
    said: str = ""
    said_zh: str = ""
    evidence: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "same_root": self.same_root, "progressed": self.progressed,
                "runs": [o.to_dict() for o in self.outcomes], "verdict_run": self.verdict_index}


FAILED = ("no_failure",)
EXCEPTION_RULES = ("first-exception",)  # roots that are an exception (its class is part of the signature)


def compare(kind: str, outcomes: list[Outcome], verdict_index: int) -> Recurrence | None:
    """Whether the verdict's root recurs among the other outcomes, and whether the job progressed between the two
    nearest failures of that root. None with fewer than two outcomes."""
    if len(outcomes) < 2 or not 0 <= verdict_index < len(outcomes):
        return None
    me = outcomes[verdict_index]
    rec = Recurrence(kind, outcomes, verdict_index)
    if me.category in FAILED:
        rec.said, rec.said_zh = _sentences(rec, None)
        return rec
    same = [i for i, o in enumerate(outcomes) if i != verdict_index and o.signature == me.signature]
    rec.same_root = bool(same)
    other = None
    if same:
        # the nearest other failure of the same root: the next attempt after the verdict's, or the run before it
        later = [i for i in same if i > verdict_index]
        j = later[0] if later else same[-1]
        first, second = (me, outcomes[j]) if j > verdict_index else (outcomes[j], me)
        rec.progressed = progressed(first, second)
        other = outcomes[j]
        rec.evidence = list(other.evidence[:1])
    rec.said, rec.said_zh = _sentences(rec, other)
    return rec


def progressed(earlier: Outcome, later: Outcome) -> bool:
    """Whether the job got further between two failures: the later one reached a step beyond the earlier one's, or
    resumed from a checkpoint the earlier one saved while the steps say nothing."""
    if earlier.last_step is not None and later.last_step is not None:
        return later.last_step > earlier.last_step
    return earlier.saved > 0 and later.loaded > 0


def _sentences(rec: Recurrence, other: Outcome | None) -> tuple[str, str]:
    """What the recurrence says, in English and Chinese, from the same outcomes."""
    me = rec.outcomes[rec.verdict_index]
    n = len(rec.outcomes)
    if rec.kind == "restarts":
        intro, intro_zh = f"torchrun ran {n} attempts", f"torchrun 共运行了 {n} 次尝试"
    else:
        intro, intro_zh = f"{n} runs were given together", f"一共给出了 {n} 次运行"
    if me.category in FAILED:
        return (f"{intro}; the one judged here shows no failure.", f"{intro_zh}；这里判断的那次没有故障。")
    if other is None:
        others = ", ".join(f"{o.label}: {o.signature}" for i, o in enumerate(rec.outcomes) if i != rec.verdict_index)
        others_zh = "，".join(f"{o.label}：{o.signature}" for i, o in enumerate(rec.outcomes) if i != rec.verdict_index)
        return (f"{intro}; the others ended differently ({others}), so this root has not recurred.",
                f"{intro_zh}；其他几次的结束方式不同（{others_zh}），这个根因没有重复出现。")
    a, b = (me, other) if rec.outcomes.index(other) > rec.verdict_index else (other, me)
    steps = _between(a, b)
    steps_zh = _between(a, b, zh=True)
    if rec.progressed:
        return (f"{intro}; {b.label} failed the same way ({me.signature}) after getting further than {a.label}"
                f"{steps}: the job progresses between failures.",
                f"{intro_zh}；{b.label}以同样的方式失败（{me.signature}），但比{a.label}走得更远{steps_zh}："
                "任务在两次失败之间有进展。")
    return (f"{intro}; {b.label} failed the same way ({me.signature}) without getting further than {a.label}"
            f"{steps}: restarting unchanged repeats the failure.",
            f"{intro_zh}；{b.label}以同样的方式失败（{me.signature}），没有比{a.label}走得更远{steps_zh}："
            "不做修改地重启只会重复这次失败。")


def _between(a: Outcome, b: Outcome, zh: bool = False) -> str:
    """` (last step 12, then 12)` / `（最后一步 12，然后 12）`; "" when a step is unknown."""
    if a.last_step is None or b.last_step is None:
        return ""
    return f"（最后一步 {a.last_step}，然后 {b.last_step}）" if zh else f" (last step {a.last_step}, then {b.last_step})"


def outcome_of(label: str, verdict, findings, tables, source: str = "") -> Outcome:
    """An attempt's or run's Outcome from its verdict, findings and tables."""
    from postmortem.verdict.sentences import exception_name
    root = findings[0] if findings else None
    category = verdict.category if verdict is not None else "unknown"
    signature = category
    # an exception's class tells two crashes apart; a timeout's RuntimeError in a hang's title does not
    if root is not None and root.category == category and (root.rule in EXCEPTION_RULES or category == "rank_crash"):
        exc = exception_name(root)
        if exc:
            signature = f"{category}: {exc}"
    steps = tables.frames.get("steps")
    last = None
    if steps is not None and len(steps):
        train = steps[(steps["phase"] == "train") & steps["step"].notna()]
        if len(train):
            last = int(train["step"].max())
    ev = tables.frames.get("events")
    saved = int((ev["kind"] == "checkpoint_save").sum()) if ev is not None and len(ev) else 0
    loaded = int((ev["kind"] == "checkpoint_load").sum()) if ev is not None and len(ev) else 0
    evidence = []
    if root is not None and root.evidence:
        e = root.evidence[0]
        evidence = [{"source": e.source, "line": e.line, "rank": e.rank, "text": e.text}]
    return Outcome(label, category, signature, list(verdict.culprit_ranks) if verdict is not None else [], last,
                   saved, loaded, evidence, source)

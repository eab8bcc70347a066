"""Findings, evidence and the verdict: the values rules produce and outputs render."""
from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields

CATEGORIES = ("gpu_oom", "host_oom", "dataloader_failure", "barrier_skew", "straggler", "logging_blocking",
              "checkpoint_corruption", "nccl_error", "gpu_hardware", "nan_inf", "ddp_usage_error", "rank_crash",
              "collective_timeout", "job_stopped", "no_failure", "unknown")
PHASES = ("train", "eval", "sample", "checkpoint", "init", "unknown")
SEVERITIES = ("critical", "error", "warning", "info")

CATEGORY_WORDS = {
    "gpu_oom": "GPU out of memory", "host_oom": "host RAM exhausted (OOM killer)",
    "dataloader_failure": "DataLoader worker failure", "barrier_skew": "ranks ran different collective sequences",
    "straggler": "one rank busy while the others waited", "logging_blocking": "a logger blocked the training loop",
    "checkpoint_corruption": "corrupt or partially written checkpoint", "nccl_error": "NCCL / network failure",
    "gpu_hardware": "GPU hardware fault", "nan_inf": "loss became NaN/Inf", "ddp_usage_error": "DDP misuse",
    "rank_crash": "a rank crashed with an exception", "collective_timeout": "a collective timed out (cause not shown)",
    "job_stopped": "the scheduler or a person ended the job",
    "no_failure": "no failure found", "unknown": "a failure the evidence does not explain",
}


@dataclass
class Evidence:
    """One cited input line."""
    source: str
    line: int | None
    rank: int | None
    text: str

    def to_dict(self) -> dict:
        return {"source": self.source, "line": self.line, "rank": self.rank, "text": self.text}


@dataclass
class Finding:
    """What one rule concluded: a category with confidence, culprits, evidence, and what to do."""
    rule: str
    category: str
    confidence: float
    title: str
    explanation: str
    remediation: str
    severity: str = "error"
    phase: str | None = None
    culprit_ranks: list[int] = field(default_factory=list)
    affected_ranks: list[int] = field(default_factory=list)
    step: int | None = None
    evidence: list[Evidence] = field(default_factory=list)
    cascade_of: str | None = None
    reason: str | None = None          # job_stopped: time_limit, preemption, cancelled, node_failure, eviction, ...
    order: tuple = (1, float("inf"))   # (has-order-info, position): earlier = smaller; internal, not serialised
    explains: tuple[str, ...] = ()      # categories this finding, if root, explains as cascades
    # the mechanism hits every rank alike (a DDP reducer error of the model): no culprit is lent from how the ranks
    # ended, where the launcher showed one rank's error only; internal, not serialised
    alike: bool = False

    def __post_init__(self):
        if self.category not in CATEGORIES:
            raise ValueError(f"unknown category {self.category}")
        self.confidence = round(max(0.0, min(1.0, float(self.confidence))), 2)
        self.culprit_ranks = sorted({int(r) for r in self.culprit_ranks})
        self.affected_ranks = sorted({int(r) for r in self.affected_ranks} - set(self.culprit_ranks))
        # The same line cited twice with the same words (two facts of one line: an OOM that is also its traceback's
        # exception, two config keys echoed on one line) is one citation.
        unique: dict = {}
        for e in self.evidence:
            unique.setdefault((e.source, e.line, e.rank, e.text), e)
        if len(unique) < len(self.evidence):
            self.evidence = list(unique.values())

    def to_dict(self) -> dict:
        """JSON-contract dict (docs/json.md)."""
        d = asdict(self)
        d.pop("order"); d.pop("explains")
        d["evidence"] = [e.to_dict() for e in self.evidence]
        return {k: d[k] for k in ("rule", "category", "phase", "reason", "confidence", "severity", "title",
                                  "culprit_ranks",
                                  "affected_ranks", "step", "explanation", "remediation", "cascade_of", "evidence")}


@dataclass
class Verdict:
    """The answer: the root finding's category and where, in one sentence; why, what to change and the lines it rests
    on (filled from the root mechanism's finding by postmortem.verdict.advice once the verdict is decided)."""
    category: str
    phase: str | None
    rule: str | None
    confidence: float
    culprit_ranks: list[int]
    step: int | None
    summary: str
    why: str = ""                 # the mechanism, in a paragraph ("" when no rule fired)
    fix: str = ""                 # what to change, from the root mechanism ("" when no rule fired)
    evidence: list[Evidence] = field(default_factory=list)   # the cited lines of the root finding
    mechanism: str = ""           # postmortem.verdict.advice mechanism id (e.g. "uneven_batches")
    reason: str | None = None     # job_stopped: what ended the job (time_limit, preemption, ...); else None
    next: object = None           # postmortem.verdict.next_action.NextAction: what to do now (restart, change ...)

    def to_dict(self) -> dict:
        """JSON-contract dict: the documented keys, plus `why`, `fix` and `next` (added in schema 1, additive)."""
        d = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)
             if f.name not in ("evidence", "mechanism", "next")}
        d["next"] = self.next.to_dict() if self.next is not None else None
        return d

    def __repr__(self) -> str:
        where = f", culprit_ranks={self.culprit_ranks}" if self.culprit_ranks else ""
        return (f"Verdict({self.category!r}, confidence={self.confidence:.2f}{where}, step={self.step}, "
                f"summary={self.summary!r}, why=..., fix=..., evidence=[{len(self.evidence)} lines]"
                + (f", next={self.next.action!r}" if self.next is not None else "") + ")")

"""The report's view model types: small plain dataclasses the templates loop over and print, and the report's
size limits."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd



SECTION_IDS = ("verdict", "evidence", "timeline", "odd", "steps", "gpu", "stacks", "collectives", "nccl", "findings",
               "gaps", "sources")
FRAGMENT_SECTIONS = ("verdict", "evidence", "findings", "gaps")
MAX_EVIDENCE = 12           # cited lines of the root finding shown with context
OPEN_EVIDENCE = 5           # of those, shown unfolded; the rest sit in a <details>
MAX_OTHER_EVIDENCE = 3      # cited lines per other finding (no context)
MAX_SOURCES = 5000          # rows in the sources table; files with problems are always listed
MAX_STEP_ROWS = 40
MAX_CITED_CHARS = 600
MAX_LEAD_CHARS = 420        # rule texts longer than this show a lead and fold the rest (keeps the fix on screen)


@dataclass
class Fact:
    """One labelled value of the verdict card (only facts with a value are shown)."""
    label: str
    value: str
    css: str = ""


@dataclass
class VerdictView:
    """The answer, in the words of the chosen language."""
    present: bool
    category: str = ""
    words: str = ""
    where: str = ""
    tone: str = "fail"
    kicker: str = ""
    culprits: str = ""
    affected: str = ""
    step: str = ""
    phase: str = ""
    confidence: str = ""
    pct: int = 0
    level: str = "low"
    level_text: str = ""
    meter_label: str = ""
    summary: str = ""
    title: str = ""
    explanation: str = ""
    explanation_more: str = ""
    explanation_lang: str = "en"
    explanation_en: str = ""     # the English why, shown folded beside a translated one
    remediation: str = ""
    remediation_more: str = ""
    remediation_lang: str = "en"
    remediation_en: str = ""     # the English fix, shown beside a translated one
    rule: str = ""
    sentence: str = ""           # the verdict as one sentence, in the report's language
    when: str = ""               # the first cited line's time, when it has one
    facts: list[Fact] = field(default_factory=list)
    next: object = None          # reports.next_view.NextView: what to do now


def _lead(text: str, limit: int = MAX_LEAD_CHARS) -> tuple[str, str]:
    """(lead, full): a long text cut at a word boundary for the first screen, and the whole text ('' when short)."""
    text = text or ""
    if len(text) <= limit:
        return text, ""
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit].rstrip(" ,;:(") + " …", text


@dataclass
class ContextLine:
    no: int | None
    text: str
    hit: bool
    gap: bool = False             # lines were skipped before this one
    label: str = ""               # heads a block of another thread ("holds the GIL", "also in wandb")


@dataclass
class AlsoAt:
    """Another place that says the same (another rank's copy of the same lines)."""
    where: str
    anchor: str
    rank: str


@dataclass
class EvidenceItem:
    """One cited line, where it is, and the lines around it."""
    source: str
    line: str
    rank: str
    text: str
    anchor: str
    rank_label: str = ""
    context: list[ContextLine] = field(default_factory=list)
    note: str = ""
    also: list[AlsoAt] = field(default_factory=list)
    also_label: str = ""


@dataclass
class FigureView:
    name: str
    uri: str
    alt: str
    narrow_uri: str = ""       # the same chart drawn for a phone's width (served below NARROW_MEDIA)


@dataclass
class LaneRow:
    ranks: str
    count: int
    role: str
    role_words: str
    first: str
    last: str
    errors: int
    how: str


@dataclass
class EndRow:
    """Ranks that ended the same way (from the `ranks` table): their role, last step, what they were doing, first
    error, exit, and where they stopped."""
    ranks: str
    count: int
    culprit: bool
    last_step: str
    doing: str
    collectives: str
    first_error: str
    exit: str
    role: str = "other"
    role_words: str = ""
    stopped: str = ""
    ended: str = ""


@dataclass
class OddRow:
    """One odd template (from `a.tables.odd_lines`): the odd ranks, how they are odd, one line of it, where."""
    ranks: str
    kind: str
    line: str
    at: str
    suspect: bool
    new: bool


@dataclass
class StepRow:
    ranks: str
    count: int
    last_step: int
    behind: int
    behind_text: str
    when: str


@dataclass
class FindingRow:
    confidence: str
    category: str
    words: str
    title: str
    rule: str
    severity: str
    ranks: str
    relation: str
    cascade: bool
    explanation: str
    remediation: str
    evidence: list[EvidenceItem]
    title_lang: str = "en"        # the title is the finding's sentence in the report's language when not English
    fix_lang: str = "en"


@dataclass
class GapView:
    missing: str
    why: str
    how: str


@dataclass
class SourceRow:
    anchor: str
    source: str
    kind: str
    rank: str
    host: str
    bytes: str
    lines: str
    problem: str


@dataclass
class NavItem:
    id: str
    title: str
    empty: bool


@dataclass
class ReportView:
    """Everything a template prints."""
    lang: str
    t: dict
    input: str
    world: str
    world_note: str
    ranks_seen: str
    n_files: int
    generated: str
    version: str
    nav: list[NavItem]
    verdict: VerdictView
    evidence: list[EvidenceItem]
    evidence_folded: list[EvidenceItem]
    evidence_folded_label: str
    evidence_intro: str
    evidence_more: str
    timeline_fig: FigureView | None
    timeline_rows: list[LaneRow]
    timeline_axis: str
    timeline_notes: list[str]
    steps_fig: FigureView | None
    steps_rows: list[StepRow]
    steps_phase: str
    gpu_fig: FigureView | None
    gpu_rows: list
    gpu_note: str
    gpu_more: str
    stack_classes: list
    stacks_more: str
    stacks_least: str
    coll_rows: list
    coll_more: str
    nccl: object
    nccl_channels: str
    findings: list[FindingRow]
    gaps: list[GapView]
    gaps_script: str
    sources: list[SourceRow]
    sources_summary: str
    sources_more: str
    fragment: bool
    shown: list[str] = field(default_factory=list)   # ids of the sections printed (those with something to show)
    end_rows: list = field(default_factory=list)     # the `ranks` table, ranks that ended alike grouped
    end_more: str = ""
    end_has: dict = field(default_factory=dict)      # which columns of end_rows hold anything (empty ones are left out)
    steps_axis: str = ""
    odd_rows: list = field(default_factory=list)
    odd_more: str = ""


def _str(v) -> str:
    if v is None:
        return ""
    try:
        if pd.isna(v):
            return ""
    except (TypeError, ValueError):
        pass
    return str(v)

"""View model for the HTML report: small plain dataclasses built from the Analysis; templates only loop and print."""
from __future__ import annotations

import datetime as _dt
import os
import re
from dataclasses import dataclass, field

import pandas as pd

from reports import chart_process, i18n
from reports import ranks as ranks_mod
from reports import sections
from postmortem.gaps import lines_carry_times
from postmortem.sentences import as_int, clip, sentence
from reports.evidence import WHOLE_LINE_CHARS, first_time, read_context, unique_evidence
from reports.sections import rank_ranges

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


def _generated(value) -> str:
    """The analysis date: an explicit value, SOURCE_DATE_EPOCH (reproducible builds), else now (UTC)."""
    if isinstance(value, _dt.datetime):
        value = value.astimezone(_dt.timezone.utc) if value.tzinfo else value
        return value.strftime("%Y-%m-%d %H:%M UTC")
    if value:
        return str(value)
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.strip().isdigit():
        now = _dt.datetime.fromtimestamp(int(epoch), _dt.timezone.utc)
    else:
        now = _dt.datetime.now(_dt.timezone.utc)
    return now.strftime("%Y-%m-%d %H:%M UTC")


def _human_bytes(n) -> str:
    if n is None or pd.isna(n):
        return ""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TiB"


def _str(v) -> str:
    if v is None:
        return ""
    try:
        if pd.isna(v):
            return ""
    except (TypeError, ValueError):
        pass
    return str(v)


def _ranks_table(analysis):
    """The rank end-state table (built here for an Analysis assembled by hand, which has none)."""
    ranks = analysis.ranks
    if ranks is None:
        from postmortem.rank_state import rank_state
        ranks = analysis.tables.frames["ranks"] = rank_state(analysis.tables)
    return ranks


def build_view(analysis, lang: str = "en", context: int = 2, generated_at=None, figures: bool = True,
               fragment: bool = False, max_evidence: int = MAX_EVIDENCE, max_sources: int = MAX_SOURCES,
               version: str = "", **unknown) -> ReportView:
    """Plain view of an Analysis for the report templates (`fragment=True`: the notebook subset, no figures)."""
    if unknown:
        raise TypeError(f"unknown report option(s): {', '.join(sorted(unknown))}")
    t = i18n.catalogue(lang)
    tables = analysis.tables
    meta = tables.meta
    _ranks_table(analysis)
    model = gm = charts = None
    if not fragment:
        model = ranks_mod.build(analysis)
        gm = sections.gpu_model(tables.gpu, tables.events)
        if figures:  # asked for first: a chart process draws them while the rest of the view is built here
            charts = chart_process.request(chart_process.take(), model, gm, sections.gpu_culprits(analysis, gm), lang)
    # The notebook fragment has no sources table, so its file names link nowhere.
    anchors = {} if fragment else {s: f"src-{i}" for i, s in enumerate(tables.sources["source"].astype(str))}
    paths = {s.source: s.path for s in (analysis.sources or [])}
    verdict = _verdict(analysis, t, lang)
    root = analysis.finding_list[0] if analysis.finding_list else None
    evidence, ev_more = _evidence(root, t, paths, anchors, context, max_evidence, analysis)
    findings = [_finding(f, t, anchors, lang, root) for f in analysis.finding_list[1:]]
    gaps = [GapView(*i18n.gap_words(lang, str(g.get("missing", "")), str(g.get("why", ""))), str(g.get("how", "")))
            for g in analysis.evidence_gaps]
    gaps_script = "\n".join(f"# {g.missing}\n{g.how}" for g in gaps)
    sources, src_summary, src_more = _sources(tables.sources, t, anchors, max_sources, lang, analysis.ranks)
    ws = meta.get("world_size")
    seen = list(meta.get("ranks_seen", []))
    view = ReportView(
        lang=lang, t=t, input=str(analysis.input), world="?" if ws is None else str(ws),
        world_note=t["world_inferred"] if meta.get("world_size_inferred") and ws is not None else "",
        ranks_seen=rank_ranges(seen) or t["none"], n_files=len(tables.sources), generated=_generated(generated_at),
        version=version, nav=[], verdict=verdict, evidence=evidence[:OPEN_EVIDENCE],
        evidence_folded=evidence[OPEN_EVIDENCE:],
        evidence_folded_label=i18n.fmt(t, "evidence_folded", n=len(evidence) - OPEN_EVIDENCE)
        if len(evidence) > OPEN_EVIDENCE else "",
        # the notebook card has no sources list: its file names link nowhere, and it does not say they do
        evidence_intro=i18n.fmt(t, "evidence_intro", n=context)
        + ("" if fragment else ("" if lang == "zh" else " ") + t["evidence_links"]),
        evidence_more=i18n.fmt(t, "evidence_more", n=ev_more) if ev_more else "",
        timeline_fig=None, timeline_rows=[], timeline_axis="", timeline_notes=[], steps_fig=None, steps_rows=[],
        steps_phase="", gpu_fig=None, gpu_rows=[], gpu_note="", gpu_more="", stack_classes=[], stacks_more="",
        stacks_least="", coll_rows=[], coll_more="", nccl=None, nccl_channels="", findings=findings, gaps=gaps, gaps_script=gaps_script,
        sources=sources, sources_summary=src_summary, sources_more=src_more, fragment=fragment)
    if not fragment:
        _fill_rank_sections(view, analysis, model, t)
        _fill_table_sections(view, analysis, gm, t)
        if charts is not None:
            _add_figures(view, charts.result(), t)
    view.nav = _nav(view, t)
    view.shown = [n.id for n in view.nav if not n.empty]  # a section with nothing to show is left out
    return view


def _verdict(analysis, t, lang: str = "en") -> VerdictView:
    from postmortem import advice
    from reports import translate
    from reports.next_view import next_view
    v = analysis.verdict
    if v is None:
        return VerdictView(present=False, words=t["no_input"], summary=t["no_input_text"], tone="unknown",
                           kicker=t["what_went_wrong"])
    root = analysis.finding_list[0] if analysis.finding_list else None
    level = "high" if v.confidence >= 0.8 else "moderate" if v.confidence >= 0.5 else "low"
    affected = list(root.affected_ranks) if root else []
    pct = int(round(v.confidence * 100))
    ok = v.category == "no_failure"
    out = VerdictView(
        present=True, category=v.category, words=i18n.category_words(t, v.category),
        tone="ok" if ok else "unknown" if v.category == "unknown" else "fail",
        kicker=t["kicker_ok"] if ok else t["what_went_wrong"],
        culprits=rank_ranges(v.culprit_ranks) or t["no_rank_stands_out"],
        affected=rank_ranges(affected), step="" if as_int(v.step) is None else str(as_int(v.step)),
        phase=i18n.phase_words(t, v.phase) if v.phase and v.phase != "unknown" else "",
        confidence=f"{v.confidence:.2f}", pct=pct, level=level,
        level_text=t[f"conf_{level}"], meter_label=i18n.fmt(t, "conf_meter_label", pct=pct), summary=v.summary,
        title=i18n.rule_title(lang, root.rule, advice.tidy(root.title)) if root else "", rule=v.rule or "")
    out.sentence = sentence(root, lang) if root else (v.summary if lang == "en" or v.mechanism else
                                                      t["no_failure_text"] if ok else v.summary)
    when = first_time(analysis, root) if root else None
    # a log's times carry no zone as a rule: they are shown as written (and ordered as if UTC)
    out.when = f"{when:%Y-%m-%d %H:%M:%S} {t['when_as_logged']}" if when is not None else ""
    out.facts = _facts(analysis, out, t, lang)
    out.next = next_view(v, lang)
    if root:
        why_en = v.why or advice.tidy(root.explanation)
        fix_en = v.fix or root.remediation
        if lang == "en":
            out.explanation, out.explanation_more = _lead(why_en)
            out.remediation, out.remediation_more = _lead(fix_en)
        else:
            # translated sentence by sentence from the English, so that both name the same facts
            zh_why, zh_fix = translate.verdict_zh(why_en, fix_en) if lang == "zh" else ("", "")
            if zh_why:
                out.explanation, out.explanation_lang, out.explanation_en = zh_why, t["html_lang"], why_en
            else:
                out.explanation, out.explanation_more = _lead(why_en)
            if zh_fix:
                out.remediation, out.remediation_lang, out.remediation_en = zh_fix, t["html_lang"], fix_en
            else:
                out.remediation, out.remediation_more = _lead(fix_en)
    return out


def _facts(analysis, d: VerdictView, t, lang: str) -> list[Fact]:
    """The verdict card's facts that have a value: where the verdict names none, the rank end-state table may (the
    culprits' last step and activity); a fact with nothing to say is left out, never shown as a dash."""
    v = analysis.verdict
    ranks = analysis.ranks
    facts: list[Fact] = []
    ok = v.category == "no_failure"
    mine = ranks[ranks["rank"].isin(list(v.culprit_ranks))] if ranks is not None and len(ranks) and \
        v.culprit_ranks else None
    if not ok:
        facts.append(Fact(t["culprit_ranks"], d.culprits, "pm-culprits"))
    step, step_label = d.step, t["step"]
    if not step and ranks is not None and len(ranks) and ranks["last_step"].notna().any():
        pool = mine if mine is not None and mine["last_step"].notna().any() else ranks
        last = pool["last_step"].dropna()
        if last.nunique() == 1 or ok:
            step = str(int(last.max()))
            step_label = t["last_step_culprit"] if pool is mine else t["last_step_reached"]
    if step:
        facts.append(Fact(step_label, step))
    phase, phase_label = d.phase, t["phase"]
    if not phase and mine is not None and len(mine):
        acts = {a for a in mine["last_activity"].dropna().astype(str) if a != "unknown"}
        if len(acts) == 1:
            phase, phase_label = i18n.value_words(lang, "act_", acts.pop()), t["doing_at_end"]
    if phase:
        facts.append(Fact(phase_label, phase))
    if d.when:
        facts.append(Fact(t["time_label"], d.when))
    if d.affected and not ok:
        facts.append(Fact(t["affected_ranks"], d.affected))
    return facts


def _cited(text: str) -> str:
    text = str(text)
    return text if len(text) <= MAX_CITED_CHARS else text[:MAX_CITED_CHARS] + " …"


def _line_no(v) -> int | None:
    """A cited line number as a plain int (rules may hand over NumPy/pandas integers or None)."""
    try:
        return None if v is None or pd.isna(v) else int(v)
    except (TypeError, ValueError):
        return None


def _evidence(root, t, paths, anchors, radius, limit, analysis=None) -> tuple[list[EvidenceItem], int]:
    from reports.decisive import decisive_lines
    lines = _verdict_lines(root, analysis)
    if not lines:
        return [], 0
    cited = unique_evidence(lines, paths)
    shown = cited[:limit]
    wanted: dict[str, set[int]] = {}
    decisive: dict[int, list] = {}
    for i, e in enumerate(shown):
        path, line = paths.get(e.source), _line_no(e.line)
        got = decisive_lines(analysis, str(e.source), line, path) if analysis is not None and radius > 0 else None
        if got:
            decisive[i] = got
        elif path and line is not None:
            wanted.setdefault(path, set()).add(line)
    ctx = read_context(wanted, radius, cut=WHOLE_LINE_CHARS) if radius > 0 else {}
    items = []
    for i, e in enumerate(shown):
        line = _line_no(e.line)
        rank = _line_no(e.rank)
        item = EvidenceItem(source=str(e.source), line=_str(line), rank=_str(rank), text=clip(e.text, MAX_CITED_CHARS),
                            anchor=anchors.get(str(e.source), ""),
                            rank_label=i18n.fmt(t, "rank_badge", rank=rank) if rank is not None else "")
        path = paths.get(e.source)
        got = ctx.get((path, line)) if path and line is not None else None
        if i in decisive:
            item.context = [ContextLine(c.no, c.text, c.hit, c.gap, _block_label(c.label, t)) for c in decisive[i]]
            if all(c.no is None for c in decisive[i]):
                item.line = ""   # decoded from a JSON field: no line numbers of the file
        elif isinstance(got, list):
            item.context = [ContextLine(no, text, no == line) for no, text in got]
            hit = next((text for no, text in got if no == line), "")
            if item.text.strip() and item.text.strip() in hit:
                item.text = ""   # the highlighted line says it all; a rule's own wording of it stays in the header
        elif radius > 0 and line is not None:   # a citation with no line (a whole-file fact) needs no excuse
            why = "why_too_far" if got == "too_far" else "why_not_readable"
            item.note = i18n.fmt(t, "evidence_no_context", why=t[why])
        items.append(item)
    merged = _merge_overlapping(items, shown, t)
    return _same_lines_once(merged, t), len(cited) - len(shown)


def _verdict_lines(root, analysis) -> list:
    """The lines the verdict rests on: its own (root and mechanism findings), else the root finding's."""
    v = getattr(analysis, "verdict", None) if analysis is not None else None
    if v is not None and getattr(v, "evidence", None):
        return list(v.evidence)
    return list(root.evidence) if root is not None else []


def _block_label(label: str, t) -> str:
    if not label:
        return ""
    if label == "holds_gil":
        return t["ev_holds_gil"]
    if label.startswith("same_library:"):
        return i18n.fmt(t, "ev_same_library", lib=label.split(":", 1)[1])
    return label


_RANK_TAG = re.compile(r"\[(?:rank|default|Rank )\d+\]:?|\brank ?\d+\b|\bpid:? ?\d+|\bThread \d+|\bProcess \d+|"
                       r"\b0x[0-9a-fA-F]{6,}\b")


def _same_lines_once(items: list[EvidenceItem], t) -> list[EvidenceItem]:
    """Blocks that show the same lines on different ranks (ranks 1-3 all in `dist.barrier()` at train.py:65) become
    one block naming every rank and linking the other copies; the block that differs stays on its own."""
    out: list[EvidenceItem] = []
    keys: dict[tuple, int] = {}
    ranks: dict[int, set] = {}
    for item in items:
        key = (_RANK_TAG.sub("#", item.text),
               tuple((_RANK_TAG.sub("#", c.text), c.hit, c.gap) for c in item.context)) if item.context else None
        j = keys.get(key) if key is not None else None
        if j is None:
            if key is not None:
                keys[key] = len(out)
            ranks[len(out)] = {int(item.rank)} if item.rank.isdigit() else set()
            out.append(item)
            continue
        first = out[j]
        first.also.append(AlsoAt(f"{item.source}:{item.line}" if item.line else item.source, item.anchor, item.rank))
        if item.rank.isdigit():
            ranks[j].add(int(item.rank))
        if len(ranks[j]) > 1:
            first.rank_label = i18n.fmt(t, "ranks_badge", ranks=rank_ranges(ranks[j]))
        first.also_label = i18n.fmt(t, "ev_same_lines", n=len(first.also))
    return out


def _merge_overlapping(items: list[EvidenceItem], cited, t) -> list[EvidenceItem]:
    """Cited lines of one file whose context windows touch become one block with several highlighted lines."""
    out: list[EvidenceItem] = []
    ranks: list[set] = []
    by_source: dict[str, int] = {}
    for item, e in zip(items, cited):
        j = by_source.get(item.source)
        if item.context and j is not None and out[j].context and \
                item.context[0].no <= out[j].context[-1].no + 1 and out[j].context[0].no <= item.context[-1].no + 1:
            block = out[j]
            lines = {c.no: c for c in block.context}
            for c in item.context:
                if c.no not in lines or c.hit:
                    lines[c.no] = c
            block.context = [lines[n] for n in sorted(lines)]
            block.line = ", ".join(str(c.no) for c in block.context if c.hit)
            if _line_no(e.rank) is not None:
                ranks[j].add(_line_no(e.rank))
                block.rank_label = i18n.fmt(t, "rank_badge", rank=rank_ranges(ranks[j]))
            continue
        by_source[item.source] = len(out)
        out.append(item)
        ranks.append({_line_no(e.rank)} if _line_no(e.rank) is not None else set())
    return out


def _finding(f, t, anchors, lang: str = "en", root=None) -> FindingRow:
    from postmortem import advice
    ev = [EvidenceItem(source=str(e.source), line=_str(e.line), rank=_str(e.rank), text=clip(e.text, MAX_CITED_CHARS),
                       anchor=anchors.get(str(e.source), "")) for e in f.evidence[:MAX_OTHER_EVIDENCE]]
    ranks = rank_ranges(f.culprit_ranks)
    same = root is not None and f.category == root.category
    row = FindingRow(confidence=f"{f.confidence:.2f}", category=f.category,
                     words=i18n.category_words(t, f.category), title=advice.tidy(f.title), rule=f.rule,
                     severity=f.severity, ranks=ranks or t["none"],
                     relation=(t["f_same_failure"] if same else t["f_consequence"]) if f.cascade_of
                     else t["f_independent"],
                     cascade=bool(f.cascade_of), explanation=advice.tidy(f.explanation), remediation=f.remediation,
                     evidence=ev)
    if lang != "en":
        row.title, row.title_lang = sentence(f, lang), t["html_lang"]
        from reports.translate import to_zh
        fix, done, _ = to_zh(f.remediation) if lang == "zh" else ("", 0, 0)
        if done:
            row.remediation, row.fix_lang = fix, t["html_lang"]
    return row


def _sources(src: pd.DataFrame, t, anchors, limit, lang: str = "en", ranks=None) -> tuple[list[SourceRow], str, str]:
    rows = []
    bad = src["problem"].notna()
    keep = bad | ((~bad).cumsum() <= limit)
    # a file's host where its path does not say: the host its rank ran on (the rank table's, from NCCL or the lines)
    host_of = {}
    if ranks is not None and len(ranks) and "host" in ranks:
        host_of = {int(r): str(h) for r, h in zip(ranks["rank"], ranks["host"]) if isinstance(h, str) and h}
    for rec in src[keep].to_dict("records"):
        host = _str(rec["host"])
        if not host and _line_no(rec["rank"]) is not None:
            host = host_of.get(_line_no(rec["rank"]), "")
        rows.append(SourceRow(anchor=anchors.get(str(rec["source"]), ""), source=str(rec["source"]),
                              kind=i18n.value_words(lang, "kind_", _str(rec["kind"])), rank=_str(rec["rank"]),
                              host=host, bytes=_human_bytes(rec["bytes"]), lines=_str(rec["lines"]),
                              problem=_str(rec["problem"])))
    total = src["bytes"].dropna().sum() if len(src) else 0
    summary = i18n.fmt(t, "sources_summary", n=len(src), bad=int(bad.sum()), bytes=_human_bytes(total))
    hidden = int((~keep).sum())
    return rows, summary, i18n.fmt(t, "sources_more", n=hidden) if hidden else ""


MAX_END_ROWS = 40
GROUP_ABOVE = 16          # up to this many ranks every rank has its own row; above it ranks that ended alike share one


def _stack_rows(stacks) -> dict[str, dict]:
    """`source:line` -> stacks row, to name the user's frame of a rank's end stack."""
    if stacks is None or not len(stacks):
        return {}
    at = [f"{s}:{int(ln)}" if ln == ln and ln is not None and ln is not pd.NA else str(s)
          for s, ln in zip(stacks["source"], stacks["line"])]
    return dict(zip(at, stacks.to_dict("records")))


def _doing(rec: dict, stacks: dict, t, lang: str) -> str:
    """What a rank was doing at the end, in words: its end stack's class and the frame in the user's code (or the
    deciding frame), else its last activity."""
    from postmortem.stacks import blocking_frame, last_user_frame

    def cell(v) -> str:
        return "" if v is None or (not isinstance(v, (str, list)) and v != v) else str(v)
    cls = cell(rec.get("stack_class"))
    if cls:
        row = stacks.get(cell(rec.get("stack_at")))
        frames = row.get("frames") if row else None
        where = cell(rec.get("stack_where"))
        if isinstance(frames, list) and frames:
            f = last_user_frame(frames) or blocking_frame(frames)
            if f:
                file = str(f.get("file") or "").rsplit("/", 1)[-1]
                where = f"{f.get('func')} ({file}:{f.get('line')})" if f.get("line") is not None else \
                    f"{f.get('func')} ({file})" if file else str(f.get("func"))
        words = t.get(f"stk_{cls}", cls.replace("_", " ")) if cls != "unknown" else ""
        return f"{words}: {where}" if words and where else words or where
    act = cell(rec.get("last_activity"))
    return i18n.value_words(lang, "act_", act) if act and act != "unknown" else ""


def end_rows(ranks, culprits, affected=(), t=None, lang: str = "en", stacks=None,
             stopped: dict | None = None) -> tuple[list[EndRow], int]:
    """The `ranks` table as report rows: one per rank for small jobs, else ranks that ended alike share a row
    (culprits first, then the ranks that waited); at most MAX_END_ROWS, and how many more groups there were."""
    if ranks is None or ranks.empty:
        return [], 0
    t = t or i18n.catalogue(lang)
    stacks_at = _stack_rows(stacks)
    stopped = stopped or {}
    culprits, affected = set(culprits), set(affected)

    def cell(v) -> str:
        return "" if v is None or (not isinstance(v, (str, list)) and v != v) else str(v)

    alone = len(ranks) <= GROUP_ABOVE
    groups: dict[tuple, list[int]] = {}
    shown_err: dict[tuple, str] = {}
    for rec in ranks.to_dict("records"):
        r = int(rec["rank"])
        role = "culprit" if r in culprits else "affected" if r in affected else "other"
        doing = _doing(rec, stacks_at, t, lang)
        coll = ""
        if cell(rec.get("last_enqueued")) or cell(rec.get("last_completed")):
            coll = f"{cell(rec.get('last_enqueued')) or '?'} / {cell(rec.get('last_completed')) or '?'}"
        elif cell(rec.get("last_started")):
            coll = f"#{cell(rec.get('last_started'))}"
        err = clip(cell(rec.get("first_error")), 140)
        ended = t.get(f"ended_{cell(rec.get('end'))}", "") if cell(rec.get("end")) else ""
        # ranks name themselves in their errors ("[Rank 7] Watchdog caught ..."): alike once that is masked
        key = (r if alone else None, role, cell(rec.get("last_step")), doing, coll, _RANK_TAG.sub("#", err),
               cell(rec.get("exit")), ended)
        groups.setdefault(key, []).append(r)
        shown_err.setdefault(key, err)
    if len(groups) > MAX_END_ROWS:
        groups, shown_err = _alike(groups, shown_err)
    order = {"culprit": 0, "affected": 1, "other": 2}
    rows = []
    for key, members in sorted(groups.items(), key=lambda kv: (order[kv[0][1]], kv[1][0])):
        _, role, step, doing, coll, _, ex, ended = key
        err = shown_err[key]
        where = [stopped[m] for m in members if stopped.get(m)]
        stop = where[0] if where and len(set(where)) == 1 else f"{min(where)} … {max(where)}" if where else ""
        if not where and role == "culprit" and not (step or doing or err or ex):
            stop = t["fig_silent"]
        label = rank_ranges(members) + (f" ({len(members)})" if len(members) > 1 else "")
        rows.append(EndRow(label, len(members), role == "culprit", step, doing, coll, err, ex, role=role,
                           role_words={"culprit": t["role_culprit"], "affected": t["role_affected"]}.get(role, ""),
                           stopped=stop, ended=ended))
    return rows[:MAX_END_ROWS], max(0, len(rows) - MAX_END_ROWS)


_NUMBER = re.compile(r"\d+")


def _alike(groups: dict, shown_err: dict) -> tuple[dict, dict]:
    """Groups of ranks that ended alike, ignoring the numbers that only say which one it was (its pid, its time, a
    count in its message) and where each stopped counting steps (shown as a range): a job of thousands of ranks,
    whose end rows would otherwise be one per rank. Each row shows its lowest rank's words as the example."""
    merged: dict = {}
    for key, members in groups.items():
        _, role, step, doing, coll, err, ex, ended = key
        # (the error is shown cut at a length: masked, its start is what ranks that ended alike share)
        alike = (role, _NUMBER.sub("N", doing), coll, _NUMBER.sub("N", err)[:60], _NUMBER.sub("N", ex), ended)
        got = merged.setdefault(alike, [[], [], None])
        got[0].extend(members)
        if step:
            got[1].append(int(step))
        if got[2] is None or members[0] < got[2][0]:
            got[2] = (members[0], key)
    out: dict = {}
    errs: dict = {}
    for members, steps, (_, key) in merged.values():
        _, role, _, doing, coll, err, ex, ended = key
        lo, hi = (min(steps), max(steps)) if steps else (None, None)
        step = "" if lo is None else str(lo) if lo == hi else f"{lo}–{hi}"
        new = (None, role, step, doing, coll, err, ex, ended)
        out[new] = sorted(members)
        errs[new] = shown_err[key]
    return out, errs


MAX_ODD_ROWS = 8


def odd_rows(odd, t, culprits: set | None = None) -> tuple[list[OddRow], int]:
    """The odd-lines table as report rows: the suspects first, then the rest that are not cascades; at most
    MAX_ODD_ROWS, and how many more there were. With a verdict that names culprits, only rows whose ranks are among
    them are marked as pointing at the culprit (an odd rank the verdict clears is shown, not marked)."""
    if odd is None or odd.empty:
        return [], 0
    keep = odd[odd["suspect"] | ~odd["cascade"]]
    rows = []
    for rec in keep.to_dict("records"):
        kind = "new" if rec["kind"] == "new" else rec["kind"]
        at = ", ".join(str(x) for x in (rec["at"] or [])[:2])
        ranks = [int(r) for r in rec["ranks"]]
        points = bool(rec["suspect"]) and (not culprits or bool(set(ranks) & culprits))
        rows.append(OddRow(rank_ranges(ranks), t[f"odd_{kind}"], clip(str(rec["example"]), 200),
                           at, points, rec["new"] is True))
    rows.sort(key=lambda r: not r.suspect)  # (stable) the rows that point at the verdict's culprits first
    return rows[:MAX_ODD_ROWS], max(0, len(rows) - MAX_ODD_ROWS)


def _fill_rank_sections(view: ReportView, analysis, model, t) -> None:
    root = analysis.finding_list[0] if analysis.finding_list and analysis.verdict is not None \
        and analysis.verdict.category != "no_failure" else None
    culprits = set(root.culprit_ranks) if root else set()
    affected = set(root.affected_ranks) if root else set()
    stopped = {s.rank: s.last_where for s in model.summaries if s.rank is not None}
    view.end_rows, more = end_rows(getattr(analysis, "ranks", None), culprits, affected, t, view.lang,
                                   analysis.tables.stacks, stopped)
    view.end_more = i18n.fmt(t, "end_more", n=more) if more else ""
    view.end_has = {"step": any(r.last_step for r in view.end_rows), "doing": any(r.doing for r in view.end_rows),
                    "coll": any(r.collectives for r in view.end_rows),
                    "error": any(r.first_error for r in view.end_rows), "exit": any(r.exit for r in view.end_rows),
                    "stopped": any(r.stopped for r in view.end_rows), "ended": any(r.ended for r in view.end_rows)}
    view.odd_rows, more = odd_rows(analysis.tables.frames.get("odd_lines"), t, culprits)
    view.odd_more = i18n.fmt(t, "odd_more", n=more) if more else ""
    if model.lanes:
        view.timeline_rows = [None] * len(model.lanes)   # the chart has lanes: the section is shown
        view.timeline_axis = _axis_words(model.axis, analysis, t)
    if model.merged_groups:
        view.timeline_notes.append(i18n.fmt(t, "lanes_more", n=model.merged_groups))
    if model.silent and model.lanes:
        view.timeline_notes.append(i18n.fmt(t, "silent_ranks", ranks=rank_ranges(model.silent)))
    if model.untimed_left_out:
        view.timeline_notes.append(i18n.fmt(t, "timeline_untimed_out", n=model.untimed_left_out))
    view.steps_rows = _step_rows(model, t)
    if model.steps_phase:
        view.steps_phase = i18n.fmt(t, "steps_phase_note", phase=i18n.phase_words(t, model.steps_phase))
    view.steps_axis = _steps_axis_words(model, t)


def _axis_words(axis, analysis, t) -> str:
    if axis.mode == "time":
        return t["timeline_axis_time"]
    if lines_carry_times(analysis.tables):
        return t["timeline_axis_unread"]
    return t["timeline_axis_order"]


def _steps_axis_words(model, t) -> str:
    if not model.step_last:
        return ""
    return t["steps_axis_time"] if model.step_axis.mode == "time" else t["steps_axis_order"]


def _add_figures(view: ReportView, uris: dict, t) -> None:
    """The charts' data URIs (reports.figures.chart_uris) into the view; a chart without data stays None."""
    for name, attr, alt in (("timeline", "timeline_fig", "fig_timeline_alt"), ("steps", "steps_fig", "fig_steps_alt"),
                            ("gpu_memory", "gpu_fig", "fig_gpu_alt")):
        if uris.get(name) is not None:
            setattr(view, attr, FigureView(name, uris[name], t[alt], uris.get(f"{name}_narrow") or ""))


def _step_rows(model, t) -> list[StepRow]:
    if not model.step_last:
        return []
    front = max(r["last_step"] for r in model.step_last)
    groups: dict[int, list[dict]] = {}
    for r in model.step_last:
        groups.setdefault(r["last_step"], []).append(r)
    rows = []
    for step in sorted(groups):
        members = groups[step]
        known = [m["rank"] for m in members if m["rank"] is not None]
        label = rank_ranges(known)
        if len(known) < len(members):
            label = ", ".join(x for x in (label, t["unattributed_label"]) if x)
        if len(members) > 1:
            label += f" ({len(members)})"
        first = min(members, key=lambda m: (m["x"] != m["x"], m["x"]))
        rows.append(StepRow(ranks=label, count=len(members), last_step=step, behind=front - step,
                            behind_text=str(front - step) if front - step else t["steps_front"], when=first["where"]))
    return rows[:MAX_STEP_ROWS]


def _fill_table_sections(view: ReportView, analysis, gm, t) -> None:
    tables = analysis.tables
    if gm is not None:
        for g in gm.rows:
            g.flags = " ".join(x for x in (t["gpu_lost"] if g.lost else "",
                                           i18n.fmt(t, "gpu_ecc", n=g.ecc) if g.ecc else "") if x)
        view.gpu_rows = gm.rows
        view.gpu_more = i18n.fmt(t, "gpu_more", n=gm.hidden) if gm.hidden else ""
        if gm.oom_x is not None:
            view.gpu_note = i18n.fmt(t, "gpu_oom_marked", when=gm.oom_when)
        elif gm.oom_logged:
            view.gpu_note = t["gpu_oom_unplaced"]
    summary = sections.stack_classes(tables.stacks, t["stacks_main_thread"])
    for c in summary.classes:
        c.kind = t.get(f"stk_{c.kind}", c.kind) if c.kind else ""
        c.more_label = i18n.fmt(t, "stacks_more_frames", n=len(c.more_frames)) if c.more_frames else ""
    view.stack_classes = summary.classes
    view.stacks_more = i18n.fmt(t, "stacks_more", n=summary.hidden) if summary.hidden else ""
    if summary.least:
        view.stacks_least = i18n.fmt(t, "stacks_least", ranks=summary.least) + (
            f" ({summary.least_why})" if summary.least_why else "")
    rows, hidden = sections.collective_rows(tables.collectives, t["coll_default_pg"])
    for r in rows:
        r.state = i18n.value_words(view.lang, "state_", r.state) if r.state else ""
    view.coll_rows = rows
    view.coll_more = i18n.fmt(t, "coll_more", n=hidden) if hidden else ""
    view.nccl = sections.nccl_view(tables.nccl)
    if view.nccl is not None:
        view.nccl_channels = i18n.fmt(t, "nccl_channels", rings=view.nccl.rings, trees=view.nccl.trees) \
            if view.nccl.rings or view.nccl.trees else t["none"]


def _nav(view: ReportView, t) -> list[NavItem]:
    empty = {
        "verdict": False, "evidence": not view.evidence, "timeline": not (view.timeline_rows or view.end_rows),
        "odd": not view.odd_rows,
        "steps": not view.steps_rows, "gpu": not view.gpu_rows, "stacks": not view.stack_classes,
        "collectives": not view.coll_rows, "nccl": view.nccl is None, "findings": not view.findings,
        "gaps": not view.gaps, "sources": not view.sources,
    }
    ids = FRAGMENT_SECTIONS if view.fragment else SECTION_IDS
    return [NavItem(i, t.get(f"nav_{i}", t[f"sec_{i}"]), empty[i]) for i in ids]

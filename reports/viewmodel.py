"""View model for the HTML report: small plain dataclasses built from the Analysis; templates only loop and print."""
from __future__ import annotations

import re

import datetime as _dt
import os
from dataclasses import dataclass, field

import pandas as pd

from reports import chart_process, i18n
from reports import ranks as ranks_mod
from reports import sections
from postmortem.gaps import lines_carry_times
from postmortem.sentences import as_int, sentence
from reports.evidence import WHOLE_LINE_CHARS, first_time, read_context, unique_evidence
from reports.sections import rank_ranges

SECTION_IDS = ("verdict", "evidence", "timeline", "steps", "gpu", "stacks", "collectives", "nccl", "findings",
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
class VerdictView:
    """The answer, in the words of the chosen language."""
    present: bool
    category: str = ""
    words: str = ""
    where: str = ""
    tone: str = "fail"
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
    remediation: str = ""
    remediation_more: str = ""
    remediation_en: str = ""     # the rule's English fix, shown beside a translated one
    rule: str = ""
    sentence: str = ""           # the verdict as one sentence, in the report's language
    when: str = ""               # the first cited line's time, when it has one


def _lead(text: str, limit: int = MAX_LEAD_CHARS) -> tuple[str, str]:
    """(lead, full): a long text cut at a word boundary for the first screen, and the whole text ('' when short)."""
    text = text or ""
    if len(text) <= limit:
        return text, ""
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit].rstrip(" ,;:(") + " …", text


@dataclass
class ContextLine:
    no: int
    text: str
    hit: bool


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


@dataclass
class FigureView:
    name: str
    uri: str
    alt: str


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
    """Ranks that ended the same way (from the `ranks` table): what they were doing, counters, error, exit."""
    ranks: str
    count: int
    culprit: bool
    last_step: str
    doing: str
    collectives: str
    first_error: str
    exit: str


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


def build_view(analysis, lang: str = "en", context: int = 2, generated_at=None, figures: bool = True,
               fragment: bool = False, max_evidence: int = MAX_EVIDENCE, max_sources: int = MAX_SOURCES,
               version: str = "", **unknown) -> ReportView:
    """Plain view of an Analysis for the report templates (`fragment=True`: the notebook subset, no figures)."""
    if unknown:
        raise TypeError(f"unknown report option(s): {', '.join(sorted(unknown))}")
    t = i18n.catalogue(lang)
    tables = analysis.tables
    meta = tables.meta
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
    evidence, ev_more = _evidence(root, t, paths, anchors, context, max_evidence)
    findings = [_finding(f, t, anchors, lang) for f in analysis.finding_list[1:]]
    gaps = [GapView(*i18n.gap_words(lang, str(g.get("missing", "")), str(g.get("why", ""))), str(g.get("how", "")))
            for g in analysis.evidence_gaps]
    gaps_script = "\n".join(f"# {g.missing}\n{g.how}" for g in gaps)
    sources, src_summary, src_more = _sources(tables.sources, t, anchors, max_sources)
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
        evidence_intro=i18n.fmt(t, "evidence_intro", n=context),
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
    v = analysis.verdict
    if v is None:
        return VerdictView(present=False, words=t["no_input"], summary=t["no_input_text"], tone="unknown")
    root = analysis.finding_list[0] if analysis.finding_list else None
    level = "high" if v.confidence >= 0.8 else "moderate" if v.confidence >= 0.5 else "low"
    where = []
    if v.culprit_ranks:
        where.append(i18n.fmt(t, "headline_on", ranks=rank_ranges(v.culprit_ranks)))
    if v.step is not None:
        where.append(i18n.fmt(t, "headline_at_step", step=v.step))
    if v.phase and v.phase != "unknown":
        where.append(i18n.fmt(t, "headline_during", phase=i18n.phase_words(t, v.phase)))
    affected = list(root.affected_ranks) if root else []
    pct = int(round(v.confidence * 100))
    out = VerdictView(
        present=True, category=v.category, words=i18n.category_words(t, v.category), where=t["list_sep"].join(where),
        tone="ok" if v.category == "no_failure" else "unknown" if v.category == "unknown" else "fail",
        culprits=rank_ranges(v.culprit_ranks) or t["no_rank_stands_out"],
        affected=rank_ranges(affected) or t["none"], step=t["none"] if as_int(v.step) is None else str(as_int(v.step)),
        phase=i18n.phase_words(t, v.phase) or t["none"], confidence=f"{v.confidence:.2f}", pct=pct, level=level,
        level_text=t[f"conf_{level}"], meter_label=i18n.fmt(t, "conf_meter_label", pct=pct), summary=v.summary,
        title=root.title if root else "", rule=v.rule or "")
    out.sentence = sentence(root, lang) if root else v.summary
    when = first_time(analysis, root) if root else None
    out.when = f"{when:%Y-%m-%d %H:%M:%S} UTC" if when is not None else ""
    if root:
        out.explanation, out.explanation_more = _lead(root.explanation)
        translated = i18n.advice(lang, root.rule, root.remediation)
        if translated:
            out.remediation, out.remediation_en = translated, root.remediation
        else:
            out.remediation, out.remediation_more = _lead(root.remediation)
    return out


def _cited(text: str) -> str:
    text = str(text)
    return text if len(text) <= MAX_CITED_CHARS else text[:MAX_CITED_CHARS] + " …"


def _line_no(v) -> int | None:
    """A cited line number as a plain int (rules may hand over NumPy/pandas integers or None)."""
    try:
        return None if v is None or pd.isna(v) else int(v)
    except (TypeError, ValueError):
        return None


def _evidence(root, t, paths, anchors, radius, limit) -> tuple[list[EvidenceItem], int]:
    if root is None or not root.evidence:
        return [], 0
    cited = unique_evidence(root.evidence, paths)
    shown = cited[:limit]
    wanted: dict[str, set[int]] = {}
    for e in shown:
        path, line = paths.get(e.source), _line_no(e.line)
        if path and line is not None:
            wanted.setdefault(path, set()).add(line)
    ctx = read_context(wanted, radius, cut=WHOLE_LINE_CHARS) if radius > 0 else {}
    items = []
    for e in shown:
        line = _line_no(e.line)
        rank = _line_no(e.rank)
        item = EvidenceItem(source=str(e.source), line=_str(line), rank=_str(rank), text=_cited(e.text),
                            anchor=anchors.get(str(e.source), ""),
                            rank_label=i18n.fmt(t, "rank_badge", rank=rank) if rank is not None else "")
        path = paths.get(e.source)
        got = ctx.get((path, line)) if path and line is not None else None
        if isinstance(got, list):
            item.context = [ContextLine(no, text, no == line) for no, text in got]
            hit = next((text for no, text in got if no == line), "")
            if item.text.strip() and item.text.strip() in hit:
                item.text = ""   # the highlighted line says it all; a rule's own wording of it stays in the header
        elif radius > 0 and line is not None:   # a citation with no line (a whole-file fact) needs no excuse
            why = "why_too_far" if got == "too_far" else "why_not_readable"
            item.note = i18n.fmt(t, "evidence_no_context", why=t[why])
        items.append(item)
    return _merge_overlapping(items, shown, t), len(cited) - len(shown)


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


def _finding(f, t, anchors, lang: str = "en") -> FindingRow:
    ev = [EvidenceItem(source=str(e.source), line=_str(e.line), rank=_str(e.rank), text=_cited(e.text),
                       anchor=anchors.get(str(e.source), "")) for e in f.evidence[:MAX_OTHER_EVIDENCE]]
    ranks = rank_ranges(f.culprit_ranks)
    row = FindingRow(confidence=f"{f.confidence:.2f}", category=f.category,
                     words=i18n.category_words(t, f.category), title=f.title, rule=f.rule, severity=f.severity,
                     ranks=ranks or t["none"],
                     relation=i18n.fmt(t, "f_cascade_of", rule=f.cascade_of) if f.cascade_of else t["f_independent"],
                     cascade=bool(f.cascade_of), explanation=f.explanation, remediation=f.remediation, evidence=ev)
    if lang != "en":
        row.title, row.title_lang = sentence(f, lang), t["html_lang"]
        fix = i18n.advice(lang, f.rule, f.remediation)
        if fix:
            row.remediation, row.fix_lang = fix, t["html_lang"]
    return row


def _sources(src: pd.DataFrame, t, anchors, limit) -> tuple[list[SourceRow], str, str]:
    rows = []
    bad = src["problem"].notna()
    keep = bad | ((~bad).cumsum() <= limit)
    for rec in src[keep].to_dict("records"):
        rows.append(SourceRow(anchor=anchors.get(str(rec["source"]), ""), source=str(rec["source"]),
                              kind=_str(rec["kind"]), rank=_str(rec["rank"]), host=_str(rec["host"]),
                              bytes=_human_bytes(rec["bytes"]), lines=_str(rec["lines"]), problem=_str(rec["problem"])))
    total = src["bytes"].dropna().sum() if len(src) else 0
    summary = i18n.fmt(t, "sources_summary", n=len(src), bad=int(bad.sum()), bytes=_human_bytes(total))
    hidden = int((~keep).sum())
    return rows, summary, i18n.fmt(t, "sources_more", n=hidden) if hidden else ""


MAX_END_ROWS = 40


def end_rows(ranks, culprits) -> tuple[list[EndRow], int]:
    """The `ranks` table as report rows: ranks that ended alike share a row (culprits first); at most MAX_END_ROWS,
    and how many more groups there were."""
    if ranks is None or ranks.empty:
        return [], 0

    def cell(v) -> str:
        return "" if v is None or (not isinstance(v, (str, list)) and v != v) else str(v)

    groups: dict[tuple, list[int]] = {}
    for rec in ranks.to_dict("records"):
        doing = cell(rec.get("stack_where")) and f"{cell(rec.get('stack_class')).replace('_', ' ')}: {cell(rec.get('stack_where'))}"
        doing = doing or cell(rec.get("last_activity")).replace("_", " ")
        coll = ""
        if cell(rec.get("last_enqueued")) or cell(rec.get("last_completed")):
            coll = f"{cell(rec.get('last_enqueued')) or '?'} / {cell(rec.get('last_completed')) or '?'}"
        elif cell(rec.get("last_started")):
            coll = f"#{cell(rec.get('last_started'))}"
        err = cell(rec.get("first_error"))
        err = err.split(":", 1)[0] + (": " + err.split(":", 1)[1][:90].strip() if ":" in err else "")
        key = (int(rec["rank"]) in culprits, cell(rec.get("last_step")), doing, coll, err, cell(rec.get("exit")))
        groups.setdefault(key, []).append(int(rec["rank"]))
    if len(groups) > MAX_END_ROWS:
        groups = _alike(groups)
    rows = [EndRow(rank_ranges(members), len(members), key[0], key[1], key[2], key[3], key[4], key[5])
            for key, members in sorted(groups.items(), key=lambda kv: (not kv[0][0], kv[1][0]))]
    return rows[:MAX_END_ROWS], max(0, len(rows) - MAX_END_ROWS)


_NUMBER = re.compile(r"\d+")


def _alike(groups: dict) -> dict:
    """Groups of ranks that ended alike, ignoring the numbers that only say which rank it was (`[Rank 41]`, its
    pid, its time) and where each stopped counting steps (shown as a range): a job of thousands of ranks, whose end
    rows would otherwise be one per rank. Each row shows its lowest rank's error as the example."""
    merged: dict = {}
    for key, members in groups.items():
        culprit, step, doing, coll, err, exit_ = key
        # (the error is shown cut at a length: masked, its start is what ranks that ended alike share)
        alike = (culprit, _NUMBER.sub("N", doing), coll, _NUMBER.sub("N", err)[:60], _NUMBER.sub("N", exit_))
        got = merged.setdefault(alike, [[], [], None])
        got[0].extend(members)
        if step:
            got[1].append(int(step))
        if got[2] is None or min(members) < got[2][0]:
            got[2] = (min(members), doing, err, exit_)
    out: dict = {}
    for (culprit, _, coll, _, _), (members, steps, (_, doing, err, exit_)) in merged.items():
        lo, hi = (min(steps), max(steps)) if steps else (None, None)
        step = "" if lo is None else str(lo) if lo == hi else f"{lo}–{hi}"
        out[(culprit, step, doing, coll, err, exit_)] = sorted(members)
    return out


def _fill_rank_sections(view: ReportView, analysis, model, t) -> None:
    culprits = set(analysis.verdict.culprit_ranks) if analysis.verdict else set()
    view.end_rows, more = end_rows(getattr(analysis, "ranks", None), culprits)
    view.end_more = i18n.fmt(t, "end_more", n=more) if more else ""
    role_words = {"culprit": t["role_culprit"], "affected": t["role_affected"], "other": t["role_other"],
                  "unattributed": t["role_unattributed"]}
    for lane in model.lanes:
        view.timeline_rows.append(LaneRow(
            ranks=t["unattributed_label"] if lane.unattributed else rank_ranges(lane.ranks),
            count=len(lane.ranks), role=lane.role, role_words=role_words[lane.role], first=lane.first_where,
            last=lane.last_where, errors=lane.n_errors, how=t["fig_silent"] if lane.silent else _cited(lane.how)[:240]))
    if model.lanes:
        view.timeline_axis = t["timeline_axis_time"] if model.axis.mode == "time" else \
            t["timeline_axis_unread"] if lines_carry_times(analysis.tables) else t["timeline_axis_line"]
    if model.merged_groups:
        view.timeline_notes.append(i18n.fmt(t, "lanes_more", n=model.merged_groups))
    if model.silent and model.lanes:
        view.timeline_notes.append(i18n.fmt(t, "silent_ranks", ranks=rank_ranges(model.silent)))
    view.steps_rows = _step_rows(model, t)
    if model.steps_phase:
        view.steps_phase = i18n.fmt(t, "steps_phase_note", phase=i18n.phase_words(t, model.steps_phase))


def _add_figures(view: ReportView, uris: dict, t) -> None:
    """The charts' data URIs (reports.figures.chart_uris) into the view; a chart without data stays None."""
    for name, attr, alt in (("timeline", "timeline_fig", "fig_timeline_alt"), ("steps", "steps_fig", "fig_steps_alt"),
                            ("gpu_memory", "gpu_fig", "fig_gpu_alt")):
        if uris.get(name) is not None:
            setattr(view, attr, FigureView(name, uris[name], t[alt]))


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
        first = min(members, key=lambda m: m["x"])
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
    view.coll_rows = rows
    view.coll_more = i18n.fmt(t, "coll_more", n=hidden) if hidden else ""
    view.nccl = sections.nccl_view(tables.nccl)
    if view.nccl is not None:
        view.nccl_channels = i18n.fmt(t, "nccl_channels", rings=view.nccl.rings, trees=view.nccl.trees) \
            if view.nccl.rings or view.nccl.trees else t["none"]


def _nav(view: ReportView, t) -> list[NavItem]:
    empty = {
        "verdict": False, "evidence": not view.evidence, "timeline": not (view.timeline_rows or view.end_rows),
        "steps": not view.steps_rows, "gpu": not view.gpu_rows, "stacks": not view.stack_classes,
        "collectives": not view.coll_rows, "nccl": view.nccl is None, "findings": not view.findings,
        "gaps": not view.gaps, "sources": not view.sources,
    }
    ids = FRAGMENT_SECTIONS if view.fragment else SECTION_IDS
    return [NavItem(i, t.get(f"nav_{i}", t[f"sec_{i}"]), empty[i]) for i in ids]

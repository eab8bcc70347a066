"""View model for the HTML report: small plain dataclasses built from the Analysis; templates only loop and print."""
from __future__ import annotations

import datetime as _dt
import os

import pandas as pd

from postmortem.reports import chart_process, i18n, view_ahead
from postmortem.reports import ranks as ranks_mod
from postmortem.reports import sections
from postmortem.verdict.gaps import lines_carry_times
from postmortem.verdict.sentences import as_int, clip, sentence
from postmortem.reports.evidence import first_time
from postmortem.reports.sections import rank_ranges
from postmortem.reports.view_types import (EvidenceItem, Fact, FigureView, FindingRow, FRAGMENT_SECTIONS, GapView,
                                           _lead, MAX_CITED_CHARS, MAX_EVIDENCE, MAX_OTHER_EVIDENCE, MAX_SOURCES,
                                           MAX_STEP_ROWS, NavItem, OPEN_EVIDENCE, ReportView, SECTION_IDS, SourceRow,
                                           StepRow, _str, VerdictView)
from postmortem.reports.view_evidence import _evidence, _line_no
from postmortem.reports.view_ranks import MAX_END_ROWS, end_rows, odd_rows  # noqa: F401 - MAX_END_ROWS re-exported


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


def _ranks_table(analysis):
    """The rank end-state table (built here for an Analysis assembled by hand, which has none)."""
    ranks = analysis.ranks
    if ranks is None:
        from postmortem.ranks.state import rank_state
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
    ahead = None
    if not fragment:
        # the parts computed beside the rules (api.analyze for an HTML report), else computed here
        ahead = view_ahead.take(tables) or {}
        if ahead.get("labels") != (t["stacks_main_thread"], t["coll_default_pg"]):
            ahead = {k: v for k, v in ahead.items() if k in ("ranks", "nccl")}  # (the other parts carry words)
        model = ranks_mod.build(analysis, ahead.get("ranks"))
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
        _fill_table_sections(view, analysis, gm, t, ahead)
        if charts is not None:
            _add_figures(view, charts.result(), t)
    view.nav = _nav(view, t)
    view.shown = [n.id for n in view.nav if not n.empty]  # a section with nothing to show is left out
    return view


def _verdict(analysis, t, lang: str = "en") -> VerdictView:
    from postmortem.verdict import advice
    from postmortem.reports import translate
    from postmortem.reports.next_view import next_view
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


def _finding(f, t, anchors, lang: str = "en", root=None) -> FindingRow:
    from postmortem.verdict import advice
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
        from postmortem.reports.translate import to_zh
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
    """The charts' data URIs (postmortem.reports.figures.chart_uris) into the view; a chart without data stays None."""
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


def _fill_table_sections(view: ReportView, analysis, gm, t, ahead: dict | None = None) -> None:
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
    ahead = ahead or {}
    summary = ahead["stacks"] if "stacks" in ahead else sections.stack_classes(tables.stacks, t["stacks_main_thread"])
    for c in summary.classes:
        c.kind = t.get(f"stk_{c.kind}", c.kind) if c.kind else ""
        c.more_label = i18n.fmt(t, "stacks_more_frames", n=len(c.more_frames)) if c.more_frames else ""
    view.stack_classes = summary.classes
    view.stacks_more = i18n.fmt(t, "stacks_more", n=summary.hidden) if summary.hidden else ""
    if summary.least:
        view.stacks_least = i18n.fmt(t, "stacks_least", ranks=summary.least) + (
            f" ({summary.least_why})" if summary.least_why else "")
    rows, hidden = ahead["collectives"] if "collectives" in ahead else \
        sections.collective_rows(tables.collectives, t["coll_default_pg"])
    for r in rows:
        r.state = i18n.value_words(view.lang, "state_", r.state) if r.state else ""
    view.coll_rows = rows
    view.coll_more = i18n.fmt(t, "coll_more", n=hidden) if hidden else ""
    view.nccl = ahead["nccl"] if "nccl" in ahead else sections.nccl_view(tables.nccl)
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

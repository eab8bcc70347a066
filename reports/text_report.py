"""The terminal summary: verdict first, then evidence, other findings, gaps and unreadable sources."""
from __future__ import annotations

import re
import textwrap

from postmortem.verdict.findings import CATEGORY_WORDS
from postmortem.verdict.sentences import as_int, ranks_phrase
from postmortem.stacks import rank_ranges
from postmortem.reports.evidence import first_time, unique_evidence, where


TEXT_WORDS = {
    "en": {"verdict": "VERDICT", "confidence": "confidence", "culprit": "culprit", "phase": "phase", "step": "step",
           "time": "time", "as_logged": "(log time)", "why": "WHY", "fix": "FIX", "evidence": "EVIDENCE", "others": "OTHER FINDINGS",
           "gaps": "EVIDENCE GAPS (collect next time)", "input": "INPUT", "more": "more cited lines (--format json or "
           "-o report.html shows all)", "supports": "same failure, another view", "consequence": "a consequence of "
           "the verdict", "files": "files", "world": "world size", "inferred": " (inferred)", "seen": "ranks seen",
           "skipped": "skipped/partial", "rule_error": "rule error (its finding is missing)", "none": "none",
           "note": "NOTE", "next": "NEXT"},
    "zh": {"verdict": "结论", "confidence": "置信度", "culprit": "肇事 rank", "phase": "阶段", "step": "训练步",
           "time": "时间", "as_logged": "（日志时间）", "why": "原因", "fix": "如何修改", "evidence": "证据", "others": "其他发现",
           "gaps": "缺失的证据（下次收集）", "input": "输入", "more": "行引用未显示（--format json 或 -o report.html "
           "可看到全部）", "supports": "同一故障的另一证据", "consequence": "结论的连锁反应", "files": "个文件",
           "world": "进程总数", "inferred": "（推断）", "seen": "出现的 rank", "skipped": "跳过/部分读取",
           "rule_error": "规则出错（其结论缺失）", "none": "无", "note": "注意", "next": "下一步"},
}


def relation(f, root, lang: str = "en") -> str:
    """How another finding stands to the verdict, in words: another view of the same failure (same category), or a
    consequence of it; "" for an independent finding."""
    if not f.cascade_of:
        return ""
    w = TEXT_WORDS.get(lang, TEXT_WORDS["en"])
    return w["supports"] if root is not None and f.category == root.category else w["consequence"]


def render_text(analysis, width: int = 100, lang: str = "en") -> str:
    """Plain-text summary of an Analysis (same verdict as the JSON and HTML), in English or Chinese."""
    from postmortem.verdict import advice
    from postmortem.verdict.sentences import sentence, zh_ranks
    from postmortem.reports import i18n
    w = TEXT_WORDS.get(lang, TEXT_WORDS["en"])
    zh = lang == "zh"
    out: list[str] = []
    v = analysis.verdict
    if v is None:
        return "postmortem: no readable input files.\n" if not zh else "postmortem：没有可读的输入文件。\n"
    root = analysis.finding_list[0] if analysis.finding_list else None
    words = i18n.category_words(i18n.catalogue(lang), v.category) if zh else CATEGORY_WORDS.get(v.category, v.category)
    sep = "：" if zh else ": "
    out.append(f"{w['verdict']}  {v.category}  ({words})  {w['confidence']} {v.confidence:.2f}")
    summary = sentence(root, lang) if zh and root is not None else v.summary
    out.extend("  " + line for line in _wrap(summary, width - 2))
    if v.culprit_ranks:
        out.append(f"  {w['culprit']}{sep}{zh_ranks(v.culprit_ranks) if zh else ranks_phrase(v.culprit_ranks)}")
    if v.phase and v.phase != "unknown":
        out.append(f"  {w['phase']}{sep}{i18n.phase_words(i18n.catalogue(lang), v.phase) if zh else v.phase}")
    if as_int(v.step) is not None:
        out.append(f"  {w['step']}{sep}{as_int(v.step)}")
    when = first_time(analysis, root) if root else None
    if when is not None:
        out.append(f"  {w['time']}{sep}{when:%Y-%m-%d %H:%M:%S} {w['as_logged']}")
    if root:
        why, fix = v.why or root.explanation, v.fix or root.remediation
        if zh:  # translated sentence by sentence from the English, so that both name the same facts
            from postmortem.reports.translate import verdict_zh
            zh_why, zh_fix = verdict_zh(why, fix)
            why, fix = zh_why or why, zh_fix or fix
        out.append("")
        out.append(w["why"])
        out.extend("  " + line for line in _wrap(why or v.why or root.explanation, width - 2))
        out.append(w["fix"])
        out.extend("  " + line for line in _wrap(fix, width - 2))
        out.extend(_next_lines(v, w, width, lang))
        paths = {s.source: s.path for s in (analysis.sources or [])}
        cited = unique_evidence(v.evidence or root.evidence, paths)
        if cited:
            out.append(w["evidence"])
            for e in cited[:8]:
                rank = f"  [rank {e.rank}]" if e.rank is not None else ""
                out.append(f"  {where(e.source, e.line)}{rank}")
                out.extend("      " + line for line in _wrap(e.text.strip(), width - 6, keep=True))
            if len(cited) > 8:
                out.append(f"  ... {len(cited) - 8} {w['more']}")
    else:
        out.extend(_next_lines(v, w, width, lang))
    others = analysis.finding_list[1:]
    if others:
        out.append("")
        out.append(w["others"])
        for f in others[:10]:
            rel = relation(f, root, lang)
            tag = f" ({rel})" if rel else ""
            title = sentence(f, lang) if zh else advice.tidy(f.title)
            head = f"  {f.confidence:.2f} {f.category:22} "
            out.extend(textwrap.wrap(f"{title}{tag}", width, initial_indent=head,
                                     subsequent_indent=" " * len(head)) or [head])
    if analysis.evidence_gaps:
        out.append("")
        out.append(w["gaps"])
        for g in analysis.evidence_gaps:
            missing = i18n.gap_words(lang, str(g["missing"]), str(g.get("why", "")))[0] if zh else g["missing"]
            out.append(f"  - {missing}{sep}{g['how']}")
    meta = analysis.tables.meta
    src = analysis.tables.sources
    bad = src[src["problem"].notna()]
    out.append("")
    ws = meta.get("world_size")
    out.append(f"{w['input']}  {len(src)} {w['files']}, {w['world']} {ws if ws is not None else '?'}"
               f"{w['inferred'] if meta.get('world_size_inferred') else ''}, {w['seen']} "
               f"{rank_ranges(meta.get('ranks_seen', [])) or w['none']}")
    for _, r in bad.head(20).iterrows():
        out.append(f"  {w['skipped']}: {r['source']}: {r['problem']}")
    for err in analysis.tables.meta.get("rule_errors") or []:
        out.append(f"  {w['rule_error']}: {err}")
    return terminal_safe("\n".join(out) + "\n")


def _next_lines(v, w: dict, width: int, lang: str) -> list[str]:
    """The NEXT block: the action and its domain on one line, then why (postmortem.verdict.next_action)."""
    from postmortem.verdict.next_action import headline
    nxt = getattr(v, "next", None)
    if nxt is None:
        return []
    head = f"{w['next']}  {headline(nxt, lang)}" + (f"  {', '.join(nxt.hosts)}" if nxt.hosts else "")
    why = nxt.why_zh if lang == "zh" and nxt.why_zh else nxt.why
    return [head] + ["  " + line for line in _wrap(why, width - 2)]


_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """Control characters from untrusted log text shown escaped (`\\x1b`), so a log cannot drive the terminal."""
    return _CONTROL_RE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _wrap(text: str, width: int, keep: bool = False) -> list[str]:
    """Word-wrapped lines; `keep` wraps long tokens too (paths, stack frames) so no character is lost. Text with
    Chinese characters is wrapped by display width (a Han character takes two columns)."""
    if _WIDE.search(text or ""):
        return _wrap_wide(text, width)
    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=not keep) or [""]


_WIDE = re.compile(r"[\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6]")
_TOKENS = re.compile(r"[\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6]|"
                     r"[^\s\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6]+|\s+")


def _wrap_wide(text: str, width: int) -> list[str]:
    """Wrap mixed Chinese/Latin text at `width` display columns: between Han characters anywhere, Latin words whole
    (cut only when one is longer than a line)."""
    lines, cur, cols = [], "", 0
    for tok in _TOKENS.findall(text):
        w = 2 * len(tok) if _WIDE.match(tok) else len(tok)
        if tok.isspace():
            if cur and cols + 1 <= width:
                cur, cols = cur + " ", cols + 1
            continue
        if cols + w > width and cur.strip():
            lines.append(cur.rstrip())
            cur, cols = "", 0
        while w > width:  # a word longer than a line
            lines.append(tok[:width])
            tok, w = tok[width:], w - width
        cur, cols = cur + tok, cols + w
    if cur.strip():
        lines.append(cur.rstrip())
    return lines or [""]

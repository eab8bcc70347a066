"""The verdict card's "what to do now" block: the next action in the report's language (postmortem.verdict.next_action)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class NextView:
    """What to do now, in words: the action, its domain, the hosts to take out, why (and the English why beside a
    translated one)."""
    action: str
    headline: str
    why: str
    why_lang: str = "en"
    why_en: str = ""
    hosts: list[str] = field(default_factory=list)


def next_view(verdict, lang: str = "en") -> NextView | None:
    """The block for a verdict's `next` (None when it has none)."""
    from postmortem.verdict.next_action import headline
    nxt = getattr(verdict, "next", None) if verdict is not None else None
    if nxt is None:
        return None
    if lang == "zh" and nxt.why_zh:
        return NextView(nxt.action, headline(nxt, lang), nxt.why_zh, "zh-CN", nxt.why, list(nxt.hosts))
    return NextView(nxt.action, headline(nxt, "en"), nxt.why, "en", "", list(nxt.hosts))

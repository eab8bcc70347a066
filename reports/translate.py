"""English verdict text into Chinese, sentence by sentence, from the same facts.

Rules write their explanations and fixes in English with the facts of the case in them (ranks, steps, files, frames,
messages). Each sentence is matched against the sentence patterns of reports/zh_sentences.py; a pattern's
placeholders capture the facts, and its Chinese template puts the very same text back, so the Chinese sentence names
the same ranks, numbers and files. A sentence no pattern knows stays in English (a quoted log message, a rule of a
plugin): a fact is never dropped or changed by translation.
"""
from __future__ import annotations

import functools

import regex

from postmortem.reports.zh_sentences import VALUE_PHRASES, VALUE_WORDS, ZH_SENTENCES

MAX_SENTENCE = 2000      # longer sentences are left in English (matching is bounded)
MATCH_TIMEOUT_S = 0.05
_SPLIT = regex.compile(r"(?<=[.!?])\s+(?=[A-Za-z(`'\"\[])")
_FIELD = regex.compile(r"\{([a-z_]+)\}")
_RANKS = regex.compile(r"^(?i:ranks?) (\d[\d, -]*?(?: and \d[\d-]*)?)$")
_HAN = regex.compile(r"\p{Han}")


@functools.lru_cache(maxsize=1)
def _patterns() -> list:
    """[(literal head, compiled pattern, Chinese template)] in the order of ZH_SENTENCES."""
    out = []
    for english, chinese in ZH_SENTENCES:
        parts, pos, seen = [], 0, set()
        for m in _FIELD.finditer(english):
            parts.append(regex.escape(english[pos:m.start()]))
            name = m.group(1)
            # a name used twice must capture the same text again
            parts.append(f"(?P={name})" if name in seen else f"(?P<{name}>.+?)")
            seen.add(name)
            pos = m.end()
        tail = english[pos:]
        # a pattern's final period is optional in the sentence (a rule's text may end without one)
        parts.append(regex.escape(tail[:-1]) + r"\.?" if tail.endswith(".") else regex.escape(tail))
        head = english[:english.index("{")] if "{" in english else english.rstrip(".")
        out.append((head, regex.compile("".join(parts), regex.S), chinese))
    return out


def split_sentences(text: str) -> list[str]:
    """The sentences of an English paragraph."""
    return [s for s in _SPLIT.split((text or "").strip()) if s]


def _zh_value(value: str, depth: int = 0) -> str:
    """A captured fact in Chinese form where it has one (`ranks 0, 1 and 2` -> `rank 0、1、2`, a clause that is a
    sentence of its own), else as it is: the digits, names and quotes in it stay."""
    v = value.strip()
    m = _RANKS.match(v)
    if m:
        return "rank " + "、".join(p.strip() for p in regex.split(r",| and ", m.group(1)) if p.strip())
    if v in VALUE_WORDS:
        return VALUE_WORDS[v]
    if depth < 2 and " " in v and len(v) > 12:
        for clause in dict.fromkeys((v, v[:1].upper() + v[1:])):  # a clause as written, or as a sentence starts
            zh = sentence_zh(clause, depth + 1)
            if zh is not None:
                return zh.rstrip("。")
    for pattern, repl in VALUE_PHRASES:
        value = pattern.sub(repl, value)
    return value


def sentence_zh(sentence: str, depth: int = 0) -> str | None:
    """One English sentence in Chinese, or None when no pattern knows it."""
    if len(sentence) > MAX_SENTENCE:
        return None
    for head, pattern, chinese in _patterns():
        if not sentence.startswith(head):
            continue
        try:
            m = pattern.fullmatch(sentence, timeout=MATCH_TIMEOUT_S)
        except TimeoutError:
            continue
        if m:
            return chinese.format(**{k: _zh_value(v, depth) for k, v in m.groupdict().items()})
    return None


def to_zh(text: str) -> tuple[str, int, int]:
    """(the paragraph in Chinese, sentences translated, sentences in all); unknown sentences stay English."""
    pieces, done = [], 0
    sentences = split_sentences(text)
    for s in sentences:
        zh = sentence_zh(s)
        done += zh is not None
        pieces.append(zh if zh is not None else s)
    out = ""
    for p in pieces:
        # Chinese sentences join without a space; an English one keeps its spaces
        joint = "" if not out or (_HAN.search(out[-1:]) and _HAN.search(p[:1])) or out.endswith("。") else " "
        out += joint + p
    return out, done, len(sentences)


def verdict_zh(why_en: str, fix_en: str) -> tuple[str, str]:
    """The verdict's why and fix in Chinese, each "" when not one of its sentences could be translated (the report
    then shows the English)."""
    why, w_done, _ = to_zh(why_en)
    fix, f_done, _ = to_zh(fix_en)
    return (why if w_done else ""), (fix if f_done else "")

"""The report's string catalogue: every word the HTML report and its figures print, per language (the data in
lang/*.json)."""
from __future__ import annotations

import json
import os

LANGUAGES = ("en", "zh")
DEFAULT_LANG = "en"

# The words live in lang/<language>.json (one file per language, loaded once): `strings` (keys are plain
# identifiers so templates can write `t.key`; values with {placeholders} are formatted in the view model, templates
# only print), `rule_titles` (registered rule titles; a plugin rule keeps its own), `value_words` (words for the
# values the tables hold: input kinds, collective states, what a rank was doing) and `gaps` (evidence gaps by the
# first words of their `missing` text: [missing, why]; the command stays as is). Rule texts (explanations, fixes)
# come from the rules.


def _load(lang: str) -> dict:
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lang", f"{lang}.json"), encoding="utf-8") as f:
        return json.load(f)


_DATA = {lang: _load(lang) for lang in LANGUAGES}
EN: dict[str, str] = _DATA["en"]["strings"]
ZH: dict[str, str] = _DATA["zh"]["strings"]
CATALOGUES: dict[str, dict[str, str]] = {lang: d["strings"] for lang, d in _DATA.items()}
RULE_TITLES: dict[str, dict[str, str]] = {lang: d["rule_titles"] for lang, d in _DATA.items() if d["rule_titles"]}
VALUE_WORDS: dict[str, dict[str, str]] = {lang: d["value_words"] for lang, d in _DATA.items()}
GAPS: dict[str, dict[str, tuple[str, str]]] = {lang: {k: tuple(v) for k, v in d["gaps"].items()}
                                               for lang, d in _DATA.items() if d["gaps"]}


def value_words(lang: str, prefix: str, value) -> str:
    """Words for a table value (`kind_`, `state_`, `act_` prefixes), the value itself when there are none."""
    text = "" if value is None else str(value)
    return VALUE_WORDS.get(lang, VALUE_WORDS["en"]).get(f"{prefix}{text}", text)


def rule_title(lang: str, rule: str | None, english: str) -> str:
    """A rule's registered title in `lang` (English, or a rule with no translation: `english`)."""
    return RULE_TITLES.get(lang, {}).get(rule or "", english)


def gap_words(lang: str, missing: str, why: str) -> tuple[str, str]:
    """An evidence gap's `missing` and `why` in `lang` (unchanged when there is no translation)."""
    for prefix, words in GAPS.get(lang, {}).items():
        if missing.startswith(prefix):
            if prefix == "logs of ranks":
                return words[0] + missing[len("logs of ranks"):], words[1]
            return words
    return missing, why


def catalogue(lang: str | None = None) -> dict[str, str]:
    """The strings for `lang` (a copy; unknown languages raise ValueError)."""
    lang = lang or DEFAULT_LANG
    if lang not in CATALOGUES:
        raise ValueError(f"unknown report language {lang!r}; choose one of {', '.join(LANGUAGES)}")
    return dict(CATALOGUES[lang])


def fmt(t: dict[str, str], key: str, **values) -> str:
    """Catalogue string `key` with its {placeholders} filled."""
    return t[key].format(**values)


def category_words(t: dict[str, str], category: str) -> str:
    """Plain words for a category id (the id itself when the catalogue has none)."""
    return t.get(f"cat_{category}", category)


def phase_words(t: dict[str, str], phase: str | None) -> str | None:
    """Plain words for a phase id, or None."""
    if not phase:
        return None
    return t.get(f"phase_{phase}", phase)

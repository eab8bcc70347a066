"""Verdict sentences: one sentence a person would write, for every sample and in both report languages."""
from __future__ import annotations

import os
import re

import pytest

import postmortem
from postmortem.findings import CATEGORIES, Evidence, Finding
from postmortem.sentences import finding_sentence, finding_sentence_zh, ranks_phrase, sentence_case

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = sorted(d for d in os.listdir(os.path.join(ROOT, "samples"))
                 if os.path.isdir(os.path.join(ROOT, "samples", d, "logs")))
BAD = re.compile(r"<NA>|Rank \?|rank \?|Rank\(s\)|\[\]|:None|\bNone\b|nan\b")


def test_ranks_phrase_and_sentence_case():
    assert ranks_phrase([3]) == "rank 3" and ranks_phrase([1, 2, 3], capital=True) == "Ranks 1, 2 and 3"
    assert ranks_phrase(range(8)) == "ranks 0-7" and ranks_phrase([], none="one rank") == "one rank"
    assert ranks_phrase([0, 1, 2, 3, 5] + list(range(8, 512))) == "ranks 0-3, 5 and 8-511"
    assert sentence_case("pytorchStreamReader failed") == "PytorchStreamReader failed"
    assert sentence_case("a PytorchStreamReader error") == "A PytorchStreamReader error"   # not .capitalize()


@pytest.mark.parametrize("category", CATEGORIES)
def test_every_category_reads_as_one_sentence(category):
    f = Finding(rule="x", category=category, confidence=0.9, title="t", explanation="e", remediation="r",
                culprit_ranks=[2], affected_ranks=[0, 1, 3], step=40, phase="train",
                evidence=[Evidence("rank2.log", 5, 2, "ValueError: bad sample")])
    text = finding_sentence(f)
    assert text[0].isupper() and text.endswith(".") and text.count(". ") == 0 and not BAD.search(text), text
    zh = finding_sentence_zh(f)
    assert zh.endswith("。") and zh.count("。") == 1 and not BAD.search(zh), zh
    if category not in ("no_failure", "unknown"):
        assert "40" in text and "40" in zh                               # where: the step
    g = Finding(rule="x", category=category, confidence=0.3, title="t", explanation="e", remediation="r")
    text = finding_sentence(g)
    assert not BAD.search(text) and "step" not in text
    if category not in ("no_failure", "unknown", "collective_timeout"):
        assert "probably" in text.split(",")[0].split(" because")[0]   # the hedge is in the claim, not after it


@pytest.mark.parametrize("sample", SAMPLES)
def test_sample_verdicts_are_sentences_without_fragments(sample):
    a = postmortem.analyze(os.path.join(ROOT, "samples", sample, "logs"), quiet=True)
    s = a.verdict.summary
    assert s[0].isupper() and s.endswith(".") and not BAD.search(s), s
    words = re.findall(r"[A-Za-z/]+", s.lower())
    assert not re.search(r"(.{12,}): \1", s), s                       # "Loss became NaN/Inf: Loss became NaN/Inf."
    assert len(words) >= 5
    if a.verdict.culprit_ranks:
        assert ranks_phrase(a.verdict.culprit_ranks) in s.lower()
    text = a.to_text()
    assert not BAD.search(text.split("OTHER FINDINGS")[0].split("EVIDENCE\n")[0]), text


def test_a_true_hang_is_not_told_to_raise_the_timeout():
    a = postmortem.analyze(os.path.join(ROOT, "samples", "hung_rank_pyspy", "logs"), quiet=True)
    assert a.verdict.category == "straggler"
    fix = a.finding_list[0].remediation.lower()
    assert "longer timeout would only delay" in fix and "needs a longer timeout" not in fix


def test_checkpoint_story_names_the_ranks_it_blames():
    a = postmortem.analyze(os.path.join(ROOT, "samples", "checkpoint_read_during_write", "logs"), quiet=True)
    root = a.finding_list[0]
    assert ranks_phrase(root.culprit_ranks) in root.explanation.lower()
    assert ranks_phrase(root.culprit_ranks, capital=True) in a.verdict.summary


def test_every_rule_has_zh_advice():
    from postmortem.rules import all_rules
    from reports.i18n import ADVICE
    assert sorted(r.id for r in all_rules()) == sorted(ADVICE["zh"])


def test_missing_values_of_any_kind_never_reach_the_sentence():
    import pandas as pd
    f = Finding(rule="x", category="nan_inf", confidence=0.9, title="t", explanation="e", remediation="r")
    f.step = pd.NA
    assert "step" not in finding_sentence(f) and "<NA>" not in finding_sentence_zh(f)
    assert ranks_phrase([pd.NA, None, float("nan"), 2]) == "rank 2"

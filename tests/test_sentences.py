"""Verdict sentences: one sentence a person would write, for every sample and in both report languages."""
from __future__ import annotations

import os
import re

import pytest

import postmortem
from postmortem.verdict.findings import CATEGORIES, Evidence, Finding
from postmortem.verdict.sentences import finding_sentence, finding_sentence_zh, ranks_phrase, sentence_case

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
    from postmortem.verdict.advice import VARIANT_FIX_ZH, finding_fix
    from postmortem.rules import all_rules
    for r in all_rules():
        f = Finding(rule=r.id, category=r.category, confidence=0.9, title="t", explanation="e", remediation="r")
        assert finding_fix(f, "zh"), r.id
    assert all(VARIANT_FIX_ZH.values())


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(os.path.join(ROOT, "tests", "rules"))
                                        if os.path.isdir(os.path.join(ROOT, "tests", "rules", n, "fire"))))
def test_every_variant_a_rule_concludes_has_zh_fix_and_why(name):
    """Each rule's firing bundle: every finding it makes, in whatever category, has a Chinese fix of its own variant,
    and the verdict has a Chinese why and fix (issue 26: barrier skew must not get the straggler's text)."""
    from postmortem.verdict import advice
    a = postmortem.analyze(os.path.join(ROOT, "tests", "rules", name, "fire"), quiet=True)
    for f in a.finding_list:
        assert advice.finding_fix(f, "zh"), (f.rule, f.category)
    if a.finding_list:
        adv = advice.advise(a.finding_list, a.ranks)
        assert advice.verdict_fix(adv, "zh") and advice.why_zh(adv, a.finding_list[0], a.ranks)


def test_the_fix_follows_the_variant_not_the_rule_id():
    """odd-rank-out-stack concludes straggler or barrier_skew: each gets its own advice, in both languages."""
    from postmortem.verdict import advice
    straggler = Finding(rule="odd-rank-out-stack", category="straggler", confidence=0.9, title="t", explanation="e",
                        remediation="Find out why rank 3 is stuck in load (x.py:1)")
    skew = Finding(rule="odd-rank-out-stack", category="barrier_skew", confidence=0.8, title="t", explanation="e",
                   remediation="Make every rank call the same collectives in the same order.")
    zs, zk = advice.finding_fix(straggler, "zh"), advice.finding_fix(skew, "zh")
    assert zs != zk and "卡" in zs
    adv = advice.advise([skew])
    assert adv.mechanism == "divergent_collectives" and "相同顺序" in advice.verdict_fix(adv, "zh")


def test_uneven_batches_get_the_remedy_of_uneven_batches_whoever_ranks_first():
    """The flagship sample: the stacks rule (ranks at different call sites) ranks first, the step counts show the
    mechanism; the fix shown is drop_last / Join / even shards, in English and Chinese, and categories, culprits and
    confidences stay as decided."""
    a = postmortem.analyze(os.path.join(ROOT, "samples", "uneven_batches_barrier", "logs"), quiet=True)
    v, root = a.verdict, a.finding_list[0]
    assert (v.category, v.culprit_ranks) == ("barrier_skew", [0])
    assert (v.category, v.culprit_ranks, v.confidence) == (root.category, root.culprit_ranks, root.confidence)
    assert root.rule not in ("uneven-progress",) and "drop_last" not in root.remediation   # the symptom's rule leads
    assert v.mechanism == "uneven_batches"
    for word in ("drop_last=True", "DistributedSampler", "Join"):
        assert word in v.fix
    assert "different numbers of batches" in v.why
    # rank 0 reports every 5th step (last: 60) and ran one batch more than ranks 1-3 (last: 61): a difference smaller
    # than how often it reports says nothing about who was ahead, so the why quotes no steps
    assert "60" not in v.why.split(".")[0] and "step 60" not in v.why
    text = a.to_text()
    assert "drop_last=True" in text.split("FIX", 1)[1].split("EVIDENCE", 1)[0]
    zh = a.to_text(lang="zh")
    assert "drop_last=True" in zh.split("如何修改", 1)[1] and "批次数不同" in zh
    html = a.to_html(lang="zh")
    fix = html.split('class="pm-fix"', 1)[1].split("</div>", 1)[0]
    assert "drop_last=True" in fix and "Join" in fix
    assert "卡在" not in fix                                # not the straggler's text


def test_missing_values_of_any_kind_never_reach_the_sentence():
    import pandas as pd
    f = Finding(rule="x", category="nan_inf", confidence=0.9, title="t", explanation="e", remediation="r")
    f.step = pd.NA
    assert "step" not in finding_sentence(f) and "<NA>" not in finding_sentence_zh(f)
    assert ranks_phrase([pd.NA, None, float("nan"), 2]) == "rank 2"


def test_clip_cuts_at_a_word_and_says_so():
    from postmortem.verdict.sentences import clip
    assert clip("Timed out waiting 20000ms for recv", 12) == "Timed out …"
    assert clip("short", 12) == "short"
    assert clip("/a/very/long/path/without/spaces/at/all", 10).endswith(" …")   # a long token is cut, and says so


def test_rule_texts_quote_messages_without_mid_word_cuts():
    """ddp_unused_parameter's why quotes DDP's 500-character error: cut at a word with an ellipsis ("You can e)"
    before)."""
    a = postmortem.analyze(os.path.join(ROOT, "samples", "ddp_unused_parameter", "logs"), quiet=True)
    why = a.verdict.why
    assert "You can e)" not in why and " …)" in why


def test_the_zh_fix_follows_the_phase_as_the_english_one_does():
    a = postmortem.analyze(os.path.join(ROOT, "samples", "sampling_oom_step2000", "logs"), quiet=True)
    from postmortem.verdict import advice
    assert a.verdict.phase == "sample" and "sampling" in a.verdict.fix
    assert "采样" in advice.verdict_fix(advice.advise(a.finding_list, a.ranks), "zh")


def test_steps_by_rank_quotes_steps_only_when_the_gap_exceeds_the_reporting_interval():
    import pandas as pd
    from postmortem.verdict.advice import steps_by_rank
    ranks = pd.DataFrame({"rank": [0, 1, 2], "last_step": pd.array([60, 61, 61], dtype="Int64")})
    every_step = pd.DataFrame({"rank": [0, 0, 1, 1], "line": [1, 2, 3, 4], "step": [59, 60, 60, 61],
                               "phase": ["train"] * 4})
    every_fifth = every_step.assign(step=[55, 60, 56, 61])
    assert steps_by_rank(ranks, every_step) == "the last steps reported: rank 0 60, ranks 1 and 2 61"
    assert steps_by_rank(ranks, every_fifth) == ""

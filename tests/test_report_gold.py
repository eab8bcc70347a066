"""Gold-file tests of the HTML report on small real bundles (tests/fixtures/report/), volatile parts scrubbed.

On a mismatch the test writes tests/gold/report_<name>.actual.html; accept it with `python -m tests.accept_gold`
(or rerun with POSTMORTEM_ACCEPT_GOLD=1).
"""
from __future__ import annotations

import importlib.util
import os
import re

import pytest

import postmortem
from postmortem.reports.i18n import catalogue
from postmortem.reports.sections import rank_ranges

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "report")
GOLD = os.path.join(HERE, "gold")
CASES = sorted(d for d in os.listdir(FIXTURES) if os.path.isdir(os.path.join(FIXTURES, d)))
GENERATED = "2000-01-01 00:00 UTC"

_spec = importlib.util.spec_from_file_location("accept_gold", os.path.join(HERE, "accept_gold.py"))
accept_gold = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(accept_gold)


def _render(name: str, **options) -> tuple[object, str]:
    path = os.path.join(FIXTURES, name)
    analysis = postmortem.analyze(path)
    html = analysis.to_html(generated_at=GENERATED, **options)
    # The input path is machine-specific; show it as the fixture-relative name.
    return analysis, html.replace(path, f"fixtures/report/{name}")


def test_there_are_at_least_three_gold_cases():
    assert len(CASES) >= 3


@pytest.mark.parametrize("name", CASES)
def test_report_matches_gold(name):
    _, html = _render(name)
    gold = os.path.join(GOLD, f"report_{name}.html")
    actual = os.path.join(GOLD, f"report_{name}.actual.html")
    got = accept_gold.scrub(html)
    if os.environ.get("POSTMORTEM_ACCEPT_GOLD") == "1":
        os.makedirs(GOLD, exist_ok=True)
        with open(gold, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(got)
    want = open(gold, encoding="utf-8").read() if os.path.exists(gold) else None
    if got != want:
        os.makedirs(GOLD, exist_ok=True)
        with open(actual, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(html)
        pytest.fail(f"report for {name} differs from {os.path.relpath(gold)}; inspect {os.path.relpath(actual)} "
                    f"and accept it with `python -m tests.accept_gold` (or POSTMORTEM_ACCEPT_GOLD=1 pytest ...)")
    if os.path.exists(actual):
        os.remove(actual)


@pytest.mark.parametrize("name", CASES)
def test_verdict_text_is_the_analysis_verdict(name):
    analysis, html = _render(name)
    t = catalogue("en")
    v = analysis.verdict
    block = re.search(r'<section id="verdict".*?</section>', html, re.S).group(0)
    assert f"<code>{v.category}</code>" in block
    assert f'<h1 class="pm-headline">{t["cat_" + v.category]}</h1>' in block
    assert f'<span class="pm-confidence">{v.confidence:.2f}</span>' in block
    culprits = rank_ranges(v.culprit_ranks) or t["no_rank_stands_out"]
    assert f'<dd class="pm-culprits">{culprits}</dd>' in block
    if v.step is not None:
        assert f"after step {v.step}" in block
    if analysis.finding_list:
        from markupsafe import escape
        assert str(escape(analysis.finding_list[0].remediation)) in block


def test_rank_crash_verdict_names_rank_1_and_cites_the_value_error():
    analysis, html = _render("rank_crash_record_raise")
    assert analysis.verdict.culprit_ranks == [1]
    verdict = re.search(r'<section id="verdict".*?</section>', html, re.S).group(0)
    assert "on rank 1" in verdict
    evidence = re.search(r'<section id="evidence".*?</section>', html, re.S).group(0)
    assert "ValueError: corrupt sample at step 3" in evidence
    assert 'href="#src-0"' in evidence and 'id="src-0"' in html


def test_nvidia_smi_case_has_gpu_section_when_snapshots_are_parsed():
    analysis, html = _render("gpu_oom_nvidia_smi")
    gpu = re.search(r'<section id="gpu">.*?</section>', html, re.S).group(0)
    if len(analysis.tables.gpu):
        assert "8,108" in gpu and "8,111" in gpu          # last snapshot: 8108MiB / 8111MiB
        assert "data:image/png;base64," in gpu
    else:
        assert catalogue("en")["gpu_empty"] in gpu


def test_watchdog_case_lists_timed_out_ranks():
    _, html = _render("watchdog_timeout_tokenization")
    coll = re.search(r'<section id="collectives">.*?</section>', html, re.S).group(0)
    assert "ALLREDUCE" in coll and "1-3" in coll

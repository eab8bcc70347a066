"""postmortem.rules.timing and tqdm's elapsed time: a bar of work outside training that ran as long as the
collective timeout names its rank (a real lab run) and stays quiet on a bar still well under it."""
from __future__ import annotations

import os

import pytest

import postmortem
from parsers.steps import clock_seconds, parse_step

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("text,want", [("30:09", 1809.0), ("1:02:03", 3723.0), ("?", None), ("12", None)])
def test_clock_seconds(text, want):
    assert clock_seconds(text) == want


def test_a_tqdm_line_carries_its_elapsed_time():
    row = parse_step("Running tokenizer on dataset: 47%|████▊ | 1695000/3634744 [30:09<33:25, 967.30 examples/s]")
    assert row["elapsed_s"] == 1809.0 and row["phase"] == "data"


def test_an_eval_bar_past_the_timeout_names_its_rank():
    path = os.path.join(ROOT, "benchmarks", "lab", "cases", "straggler__tqdm-eval-past-timeout-torchrun-tee-5r-1")
    if not os.path.isdir(path):
        pytest.skip("lab case not present")
    a = postmortem.analyze(path, jobs=1, quiet=True)
    f = [f for f in a.finding_list if f.rule == "busy-past-timeout"]
    assert f and f[0].culprit_ranks == [3] and "Evaluating" in f[0].explanation
    assert (a.verdict.category, a.verdict.culprit_ranks) == ("straggler", [3])

"""The bundled samples (samples/<name>/): each one's verdict matches the expected.json written beside its logs."""
from __future__ import annotations

import glob
import json
import os

import pytest

import postmortem

SAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "samples")
EXPECTED_KEYS = {"category", "culprit_ranks", "phase", "max_confidence"}


def _samples() -> list[str]:
    return sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(SAMPLES, "*", "expected.json")))


def _expected(name: str) -> dict:
    with open(os.path.join(SAMPLES, name, "expected.json"), encoding="utf-8") as f:
        return json.load(f)


def test_samples_are_present():
    # guards against the glob silently finding nothing (e.g. run from another checkout layout)
    assert len(_samples()) >= 12, _samples()


@pytest.mark.parametrize("name", _samples())
def test_sample_bundle_is_complete(name):
    expected = _expected(name)
    assert set(expected) <= EXPECTED_KEYS, set(expected) - EXPECTED_KEYS
    assert {"category", "culprit_ranks"} <= set(expected)
    here = os.path.join(SAMPLES, name)
    assert os.path.isfile(os.path.join(here, "README.md"))
    assert any(os.path.isfile(os.path.join(here, f)) for f in ("make_sample.sh", "make_sample.py"))
    assert os.path.isdir(os.path.join(here, "logs")) and os.listdir(os.path.join(here, "logs"))


@pytest.mark.parametrize("name", _samples())
def test_sample_verdict(name):
    expected = _expected(name)
    verdict = postmortem.analyze(os.path.join(SAMPLES, name, "logs")).verdict
    assert verdict is not None
    got = (verdict.category, sorted(verdict.culprit_ranks), verdict.phase, round(verdict.confidence, 2))
    assert verdict.category == expected["category"], got
    assert set(verdict.culprit_ranks) == set(expected["culprit_ranks"]), got
    if "phase" in expected:
        assert verdict.phase == expected["phase"], got
    if "max_confidence" in expected:
        # a verdict inferred without direct evidence must not claim calibrated certainty
        assert verdict.confidence <= expected["max_confidence"], got


def test_a_healthy_rank_with_its_own_log_counts_as_seen():
    """clean_run: rank 1 prints only a warning no rule reads, but torchrun wrote its attempt_0/1/ logs."""
    a = postmortem.analyze(os.path.join(SAMPLES, "clean_run", "logs"), quiet=True)
    assert a.tables.meta["ranks_seen"] == [0, 1] and a.world_size == 2

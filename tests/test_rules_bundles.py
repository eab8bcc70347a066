"""Every rule has a bundle where it must fire and one where it must stay quiet (tests/rules/<rule-id>/{fire,quiet})."""
from __future__ import annotations

import os

import pytest

import postmortem
from postmortem.rules import all_rules

HERE = os.path.join(os.path.dirname(__file__), "rules")
RULE_IDS = [r.id for r in all_rules()]


def test_every_rule_has_both_bundles():
    missing = [f"{rid}/{kind}" for rid in RULE_IDS for kind in ("fire", "quiet")
               if not os.path.isdir(os.path.join(HERE, rid, kind))]
    assert not missing, f"rules without a fire/quiet bundle: {missing}"


def test_no_bundle_for_an_unknown_rule():
    dirs = {d for d in os.listdir(HERE) if os.path.isdir(os.path.join(HERE, d))}
    assert sorted(dirs - set(RULE_IDS)) == []


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_rule_fires_on_its_positive_bundle(rule_id):
    path = os.path.join(HERE, rule_id, "fire")
    if not os.path.isdir(path):
        pytest.fail(f"no fire bundle for {rule_id}")
    fired = [f.rule for f in postmortem.analyze(path).finding_list]
    assert rule_id in fired, f"{rule_id} did not fire; findings: {fired}"


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_rule_stays_quiet_on_its_negative_bundle(rule_id):
    path = os.path.join(HERE, rule_id, "quiet")
    if not os.path.isdir(path):
        pytest.fail(f"no quiet bundle for {rule_id}")
    fired = [f.rule for f in postmortem.analyze(path).finding_list]
    assert rule_id not in fired, f"{rule_id} fired on its quiet bundle: {fired}"


def test_rule_metadata_complete():
    for r in all_rules():
        assert r.title and r.description and r.remediation and r.category and r.severity, r.id

"""Fusion across inputs: flight recorder + stacks + logs on one rank; kernel kills joined to ranks; watchdog counters."""
from __future__ import annotations

import os

import postmortem
from postmortem.rules import facts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures", "fusion")


def test_hung_rank_stacks_and_flight_recorder_agree():
    a = postmortem.analyze(os.path.join(ROOT, "samples", "hung_rank_pyspy", "logs"))
    root = a.finding_list[0]
    assert root.culprit_ranks == [3] and "encoder_forward" in root.explanation
    assert "flight recorder" in root.explanation
    texts = " ".join(e.text for e in root.evidence)
    assert "flight recorder" in texts and "compute" in texts


def test_kernel_kill_joined_to_rank():
    a = postmortem.analyze(os.path.join(FIX, "oom_kill"))
    assert a.verdict.category == "host_oom" and a.verdict.culprit_ranks == [1]


def test_watchdog_counters_name_the_lagging_rank_without_flight_recorder():
    a = postmortem.analyze(os.path.join(FIX, "watchdog"))
    ranks, why, _ = facts.laggards(a.tables)
    assert ranks == [2] and "7699" in why
    assert 2 in a.verdict.culprit_ranks

"""Stack-based hang rules on real dumps taken by `postmortem collect` of a CPU torchrun gloo job."""
from __future__ import annotations

import os

import postmortem

HERE = os.path.join(os.path.dirname(__file__), "fixtures", "multi_dump")


def test_latest_dump_round_wins_and_launcher_is_ignored():
    # Two dump rounds: a startup one (the launcher importing torch) and the stall one (rank 1 in load_next_shard).
    v = postmortem.analyze(HERE).verdict
    assert v.category == "straggler" and v.culprit_ranks == [1]
    assert "load_next_shard" in v.summary


def test_collect_manifest_is_read_and_gaps_know_what_was_enabled():
    a = postmortem.analyze(HERE)
    kinds = dict(zip(a.tables.sources["source"], a.tables.sources["kind"]))
    assert kinds["n0/manifest.json"] == "collect_manifest"
    exits = a.tables.events[a.tables.events["details"].map(lambda x: x.get("format") == "collect-manifest")]
    assert list(exits["details"].map(lambda x: x["code"])) == ["1"]
    fr = [g for g in a.evidence_gaps if g["missing"] == "flight-recorder traces"]
    assert fr and "enabled" in fr[0]["why"]

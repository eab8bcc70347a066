"""The flight-recorder rule on real 16-rank NCCL dumps with injected faults (tests/fixtures/fr_nvrx), and on
transforms of them that model other faults and dump shapes (tests/fr_transforms.py says what each models)."""
from __future__ import annotations

import os
import shutil

import pytest

import postmortem
from fr_transforms import (CASES, NVRX, drop, load_case, relabel, strip_entries, swap_halves, swap_pairs,
                           write)

RULE = "flight-recorder-first-pending"
ACCEPTED = {"gpu_error_1st": {"straggler", "gpu_hardware", "nccl_error", "collective_timeout"},
            "lock_gil_1st": {"straggler", "collective_timeout"}}


def _fr(a):
    return next(f for f in a.finding_list if f.rule == RULE)


@pytest.mark.parametrize("name", sorted(CASES))
def test_real_capture_names_exactly_the_injected_ranks(name):
    a = postmortem.analyze(os.path.join(NVRX, name), quiet=True)
    assert a.verdict.rule == RULE
    assert sorted(a.verdict.culprit_ranks) == CASES[name]
    assert a.verdict.category in ACCEPTED[name]
    f = _fr(a)
    # What each culprit did, with the dump entries as evidence.
    for r in CASES[name]:
        assert f"rank {r} " in f.title or f"rank {r} " in f.explanation
        assert any(e.rank == r and e.source == f"_dump_{r}" for e in f.evidence)
    if name == "lock_gil_1st":  # the host stopped issuing: lower last-enqueued, nothing pending
        assert "stopped enqueuing at #88683 in pg 37" in f.explanation or "stopped enqueuing" in f.title
        assert not any("never completed" in e.text for e in f.evidence)
    else:  # the GPU stopped: collectives a peer completed stay pending on the culprit
        assert "never completed" in f.explanation and "dump entry" in " ".join(e.text for e in f.evidence)


@pytest.mark.parametrize("name", sorted(CASES))
def test_verdict_comes_from_the_dumps_not_the_injection_log(tmp_path, name):
    """fault_injection.log is the label: removing it, or making it lie, changes nothing."""
    base = postmortem.analyze(os.path.join(NVRX, name), quiet=True)
    without = tmp_path / "without"
    shutil.copytree(os.path.join(NVRX, name), without)
    (without / "fault_injection.log").unlink()
    lying = tmp_path / "lying"
    shutil.copytree(os.path.join(NVRX, name), lying)
    (lying / "fault_injection.log").write_text("Fault ranks: [0, 1]\nRank 0, fault_type: SIGKILL\n")
    for folder in (without, lying):
        a = postmortem.analyze(str(folder), quiet=True)
        assert (a.verdict.category, a.verdict.culprit_ranks, a.verdict.confidence) == \
            (base.verdict.category, base.verdict.culprit_ranks, base.verdict.confidence)
        assert _fr(a).title == _fr(base).title


def _perm(p, ranks):
    return sorted(p[r] for r in ranks)


TRANSFORMS = [
    # (id, case, transform, expected culprits, text the finding must hold)
    ("json", "gpu_error_1st", lambda d: d, [12, 14], "never completed"),
    ("strip-entries", "gpu_error_1st", strip_entries, [12, 14], "never completed"),
    ("strip-entries", "lock_gil_1st", strip_entries, [9, 14], "stopped enqueuing"),
    ("sigkill-both", "lock_gil_1st", lambda d: drop(d, [9, 14]), [9, 14], "left no dump"),
    ("sigkill-both", "gpu_error_1st", lambda d: drop(d, [12, 14]), [12, 14], "left no dump"),
    ("sigkill-one", "lock_gil_1st", lambda d: drop(d, [9]), [9, 14], "left no dump"),
    ("sigkill-one", "gpu_error_1st", lambda d: drop(d, [14]), [12, 14], "left no dump"),
    ("lost-bystander-dump", "lock_gil_1st", lambda d: drop(d, [3]), [9, 14], "stopped enqueuing"),
    ("lost-bystander-dump", "lock_gil_1st", lambda d: drop(d, [13]), [9, 14], "stopped enqueuing"),
    ("lost-bystander-dump", "gpu_error_1st", lambda d: drop(d, [13]), [12, 14], "never completed"),
    ("other-ranks", "gpu_error_1st", lambda d: relabel(d, swap_pairs()), _perm(swap_pairs(), [12, 14]),
     "never completed"),
    ("other-ranks", "lock_gil_1st", lambda d: relabel(d, swap_pairs()), _perm(swap_pairs(), [9, 14]),
     "stopped enqueuing"),
    ("other-stage", "lock_gil_1st", lambda d: relabel(d, swap_halves()), _perm(swap_halves(), [9, 14]),
     "stopped enqueuing"),
    ("other-stage-stripped", "lock_gil_1st", lambda d: strip_entries(relabel(d, swap_halves())),
     _perm(swap_halves(), [9, 14]), "stopped enqueuing"),
    ("other-ranks-sigkill", "gpu_error_1st", lambda d: drop(relabel(d, swap_pairs()), [13, 15]), [13, 15],
     "left no dump"),
]


@pytest.mark.parametrize("tid,name,transform,expected,text", TRANSFORMS,
                         ids=[f"{t[0]}-{t[1]}-{'-'.join(map(str, t[3]))}" for t in TRANSFORMS])
def test_transformed_dumps(tmp_path, tid, name, transform, expected, text):
    a = postmortem.analyze(write(tmp_path, transform(load_case(name)), as_json=tid == "json"), quiet=True)
    assert a.verdict.rule == RULE
    assert sorted(a.verdict.culprit_ranks) == expected, _fr(a).title
    assert text in _fr(a).explanation
    assert 0.5 <= a.verdict.confidence < 0.9


def test_no_finding_when_every_rank_completed_what_it_issued(tmp_path):
    """The lock_gil job as it stood before the fault: what each rank had completed is all it had enqueued (pending
    entries gone, last enqueued = last completed), so nobody waits on anybody."""
    dumps = load_case("lock_gil_1st")
    for d in dumps.values():
        d["entries"] = []
        for st in d["pg_status"].values():
            st["last_enqueued_collective"] = st["last_completed_collective"]
    a = postmortem.analyze(write(tmp_path, dumps), quiet=True)
    assert not any(f.rule == RULE for f in a.finding_list)


def test_a_rank_whose_dump_lost_its_entries_still_counts(tmp_path):
    """Only the culprits' dumps without entries (written with includeCollectives=False): their counters say it."""
    dumps = load_case("gpu_error_1st")
    stripped = strip_entries({r: dumps[r] for r in (12, 14)})
    a = postmortem.analyze(write(tmp_path, {**dumps, **stripped}), quiet=True)
    assert sorted(a.verdict.culprit_ranks) == [12, 14]

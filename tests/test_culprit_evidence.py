"""Issue 31: the culprit from its own evidence, on real runs of the fault lab (benchmarks/lab/cases, torch 2.13
CPU, gloo): the library's named ranks (ranks.named_ranks), the call-site divergence and the announced branch
(ranks.sequences), odd per-rank data counts under a size mismatch (ranks.counts), the rank's own last words
(ranks.last_words), a DataLoader worker's own exception (ranks.worker_errors). Each mechanism has a case where it
must name the culprit and one where it must stay quiet."""
from __future__ import annotations

import os
from types import SimpleNamespace

import pandas as pd
import pytest

import postmortem
from postmortem.ranks import counts, last_words, named_ranks, sequences, worker_errors
from postmortem.verdict.decide import LEND_STRENGTH
from postmortem.verdict.findings import Evidence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = os.path.join(ROOT, "benchmarks", "lab", "cases")


def _analyze(name: str):
    path = os.path.join(CASES, name)
    if not os.path.isdir(path):
        pytest.skip(f"lab case {name} not present")
    return postmortem.analyze(path, jobs=1, quiet=True)


def _cited(a) -> bool:
    """The verdict cites a line of a culprit rank."""
    return any(e.rank in a.verdict.culprit_ranks for e in a.verdict.evidence)


# ---- named ranks: torch's monitored_barrier says which rank never arrived

def test_monitored_barrier_names_the_rank_that_never_arrived():
    a = _analyze("straggler__monitored-barrier-slow-torchrun-tee-4r-1")
    named = named_ranks.named_absent(a.tables)
    assert named is not None and named.ranks == [3] and named.timeout_s is not None
    assert a.tables.meta["culprits"].mechanism == "named-absent"
    assert (a.verdict.category, a.verdict.culprit_ranks) == ("straggler", [3])
    assert "failed to pass monitoredBarrier" in a.verdict.why and _cited(a)


def test_the_rank_that_only_reached_the_barrier_late_is_not_elsewhere():
    # slurm: the slow rank reached monitored_barrier after rank 0 gave up (it saw the connection close there)
    a = _analyze("straggler__monitored-barrier-slow-slurm-4r-1")
    assert a.tables.meta["culprits"].mechanism == "named-absent"
    assert (a.verdict.category, a.verdict.culprit_ranks) == ("straggler", [1])


def test_a_peer_error_of_monitored_barrier_names_no_one():
    events = pd.DataFrame({
        "kind": ["collective_error"], "rank": pd.array([1], dtype="Int64"), "details": [{}], "source": ["c.log"],
        "line": pd.array([3], dtype="Int64"),
        "message": ["RuntimeError: Rank 1 successfully reached monitoredBarrier, but received errors while waiting "
                    "for send/recv from rank 0. Please check rank 0 logs for faulty rank."]})
    assert named_ranks.named_absent(SimpleNamespace(events=events)) is None


# ---- call sites and the culprit's announced branch

def test_order_and_parting_of_call_paths():
    a = (("train.py", "<module>", 104), ("train.py", "main", 94), ("train.py", "allreduce_", 53))
    b = (("train.py", "<module>", 104), ("train.py", "main", 82), ("train.py", "allreduce_", 53))
    assert sequences.order(a, b) == 1 and sequences.order(b, a) == -1
    assert sequences.parting(a, b) == ("allreduce_ <- main (train.py:94)", "allreduce_ <- main (train.py:82)")
    other = (("train.py", "<module>", 104), ("eval.py", "run", 3))
    assert sequences.order(a, other) == 0  # parting in different functions: no order


def test_the_rank_that_said_it_skipped_is_the_culprit_not_its_waiting_partner():
    a = _analyze("barrier_skew__subgroup-skip-torchrun-tee-6r-1")
    c = a.tables.meta["culprits"]
    assert (c.mechanism, c.ranks) == ("announced-divergence", [5])
    assert (a.verdict.category, a.verdict.culprit_ranks) == ("barrier_skew", [5])
    assert "skipping head loss" in a.verdict.why and _cited(a)


def test_mirrored_call_sites_alone_are_never_lent_to_another_finding():
    # two ranks, each at the other's branch of an if/else: the line order does not say which one diverged
    # (a real lab run kept as a fixture: the lab draws >= 3 ranks for this mechanism, where a culprit can be named)
    a = postmortem.analyze(os.path.join(ROOT, "tests", "fixtures", "mirror", "broadcast-vs-allreduce-spawn-2r"),
                           jobs=1, quiet=True)
    c = a.tables.meta["culprits"]
    assert c.mechanism != "ahead-of-peers" or c.strength < LEND_STRENGTH
    # the issue asks for a hedge where the evidence cannot say which side differs: no culprit, below 0.8, and the
    # verdict says the two ranks mirror each other
    assert a.verdict.category == "barrier_skew"
    assert a.verdict.culprit_ranks in ([], [1]) and a.verdict.confidence < 0.8


# ---- sizes: the one rank whose data count differs

def test_odd_count_names_the_rank_whose_tensor_was_longer_not_the_receiver_that_aborted():
    a = _analyze("barrier_skew__allgather-size-mismatch-torchrun-tee-5r-1")
    odd = counts.odd_count(a.tables)
    assert odd is not None and (odd.rank, odd.count, odd.usual) == (3, 257, 256)
    assert (a.verdict.category, a.verdict.culprit_ranks) == ("barrier_skew", [3])
    assert "257 examples" in a.verdict.why and _cited(a)


def test_two_ranks_have_no_odd_count():
    a = _analyze("barrier_skew__uneven-shards-jsonl-2r-1")
    assert counts.odd_count(a.tables) is None




# ---- the culprit's own last words

@pytest.mark.parametrize("line,want", [
    ("2026-11-28 21:04:21,113 ERROR rank 0: data check failed: empty batch at step 8 (shard 0); exiting", 2),
    ("ERROR trainer: data check failed: empty batch at step 14 (shard 1)", 1),
    ("[rank0]:[E1127 04:58:48.995720187 ProcessGroupGloo.cpp:2901] [Rank 0]: Rank 3 failed to pass monitoredBarrier "
     "in 30000 ms", 0),
    ("INFO rank 0: step 3/16 loss 0.0337", 0),
    ("RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer", 0),
])
def test_what_counts_as_a_rank_s_own_last_words(line, want):
    assert last_words._said(line) == want


def test_a_rank_that_logged_why_and_exited_ends_exited_and_the_verdict_quotes_it():
    a = _analyze("rank_crash__log-then-exit-torchrun-tee-2r-1")
    row = a.ranks.set_index("rank").loc[0]
    assert (row["end"], row["end_cause"]) == ("exited", "root")
    assert "data check failed: empty batch" in row["end_detail"]
    v = a.verdict
    assert (v.category, v.culprit_ranks) == ("rank_crash", [0])
    assert "data check failed" in v.summary and "data check failed" in v.why and _cited(a)
    assert "faulthandler" not in v.fix.lower() and "RuntimeError" not in v.summary


# ---- a DataLoader worker's own exception

@pytest.mark.parametrize("name,frame", [("rank_crash__collate-keyerror-torchrun-console-8r-1", "collate_records"),
                                        ("rank_crash__getitem-keyerror-torchrun-tee-5r-1", "__getitem__")])
def test_a_data_code_exception_in_a_worker_is_the_code_at_its_frame_not_a_dead_worker(name, frame):
    a = _analyze(name)
    v = a.verdict
    assert frame in v.why and frame in v.fix
    assert "OOM" not in v.fix and "dmesg" not in v.fix and "died" not in v.summary
    dl = a.tables.events[a.tables.events["kind"] == "dataloader"].iloc[0].to_dict()
    err = worker_errors.worker_error(a.tables, dl)
    assert err is not None and err.exc_type == "KeyError" and frame in err.where


def test_a_killed_worker_has_no_user_exception():
    a = _analyze("dataloader_failure__dl-worker-oomkill-jsonl-2r-1")
    dl = a.tables.events[a.tables.events["kind"] == "dataloader"]
    assert all(worker_errors.worker_error(a.tables, r) is None for r in dl.to_dict("records"))


def test_evidence_dataclass_is_shared():
    assert Evidence("a", 1, 0, "x").rank == 0


def _citations():
    import sys
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import culprit_citations
    return culprit_citations


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(os.path.join(ROOT, "samples"))
                                        if os.path.isfile(os.path.join(ROOT, "samples", n, "expected.json"))))
def test_a_sample_verdict_rests_on_its_culprits_own_line(name):
    """Every bundled sample whose verdict names culprits cites a line of a culprit rank, and its sentence gives no
    victim's error (a rank that only waited or lost its peer) as the culprit's (benchmarks/culprit_citations.py runs
    the same check over the lab and the shared re-runs)."""
    r = _citations().check(os.path.join(ROOT, "samples", name))
    assert r["cites_culprit"], r
    assert r["victim_error_in_summary"] is None, r


def test_a_mirror_of_two_ranks_is_broken_by_the_op_the_group_never_issued_before():
    """Real run (torchrun console, 2 ranks, flight recorder): rank 0 skipped a NaN step, so at entry #16 it waits in
    the barrier after the loop while rank 1 waits in the loop's all_reduce. No majority says who differs; the
    barrier is an op this group never issued before, the all_reduce the one it issued fifteen times: rank 0 left
    the common path."""
    from postmortem.ranks.fr_match import match_collectives
    case = os.path.join(ROOT, "benchmarks", "lab", "cases", "nan_inf__nan-skip-desync-torchrun-console-2r-1")
    if not os.path.isdir(case):
        pytest.skip("lab case not present")
    a = postmortem.analyze(case, quiet=True)
    coll = a.tables.collectives
    div = match_collectives(coll[coll["line"].isna()]).first_divergence
    assert (div.kind, div.ranks, div.op) == ("op", (0,), "gloo:barrier")
    assert a.verdict.culprit_ranks == [0]


def test_a_culprit_that_left_no_line_is_counted_apart_not_passed():
    """Rank 0's stdout went into a stalled pipe under `mpirun --tag-output`: no line of rank 0 exists anywhere, so
    the citation check has nothing to hold the verdict to (counted apart); a culprit that printed is held to it."""
    silent = os.path.join(CASES, "logging_blocking__stdout-pipe-full-mpirun-tagged-3r-1")
    spoke = os.path.join(CASES, "barrier_skew__broadcast-vs-allreduce-spawn-3r-1")
    if not (os.path.isdir(silent) and os.path.isdir(spoke)):
        pytest.skip("lab cases not present")
    r = _citations().check(silent)
    assert r["culprits"] == [0] and r["culprit_lines"] == 0
    r = _citations().check(spoke)
    assert r["culprits"] == [1] and r["culprit_lines"] > 0 and r["cites_culprit"], r

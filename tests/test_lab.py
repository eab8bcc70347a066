"""The fault lab (benchmarks/lab): every case folder is well formed, the harness's verification rejects runs that
did not do what they were designed to do, and the product's accuracy on a committed subset does not fall below what
it reaches today (LAB_SUBSET_ACCURACY, raised by whoever improves the product)."""
from __future__ import annotations

import gzip
import json
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAB = os.path.join(ROOT, "benchmarks", "lab")
CASES = os.path.join(LAB, "cases")
sys.path.insert(0, LAB)

import mechs  # noqa: E402
import registry  # noqa: E402
from score import judge_expect  # noqa: E402

# the product's accuracy on SUBSET today (score.py's rule: category and exact culprits); raise it, never lower it
# 17/20 at commit time (misses: pl-watchdog-sigkill-lightning, stdout-pipe-full-torchrun-tee,
# segfault-ctypes-torchrun-tee)
LAB_SUBSET_ACCURACY = 0.85
SUBSET = [  # one or two per launcher, spread over categories
    "rank_crash__keyerror-bad-record-torchrun-tee-4r-1", "rank_crash__segfault-ctypes-torchrun-console-4r-1",
    "rank_crash__abort-torchrun-redirects-2r-1", "rank_crash__valueerror-rank-branch-torchrun-restarts-4r-1",
    "rank_crash__abort-spawn-4r-1", "rank_crash__abort-slurm-2r-1", "dataloader_failure__dl-worker-timeout-jsonl-4r-1",
    "host_oom__watchdog-sigkill-accelerate-3r-1", "host_oom__torch-alloc-fail-collect-2r-1",
    "barrier_skew__uneven-shards-collect-2r-1", "dataloader_failure__dl-worker-oomkill-slurm-4r-1",
    "no_failure__max-steps-jsonl-3r-1", "straggler__slow-ckpt-write-spawn-5r-1",
    "checkpoint_corruption__truncated-resume-rank0-slurm-4r-1", "rank_crash__pl-keyerror-bad-record-lightning-3r-1",
    "host_oom__hf-watchdog-sigkill-hf-trainer-3r-1", "straggler__fifo-block-slurm-8r-1",
    "host_oom__pl-watchdog-sigkill-lightning-4r-1", "logging_blocking__stdout-pipe-full-torchrun-tee-2r-1",
    "rank_crash__segfault-ctypes-torchrun-tee-2r-1",
]
NAMES = sorted(d for d in os.listdir(CASES) if os.path.isdir(os.path.join(CASES, d))) if os.path.isdir(CASES) else []


def test_lab_has_enough_cases_mechanisms_and_launchers():
    cases = [json.load(open(os.path.join(CASES, n, "case.json"))) for n in NAMES]
    assert len(cases) >= 150  # the floor
    assert len({c["mechanism"] for c in cases}) >= 30
    assert len({c["launcher"] for c in cases}) >= 8


@pytest.mark.parametrize("name", NAMES)
def test_case_folder_is_well_formed(name):
    path = os.path.join(CASES, name)
    case = json.load(open(os.path.join(path, "case.json"), encoding="utf-8"))
    assert {"source", "class", "root_cause", "expect", "script", "launcher", "world_size", "seed", "params"} <= set(case)
    assert re.fullmatch(rf"{case['class']}__{re.escape(case['mechanism'])}-{case['launcher']}-{case['world_size']}r-\d+",
                        name), name
    exp = case["expect"]
    assert exp["categories"] and set(exp["categories"]) <= mechs.CATEGORIES
    assert all(isinstance(r, int) and 0 <= r < case["world_size"] for r in exp["culprit_ranks"])
    assert os.path.isfile(os.path.join(ROOT, case["script"]))
    assert case["mechanism"] in {mm.name for mm in registry.MECHS}
    for dirpath, _, files in os.walk(path):
        for f in files:
            assert not f.endswith((".py", ".md", ".sh")), f"no scripts or READMEs inside a case: {f}"
            full = os.path.join(dirpath, f)
            assert f.endswith(".gz") or os.path.getsize(full) <= 64 * 1024, f"{full} should be gzipped"


def test_lab_stays_small():
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(CASES) for f in fs)
    assert total < 25 * 2 ** 20


def test_no_log_line_announces_the_fault():
    # the harness's words, and the params a traceback's source line could show (the scripts keep them off such lines)
    words = re.compile(rb"inject|fault lab|side channel|LAB_PARAMS|LAB_SIDE|culprit|pl_mech|hf_mech", re.I)
    for dirpath, _, files in os.walk(CASES):
        for f in files:
            if f == "case.json":
                continue
            opener = gzip.open if f.endswith(".gz") else open
            with opener(os.path.join(dirpath, f), "rb") as fh:
                assert not words.search(fh.read(64 * 2 ** 20)), os.path.join(dirpath, f)


def test_pyspy_dumps_were_taken_during_the_hang():
    # the harness dumps every rank once all are up and the fault has happened (not while ranks still import torch)
    for name in NAMES:
        case = json.load(open(os.path.join(CASES, name, "case.json")))
        obs = case["observed"]
        dumps = [e for e in obs["events"] if e["event"] == "pyspy"]
        if not dumps:
            continue
        faults = [f["t"] for st in obs["ranks"].values() for f in st["faults"] if "t" in f]
        assert faults and dumps[0]["t"] >= min(faults), name
        assert len(dumps[0]["ranks"]) == case["world_size"], name


def test_flight_recorder_dumps_were_taken_during_the_hang():
    # the job's dump thread prints "no progress for Ns after step K": K must not be before the designed fault
    # (a dump during start-up holds only rendezvous collectives and misleads whoever reads it)
    seen = 0
    for name in NAMES:
        path = os.path.join(CASES, name)
        if not os.path.isdir(os.path.join(path, "fr")):
            continue
        case = json.load(open(os.path.join(path, "case.json")))
        fault_steps = [f["step"] for st in case["observed"]["ranks"].values() for f in st["faults"] if "step" in f]
        for dirpath, _, files in os.walk(path):
            for f in files:
                if f == "case.json" or "/fr" in dirpath[len(path):]:
                    continue
                opener = gzip.open if f.endswith(".gz") else open
                with opener(os.path.join(dirpath, f), "rb") as fh:
                    for k in re.findall(rb"no progress for \d+s after step (\d+)", fh.read()):
                        seen += 1
                        assert fault_steps and int(k) >= min(fault_steps), (name, int(k), fault_steps)
    assert seen >= 6  # the issue asks for at least 6 hang runs with FR dumps


def _obs(ends: dict[int, str], faults: dict[int, int] | None = None, rc: int = 1, hang_s: float | None = None):
    faults = faults or {}
    return {"ranks": {str(r): {"started": True, "end": e, "faults": [{"t": 1.0}] * faults.get(r, 0), "nearmiss": 0,
                               **({"exc_t": 15.0 if e.endswith("RuntimeError") else 10.0 + r} if e.startswith("exception") else {})} for r, e in ends.items()},
            "rc": rc, "harness_killed": False, "duration": 20.0, "events": [], "hang_s": hang_s, "attempts": 1}


def test_verify_accepts_a_crash_on_the_culprit_and_rejects_a_run_where_nothing_crashed():
    m = registry.BY_NAME["keyerror-bad-record"] if hasattr(registry, "BY_NAME") else \
        {mm.name: mm for mm in registry.MECHS}["keyerror-bad-record"]
    p = {"pg_timeout": 20}
    assert m.verify(_obs({0: "exception:RuntimeError", 1: "exception:KeyError"}), p, [1], "slurm") is None
    assert m.verify(_obs({0: "ok", 1: "ok"}, rc=0), p, [1], "slurm") is not None
    # the wrong rank crashed first
    assert m.verify(_obs({0: "exception:KeyError", 1: "exception:RuntimeError"}), p, [1], "slurm") is not None


def test_verify_rejects_a_hang_that_did_not_hang():
    m = {mm.name: mm for mm in registry.MECHS}["long-eval"]
    p = {"pg_timeout": 20}
    assert m.verify(_obs({0: "none", 1: "exception:RuntimeError"}, {0: 1}, hang_s=25.0), p, [0], "slurm") is None
    assert m.verify(_obs({0: "none", 1: "exception:RuntimeError"}, {0: 1}, hang_s=3.0), p, [0], "slurm") is not None


def test_verify_clean_needs_every_rank_to_finish_and_the_near_misses():
    m = {mm.name: mm for mm in registry.MECHS}["max-steps"]
    ok = _obs({0: "ok", 1: "ok"}, rc=0)
    ok["ranks"]["1"]["nearmiss"] = 1
    assert m.verify(ok, {}, [], "slurm") is None
    assert m.verify(_obs({0: "ok", 1: "ok"}, rc=0), {}, [], "slurm") is not None  # no near miss happened
    assert m.verify(_obs({0: "ok", 1: "exception:RuntimeError"}), {}, [], "slurm") is not None


def test_product_on_the_subset_reaches_the_recorded_accuracy():
    if not SUBSET:
        pytest.skip("no subset")
    import postmortem
    right = 0
    for name in SUBSET:
        path = os.path.join(CASES, name)
        expect = json.load(open(os.path.join(path, "case.json")))["expect"]
        a = postmortem.analyze(path, quiet=True)
        v = a.verdict
        result = {"verdict": {"category": v.category, "phase": v.phase, "confidence": v.confidence,
                              "culprit_ranks": list(v.culprit_ranks)},
                  "evidence_gaps": list(a.evidence_gaps) if a.evidence_gaps is not None else []}
        right += judge_expect(expect, result)[0]
    assert right / len(SUBSET) >= LAB_SUBSET_ACCURACY


def test_slurm_ended_the_job_stopped_cases():
    # a job_stopped case (Slurm's time limit or scancel on a healthy run) and a hang that Slurm's time limit ended are
    # labelled from Slurm's own record of the job (scontrol), not from the logs: TIMEOUT / CANCELLED must be there
    seen = 0
    for name in NAMES:
        case = json.load(open(os.path.join(CASES, name, "case.json")))
        want = case["params"].get("stop_state")
        if not want:
            continue
        seen += 1
        states = [e.get("state") for e in case["observed"]["events"] if e["event"] == "slurm_job"]
        assert want in states, (name, states)
        if case["class"] == "job_stopped":
            assert case["expect"] == {"categories": ["job_stopped"], "culprit_ranks": []}, name
            assert all(st["end"] == "none" and not st["faults"] for st in case["observed"]["ranks"].values()), name
    assert seen == 0 or seen >= 8


def test_verify_stopped_wants_slurms_state_and_no_rank_ending_itself():
    m = {mm.name: mm for mm in registry.MECHS}["slurm-time-limit"]
    p = {"stop_state": "TIMEOUT", "pg_timeout": 30}
    ok = _obs({0: "none", 1: "none"}, rc=1)
    ok["events"] = [{"event": "slurm_job", "state": "TIMEOUT"}]
    assert m.verify(ok, p, [], "srun-label") is None
    cancelled = dict(ok, events=[{"event": "slurm_job", "state": "CANCELLED"}])
    assert m.verify(cancelled, p, [], "srun-label") is not None  # scancel is not the time limit
    raised = _obs({0: "none", 1: "exception:RuntimeError"}, rc=1)
    raised["events"] = ok["events"]
    assert m.verify(raised, p, [], "srun-label") is not None  # a rank ended by itself: not a healthy job cut

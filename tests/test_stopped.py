"""Jobs ended from outside (postmortem/rules/stopped.py, parsers/stop_formats.py) on real Slurm runs from the fault
lab (tests/fixtures/stopped) and torchrun's captured SIGTERM: the reason, the hosts, no culprit, and a hang that the
time limit then ended left to the hang's rules."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

import postmortem
from postmortem.parsers import formats as fmts
from postmortem.parsers import stop_formats
from postmortem.rules.stopped import progress_gap, stop_reason

HERE = Path(__file__).parent
FIX = HERE / "fixtures" / "stopped"
CAPTURED = Path("/work/shared/captured")


def _stop_findings(a):
    return [f for f in a.finding_list if f.category == "job_stopped"]


def test_time_limit_of_a_healthy_run_is_no_failure_of_the_code():
    a = postmortem.analyze(str(FIX / "slurm_time_limit_srun_label"))
    v = a.verdict
    assert (v.category, v.reason, v.culprit_ranks, v.step) == ("job_stopped", "time_limit", [], 198)
    # the lines carry no times: nothing shows how long before the limit the last step was, so not sure
    assert 0.6 <= v.confidence < 0.8
    assert "time limit" in v.summary and "did not fail" in v.summary
    assert "on vm" in a.finding_list[0].explanation                    # the host slurmstepd named
    d = json.loads(a.to_json())
    assert d["verdict"]["reason"] == "time_limit" and d["findings"][0]["reason"] == "time_limit"


def test_scancel_of_per_task_files_is_a_cancellation():
    a = postmortem.analyze(str(FIX / "slurm_scancel_sbatch_pertask"))
    assert (a.verdict.category, a.verdict.reason, a.verdict.culprit_ranks) == ("job_stopped", "cancelled", [])
    ev = a.tables.events
    stops = ev[ev["kind"] == "job_stopped"]
    # the batch's own file (JOB 15) and each task's file (STEP 15.0) say it
    assert set(stops["source"]) >= {"slurm-15.out", "job_15_0.out"}
    assert set(stops["details"].map(lambda d: d["entity"])) == {"JOB", "STEP"}
    tasks = ev[ev["kind"] == "task_signal"]
    assert tasks["details"].map(lambda d: (d["tasks"], d["signame"])).tolist() == [("0-1", "Terminated")]


def test_a_hang_that_the_time_limit_ended_is_the_hang():
    a = postmortem.analyze(str(FIX / "slurm_time_limit_after_hang"))
    assert (a.verdict.category, a.verdict.culprit_ranks) == ("straggler", [0])
    stop = _stop_findings(a)
    assert stop and stop[0].reason == "time_limit" and stop[0].confidence <= 0.3


def test_without_stacks_the_hang_still_hedges_the_stop(tmp_path):
    shutil.copy(FIX / "slurm_time_limit_after_hang" / "console.log", tmp_path / "console.log")
    a = postmortem.analyze(str(tmp_path))
    stop = _stop_findings(a)
    # rank 0 announced an evaluation while rank 1 went on training: not a healthy job when the limit came
    assert stop and stop[0].confidence < 0.5 and "not healthy" in stop[0].explanation


def test_srun_ending_a_step_after_a_task_failed_is_no_stop():
    a = postmortem.analyze(str(HERE / "rules" / "job-stopped-from-outside" / "quiet"))
    assert a.verdict.category == "rank_crash" and a.verdict.culprit_ranks == [0]
    assert not _stop_findings(a)
    assert a.verdict.reason is None and json.loads(a.to_json())["verdict"]["reason"] is None


@pytest.mark.skipif(not CAPTURED.is_dir(), reason="needs /work/shared/captured")
def test_torchrun_agent_sigterm_names_no_sender(tmp_path):
    shutil.copy(CAPTURED / "torchrun_hang_sigterm_loglevel_info.txt", tmp_path / "console.log")
    a = postmortem.analyze(str(tmp_path))
    assert (a.verdict.category, a.verdict.reason) == ("job_stopped", "terminated")
    assert a.verdict.confidence <= 0.6                                  # who sent it is not in the log
    assert "do not say who sent it" in a.finding_list[0].explanation


def _sample_reason(name: str, text: str) -> str | None:
    hits = [(f, m) for f, m in fmts.match_line(text) if f.name == name]
    assert hits, text
    f, m = hits[0]
    return stop_reason(f.kind, {**f.groupdict(m), "format": f.name})


def test_every_stop_format_sample_gives_a_reason():
    for d in stop_formats.DEFS:
        for text, _ in d["samples"]:
            if d["kind"] in ("job_stopped", "agent_stopped"):
                assert _sample_reason(d["name"], text) in (
                    "time_limit", "preemption", "cancelled", "node_failure", "eviction", "requeued", "terminated")


@pytest.mark.parametrize("name,text,reason", [
    ("slurm-cancelled", "slurmstepd: error: *** JOB 4242 ON gpu-node-03 CANCELLED AT 2024-03-01T10:00:00 DUE TO "
                        "NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***", "node_failure"),
    ("slurm-cancelled", "slurmstepd: error: *** JOB 99 CANCELLED AT 2014-05-01T08:00:00 DUE TO PREEMPTION ***",
     "preemption"),
    ("slurm-cancelled", "slurmstepd: error: *** STEP 77.1 ON n1 CANCELLED AT 2025-06-01T08:00:00 DUE to SIGNAL "
                        "Terminated ***", "cancelled"),
    ("slurm-cancelled", "slurmstepd: error: *** STEP 77.1 ON n1 CANCELLED AT 2025-06-01T08:00:00 DUE TO TASK "
                        "FAILURE ***", None),                          # srun's kill after a failed task
    ("k8s-stopped", "  Normal  Preempted  1m  default-scheduler  Preempted by team-b/big-job on node gpu-07",
     "preemption"),
    ("k8s-stopped", "Reason:       Evicted", "eviction"),
    ("launcher-stop-signal", "[rank: 0] Received SIGTERM: 15", "terminated"),
    ("launcher-stop-signal", "W0101 00:00:00.000000 1 torch/distributed/elastic/agent/server/api.py:753] Received "
                             "2 death signal, shutting down workers", "cancelled"),
])
def test_stop_reasons_from_the_sources_wordings(name, text, reason):
    assert _sample_reason(name, text) == reason


def _steps(times: list[str]) -> SimpleNamespace:
    ts = pd.to_datetime(times, utc=True)
    return SimpleNamespace(steps=pd.DataFrame({"phase": ["train"] * len(ts), "ts": ts, "step": range(len(ts))}))


def test_progress_gap_says_a_long_silence_before_the_stop():
    every_minute = [f"2024-01-01 10:{m:02d}:00" for m in range(10)]
    stop = pd.Timestamp("2024-01-01 13:00:00", tz="UTC")                  # 3 h after the last step
    gap, normal = progress_gap(_steps(every_minute), stop)
    assert gap > normal
    gap, normal = progress_gap(_steps(every_minute), pd.Timestamp("2024-01-01 10:09:30", tz="UTC"))
    assert gap <= normal                                                   # training right up to the stop
    assert progress_gap(_steps(every_minute), None) is None                # no stop time: nothing to compare
    assert progress_gap(_steps(every_minute), pd.Timestamp("2023-01-01", tz="UTC")) is None  # clocks disagree

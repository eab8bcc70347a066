"""Recurrence: the verdict's root again in a later torchrun attempt or a resubmitted run, and whether the job got
further in between (postmortem.verdict.recurrence, postmortem.verdict.history), on the lab's real torchrun-restarts cases and on two
real run folders given together."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import postmortem
from postmortem.verdict.recurrence import Outcome, compare, progressed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAB = os.path.join(ROOT, "benchmarks", "lab", "cases")
RESTARTS = sorted(d for d in os.listdir(LAB) if "-torchrun-restarts-" in d)


def _lab(name: str) -> str:
    return os.path.join(LAB, name)


# --- pure functions ---------------------------------------------------------------------------------------------

def _o(label, sig, step=None, saved=0, loaded=0, cat=None):
    return Outcome(label, cat or sig.split(":")[0], sig, [], step, saved, loaded)


def test_same_root_without_progress():
    rec = compare("restarts", [_o("attempt 1", "straggler", 6), _o("attempt 2", "straggler", 6)], 0)
    assert rec.same_root and not rec.progressed
    assert "attempt 2 failed the same way (straggler)" in rec.said and "(last step 6, then 6)" in rec.said
    assert "attempt 2" in rec.said_zh and "6" in rec.said_zh


def test_same_root_with_progress_by_steps_or_by_checkpoint():
    assert progressed(_o("a", "x", 10), _o("b", "x", 25))
    assert not progressed(_o("a", "x", 10), _o("b", "x", 10))
    assert progressed(_o("a", "x", saved=1), _o("b", "x", loaded=1))      # no steps: resumed from a checkpoint
    assert not progressed(_o("a", "x"), _o("b", "x", loaded=1))           # loaded, but nothing was saved before


def test_another_root_is_no_recurrence_and_one_run_is_no_history():
    rec = compare("restarts", [_o("attempt 1", "rank_crash: ValueError"), _o("attempt 2", "rank_crash: RuntimeError")], 0)
    assert not rec.same_root and "has not recurred" in rec.said
    assert compare("restarts", [_o("attempt 1", "x")], 0) is None


def test_resubmissions_compare_the_judged_run_with_the_runs_before_it():
    runs = [_o("run 1", "gpu_oom", 2000), _o("run 2", "gpu_oom", 2000), _o("run 3", "gpu_oom", 2000)]
    rec = compare("resubmissions", runs, 2)
    assert rec.same_root and not rec.progressed and "3 runs were given together" in rec.said


# --- the lab's real torchrun restarts ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", RESTARTS)
def test_every_restarts_case_says_what_the_later_attempts_did(name):
    case = json.load(open(os.path.join(_lab(name), "case.json")))
    a = postmortem.analyze(_lab(name), quiet=True)
    rec = a.verdict.next.recurrence
    if case["observed"].get("attempts", 1) < 2:
        assert rec is None
        return
    assert rec is not None and rec["kind"] == "restarts" and rec["runs"][0]["label"] == "attempt 1"
    assert "torchrun ran 2 attempts" in a.verdict.next.why and "torchrun 共运行了 2 次尝试" in a.verdict.next.why_zh


def test_a_straggler_that_came_back_at_the_same_step_recurred_without_progress():
    """long-eval: rank 1 evaluates 2,400 batches after step 6 while rank 0 times out, in both attempts."""
    a = postmortem.analyze(_lab("straggler__long-eval-torchrun-restarts-2r-1"), quiet=True)
    rec = a.verdict.next.recurrence
    assert a.verdict.category == "straggler" and rec["same_root"] and not rec["progressed"]
    assert [r["last_step"] for r in rec["runs"]] == [6, 6]
    assert "attempt 2 failed the same way" in a.verdict.next.why and a.verdict.next.action == "change"
    assert any(e["supports"] == "action" for e in a.verdict.next.evidence)  # attempt 2's own line


def test_a_restart_that_died_of_something_else_is_not_a_recurrence():
    """valueerror-rank-branch: attempt 1 is rank 1's ValueError; attempt 2 dies at init (connect refused)."""
    a = postmortem.analyze(_lab("rank_crash__valueerror-rank-branch-torchrun-restarts-4r-1"), quiet=True)
    rec = a.verdict.next.recurrence
    assert rec["runs"][0]["signature"] == "rank_crash: ValueError" and not rec["same_root"]
    assert "has not recurred" in a.verdict.next.why


# --- resubmissions: two real run folders given together ---------------------------------------------------------

def test_two_runs_of_the_same_job_failing_at_the_same_step():
    """The same HF Trainer job twice (3 ranks): a KeyError on a bad record at step 7 both times."""
    first, second = _lab("rank_crash__hf-keyerror-bad-record-hf-trainer-3r-1"), \
        _lab("rank_crash__hf-keyerror-bad-record-hf-trainer-3r-2")
    a = postmortem.analyze(second, quiet=True, earlier=[first])
    rec = a.verdict.next.recurrence
    assert rec["kind"] == "resubmissions" and rec["same_root"] and not rec["progressed"]
    assert [r["source"] for r in rec["runs"]] == [first, second]
    assert "run 2 failed the same way" in a.verdict.next.why and a.verdict.next.action == "change"
    # the CLI takes the runs oldest first, the last one judged
    out = subprocess.run([sys.executable, "-m", "postmortem.cli", "analyze", first, second, "--format", "json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["verdict"]["next"]["recurrence"]["same_root"] is True


def test_a_resubmission_that_got_further():
    """The same KeyError job under two launchers: 11 steps on the first run, 12 on the next."""
    first, second = _lab("rank_crash__keyerror-bad-record-torchrun-console-4r-1"), \
        _lab("rank_crash__keyerror-bad-record-torchrun-tee-4r-1")
    rec = postmortem.analyze(second, quiet=True, earlier=[first]).verdict.next.recurrence
    steps = [r["last_step"] for r in rec["runs"]]
    assert rec["same_root"] and rec["progressed"] == (steps[1] > steps[0])


def test_a_baseline_that_failed_the_same_way_counts_as_an_earlier_run():
    first, second = _lab("rank_crash__hf-keyerror-bad-record-hf-trainer-3r-1"), \
        _lab("rank_crash__hf-keyerror-bad-record-hf-trainer-3r-2")
    rec = postmortem.analyze(second, quiet=True, baseline=first).verdict.next.recurrence
    assert rec["kind"] == "resubmissions" and rec["same_root"]
    # a baseline that worked is no earlier failure
    clean = _lab("no_failure__hf-max-steps-hf-trainer-3r-1")
    assert postmortem.analyze(second, quiet=True, baseline=clean).verdict.next.recurrence is None

"""The gaps a new user met in their first hour (issue 33), each on real output: collect's stall delay against a short
collective timeout, prose beside the logs, Ctrl-C, the steps table on big logs, the hung sample's lock holder, the
NaN sample's fix, one rank's unambiguous exception, the step chart's culprit, figures and the notebook card, dark
mode, and hygiene (.gitignore, --help)."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import postmortem
from postmortem.collect import stall

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
LAB = ROOT / "benchmarks" / "lab" / "cases"
FIXTURE = Path(__file__).parent / "fixtures" / "collect_hang_20s_timeout"
PY = sys.executable


# --- collect: the stall delay follows the job --------------------------------------------------------------------

def test_the_stated_timeout_is_read_from_the_command_line_or_the_environment():
    assert stall.stated_timeout(["torchrun", "train.py", "--ddp_timeout", "40"], {})[0] == 40
    assert stall.stated_timeout(["python", "pretrain_gpt.py", "--distributed-timeout-minutes=2"], {})[0] == 120
    assert stall.stated_timeout(["deepspeed", "train.py"], {"DEEPSPEED_TIMEOUT": "3"})[0] == 180
    assert stall.stated_timeout(["torchrun", "train.py", "--timeout", "40"], {}) == (None, "")  # not a known flag
    assert (stall.cap_for(20), stall.cap_for(None), stall.cap_for(3600)) == (10, 300, 300)


def test_the_stall_delay_follows_the_jobs_output_rhythm():
    r = stall.Rhythm()
    assert stall.threshold(r.usual(), 300) == 300          # no rhythm yet: the cap
    for _ in range(50):
        r.add(0.1)                                         # a step line every 0.1 s
    assert stall.threshold(r.usual(), 300) == stall.FLOOR  # ten seconds of silence is a stall
    for _ in range(5):
        r.add(40.0)                                        # start-up and a few long pauses do not move it
    assert stall.threshold(r.usual(), 300) == stall.FLOOR
    for _ in range(60):
        r.add(12.0)                                        # a line every 12 s
    assert stall.threshold(r.usual(), 300) == 120
    assert stall.threshold(r.usual(), 20) == 20            # never past the cap (half the job's timeout)
    assert stall.threshold(0.1, 300, floor=40) == 40       # a pause the job came out of raised the floor


def test_an_early_dump_of_a_pause_the_job_came_out_of_is_removed(tmp_path, monkeypatch):
    from postmortem.collect.tee import Activity
    from postmortem.collect.watchdog import StallWatchdog
    dumps = tmp_path / "pyspy" / "20261128T000000000Z"
    dumps.mkdir(parents=True)
    (dumps / "rank0_pid1.txt").write_text("Thread 1 (idle)\n")
    discarded = []
    dog = StallWatchdog(os.getpid(), Activity(), None, str(tmp_path / "pyspy"), None, None, lambda r: None,
                        on_discard=discarded.append)
    record = {"dir": str(dumps), "at": "2026-11-28T00:00:00.000Z"}
    dog.activity.last = time.monotonic() - 1010   # the job's last output, before the silence that was dumped
    dog.early.append((time.monotonic() - 1000, 10.0, record))
    dog._prune()
    assert dumps.exists() and dog.early   # the job printed nothing since: still a hang, kept
    dog.activity.touch(10)                # output resumed, long after the dump
    dog._prune()
    assert not dumps.exists() and discarded == [record] and not dog.early
    assert dog.floor == 20.0  # the job was quiet for 10 s and went on: the next stall needs twice that


def test_the_report_says_no_dump_was_taken_because_the_timeout_came_first():
    """A real run (fixtures/collect_hang_20s_timeout): --stall-after 300 and a 20 s gloo timeout."""
    a = postmortem.analyze(str(FIXTURE / "stall_after_300"), quiet=True)
    gap = next(g for g in a.evidence_gaps if g["missing"] == "py-spy dumps of every rank")
    assert "20 s collective timeout" in gap["why"] and "--stall-after 300" in gap["why"]
    assert "--stall-after 10" in gap["how"] and "USR1" in gap["how"]
    assert a.verdict.culprit_ranks == [1]


def test_with_the_defaults_the_stuck_rank_and_its_frame_are_named():
    """The same job under `postmortem collect` with its defaults (fixtures/collect_hang_20s_timeout): the stall
    delay followed the job's output, so rank 1 was dumped stuck in load_batch before the timeout."""
    a = postmortem.analyze(str(FIXTURE / "stall_after_auto"), quiet=True)
    assert a.verdict.culprit_ranks == [1] and "load_batch (train.py:13)" in a.verdict.summary
    assert not [g for g in a.evidence_gaps if g["missing"] == "py-spy dumps of every rank"]


def _torch_pyspy_or_skip():
    try:
        import torch.distributed  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"torch is not importable ({exc})")
    from postmortem.collect.watchdog import find_pyspy
    if find_pyspy() is None:
        pytest.skip("py-spy is not installed")


def test_a_plain_torchrun_hang_with_a_20s_timeout_under_collect_defaults(tmp_path):
    """As a new user would: `postmortem collect --out DIR -- torchrun ... train.py`, no option, a 20 s timeout set
    in the training code. The culprit rank and its stuck frame are named."""
    _torch_pyspy_or_skip()
    job = ROOT / "tests" / "jobs" / "ddp_stall.py"
    env = {**os.environ, "DDP_STALL_TIMEOUT_S": "20", "OMP_NUM_THREADS": "1"}
    out = tmp_path / "ev"
    r = subprocess.run([PY, "-m", "postmortem.cli", "collect", "--out", str(out), "--", PY, "-m",
                        "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(job)],
                       capture_output=True, text=True, env=env, timeout=240)
    assert r.returncode == 1, r.stderr[-2000:]
    v = postmortem.analyze(str(out), quiet=True).verdict
    assert v.culprit_ranks == [1] and "load_batch" in v.summary, v


# --- prose beside the logs is not evidence ---------------------------------------------------------------------

def test_a_write_up_beside_the_logs_never_changes_the_verdict(tmp_path):
    """NOTES.txt holding an incident write-up (a real one: the OOM sample's README, which quotes its traceback)
    beside a clean run's logs: the verdict is the logs' alone, and the notes are listed as not read."""
    logs = tmp_path / "logs"
    shutil.copytree(SAMPLES / "clean_run" / "logs", logs)
    alone = postmortem.analyze(str(logs), quiet=True).to_dict()["verdict"]
    (logs / "NOTES.txt").write_text((SAMPLES / "sampling_oom_step2000" / "README.md").read_text())
    with_notes = postmortem.analyze(str(logs), quiet=True)
    assert with_notes.to_dict()["verdict"] == alone
    notes = next(s for s in with_notes.sources if s.source == "NOTES.txt")
    assert notes.problem and "prose" in notes.problem


def test_no_real_log_reads_as_prose():
    from postmortem.ingest.discover import not_evidence
    from postmortem.ingest.prose import looks_like_prose
    roots = [SAMPLES, LAB] + [Path(p) for p in ("/work/shared/corpus", "/work/shared/realruns") if os.path.isdir(p)]
    wrongly = []
    for root in roots:
        for path in root.rglob("*"):
            if not path.is_file() or path.name == "case.json" or not_evidence(str(path)) or \
                    path.suffix in (".gz", ".pkl", ".zip", ".json", ".csv"):
                continue
            head = path.read_bytes()[:16384]
            if b"\0" not in head and looks_like_prose(head):
                wrongly.append(str(path))
    assert not wrongly, wrongly[:10]


# --- Ctrl-C -----------------------------------------------------------------------------------------------------

def test_ctrl_c_during_analyze_is_one_line_and_exit_130(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import make_tree
    tree = tmp_path / "tree"
    make_tree.make_tree(str(tree), ranks=64, size=64 * 1024 * 1024, seed=7)
    for delay in (0.5, 2.0):
        p = subprocess.Popen([PY, "-m", "postmortem.cli", "analyze", str(tree), "-j", "2", "-q", "-o",
                              str(tmp_path / "r.html")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        if p.returncode == 0:
            continue  # finished before the signal: nothing to see at this delay
        assert p.returncode == 130 and err == "postmortem: interrupted\n", (delay, p.returncode, err[-1500:])


# --- the steps table -----------------------------------------------------------------------------------------------

def test_every_step_line_can_be_kept_and_the_docs_say_what_is_kept_otherwise(tmp_path):
    # the line shape of a real lab run (`[defaultN]:rank=N step S loss L`), for 100,000 steps
    real = (LAB / "rank_crash__valueerror-rank-branch-torchrun-restarts-4r-1" / "console.log").read_text()
    shape = next(ln for ln in real.splitlines() if re.match(r"\[default0\]:rank=0 step 1 loss", ln))
    assert shape
    log = tmp_path / "rank0.log"
    log.write_text("".join(f"[default0]:rank=0 step {i} loss 0.{i % 97:04d}\n" for i in range(1, 100_001)))
    thinned = postmortem.analyze(str(log), quiet=True).tables.steps
    every = postmortem.analyze(str(log), quiet=True, all_steps=True).tables.steps
    assert len(thinned) < 2000 and len(every) == 100_000
    assert int(thinned["step"].max()) == 100_000  # the last step is always kept
    docs = (ROOT / "docs" / "tables.md").read_text()
    assert "all_steps" in docs and "--all-steps" in (ROOT / "README.md").read_text()


# --- the hung sample names the lock holder; the NaN sample's fix; one rank's exception ------------------------------

def test_the_hung_ranks_lock_holder_is_named():
    a = postmortem.analyze(str(SAMPLES / "hung_rank_pyspy" / "logs"), quiet=True)
    assert "'feature-prefetch' in prefetch_features (train.py:22)" in a.verdict.why
    assert "feature-prefetch" in a.verdict.fix
    assert any("prefetch_features" in e.text for e in a.verdict.evidence[:2])
    # the watchdog thread every rank runs is no suspect
    assert "hang_watchdog" not in a.verdict.why


def test_a_straggler_without_an_odd_thread_names_no_holder():
    from postmortem.verdict.holder import holders
    a = postmortem.analyze(str(FIXTURE / "stall_after_auto"), quiet=True)
    assert a.verdict.category == "straggler" and holders(a.finding_list[0], a.tables.stacks) == []


def test_the_nan_samples_fix_follows_what_its_lines_show():
    a = postmortem.analyze(str(SAMPLES / "nan_loss_divergence" / "logs"), quiet=True)
    assert "first warning" not in a.verdict.fix and "that warning" not in a.verdict.fix
    assert "x10^4 per step" in a.verdict.why and "learning rate (it was 3)" in a.verdict.fix


def test_a_loss_that_does_not_blow_up_is_no_divergence():
    import pandas as pd

    from postmortem.ranks.divergence import divergence
    steps = pd.DataFrame({"rank": [0] * 5, "step": [1, 2, 3, 4, 5], "loss": [2.0, 1.5, 1.4, 1.6, float("nan")],
                          "phase": ["train"] * 5, "source": ["a"] * 5, "line": [1, 2, 3, 4, 5], "lr": [None] * 5})
    assert divergence(steps) is None
    steps["loss"] = [1.0, 1e4, 1e8, 1e12, float("inf")]
    d = divergence(steps)
    assert d is not None and d.exponent == 4 and (d.first_step, d.last_step) == (1, 4)


def test_one_ranks_unambiguous_exception_is_said_with_high_confidence():
    """rank_raises_mid_epoch: rank 2 raises ValueError, its error.json says the same, ranks 0, 1 and 3 lost their
    peer or were stopped by torchrun."""
    a = postmortem.analyze(str(SAMPLES / "rank_raises_mid_epoch" / "logs"), quiet=True)
    v = a.verdict
    assert v.category == "rank_crash" and v.culprit_ranks == [2] and v.confidence >= 0.8
    assert "ValueError raised in load_batch (train.py:16) on rank 2" in v.fix and "same seed" not in v.fix
    assert "error.json" in v.why


def test_an_exception_without_its_error_file_stays_hedged():
    """The lab's valueerror-rank-branch under torchrun restarts: the same kind of crash, no error.json written."""
    a = postmortem.analyze(str(LAB / "rank_crash__valueerror-rank-branch-torchrun-restarts-4r-1"), quiet=True)
    assert a.verdict.category == "rank_crash" and a.verdict.confidence < 0.8


# --- charts and the notebook card -----------------------------------------------------------------------------------

def test_ranks_with_the_same_steps_are_one_line_and_the_culprit_stands_out():
    a = postmortem.analyze(str(SAMPLES / "uneven_batches_barrier" / "logs"), quiet=True)
    ax = a.figures["steps"].axes[0]
    named = {ln.get_label(): ln.get_linewidth() for ln in ax.get_lines() if not ln.get_label().startswith("_")}
    assert named == {"ranks 1-3 (same steps)": 1.0, "rank 0": 2.4}


def test_the_culprit_is_drawn_apart_even_at_the_front():
    from postmortem.reports.figures import _same_steps_once
    series = {0: ([1, 2], [5, 6]), 1: ([1, 2], [5, 6]), 2: ([1, 2], [5, 6])}
    assert set(_same_steps_once(series, {2})) == {(0, 1), 2}


def test_a_missing_chart_says_why():
    a = postmortem.analyze(str(SAMPLES / "wandb_log_blocked" / "logs"), quiet=True)
    with pytest.raises(KeyError) as err:
        a.figures["steps"]
    assert "no 'steps' chart" in str(err.value) and "step lines" in str(err.value)


def test_the_notebook_card_does_not_promise_links_it_does_not_have():
    a = postmortem.analyze(str(SAMPLES / "rank_raises_mid_epoch" / "logs"), quiet=True)
    card = a._repr_html_()
    assert "link to the sources list" not in card and 'href="#src-' not in card
    assert "link to the sources list" in a.to_html(figures=False)


def test_charts_are_dark_in_dark_mode():
    css = (ROOT / "reports" / "templates" / "report.css").read_text()
    dark = css[css.index("@media (prefers-color-scheme:dark)"):]
    dark = dark[:dark.index("}}") + 2]
    rule = re.search(r"\.pm figure img\{([^}]*)\}", dark)
    assert rule and "invert(" in rule.group(1) and "hue-rotate(180deg)" in rule.group(1)
    assert "background:#fff" not in rule.group(1)


# --- hygiene -----------------------------------------------------------------------------------------------------------

def test_the_readmes_report_is_ignored_by_git():
    r = subprocess.run(["git", "check-ignore", "-q", "report.html"], cwd=ROOT)
    assert r.returncode == 0


_MACHINE_PATH = re.compile(r"(?<![\w.$])/(?:work|home|root|tmp|Users|opt|mnt|scratch)/")


def test_no_help_shows_a_path_of_this_machine():
    helps = [["analyze"], ["collect"], ["rules"], []]
    outs = [subprocess.run([PY, "-m", "postmortem.cli", *h, "--help"], capture_output=True, text=True).stdout
            for h in helps]
    scripts = sorted(p for p in list((ROOT / "benchmarks").rglob("*.py")) + list((ROOT / "fuzz").glob("*.py"))
                     if "argparse" in p.read_text(errors="replace") and "__main__" in p.read_text(errors="replace"))
    for script in scripts:
        r = subprocess.run([PY, str(script), "--help"], capture_output=True, text=True, timeout=120, cwd=ROOT)
        if r.returncode == 0:
            outs.append(r.stdout)
    for text in outs:
        assert not _MACHINE_PATH.search(text), _MACHINE_PATH.search(text).group(0) + " in:\n" + text[:2000]

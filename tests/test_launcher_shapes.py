"""Launcher shapes the fault lab added (issue 30): Ray Train's actor prefixes, mpirun's endings, an executed notebook's
outputs and mp.spawn's child traceback printed by the parent. Every input is a real lab run's output."""
from __future__ import annotations

import json
import os

import pytest

from postmortem.parsers import actor_ranks, formats, notebook, spawn_block

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = os.path.join(ROOT, "benchmarks", "lab", "cases")
RAY = os.path.join(CASES, "rank_crash__keyerror-bad-record-ray-train-2r-1")
NOTEBOOK = os.path.join(CASES, "rank_crash__target-out-of-bounds-notebook-5r-1")
MPI_SEGV = os.path.join(CASES, "rank_crash__segfault-ctypes-mpirun-tagged-4r-1")
MPI_ABORT = os.path.join(CASES, "rank_crash__abort-mpirun-plain-4r-1")
MPI_EXIT = os.path.join(CASES, "host_oom__numpy-memoryerror-mpirun-tagged-4r-1")


def _lines(path: str) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


def _expect(case: str) -> dict:
    return json.load(open(os.path.join(case, "case.json")))["expect"]


def _verdict(case: str):
    import postmortem
    return postmortem.analyze(case, quiet=True)


# ---- Ray Train: (RayTrainWorker pid=P, ip=A) prefixes and the worker group's pid -> world_rank listing
def test_ray_listing_maps_worker_pids_to_ranks():
    lines = _lines(os.path.join(RAY, "console.log"))
    listing = [ln for ln in lines if "world_rank=" in ln]
    assert listing, "the real Ray log lists its workers"
    ar = actor_ranks.ActorRanks(lines[:200])
    pids = {int(ln.rsplit("pid=", 1)[1].split(")")[0]) for ln in listing}
    assert set(ar.ranks) == pids and sorted(ar.ranks.values()) == [0, 1]
    worker = next(ln for ln in lines if "(RayTrainWorker pid=" in ln and "KeyError" in ln)
    assert ar.rank_of(worker) == 0
    controller = next(ln for ln in lines if "(TrainController pid=" in ln)
    assert ar.rank_of(controller) is None  # the controller is no worker


def test_ray_scheme_is_off_for_logs_without_actor_prefixes():
    plain = _lines(os.path.join(MPI_SEGV, "console.log"))
    assert actor_ranks.scheme_for(plain[:400]) is None


def test_ray_worker_traceback_is_ranked_and_named_culprit():
    a = _verdict(RAY)
    tb = a.tables.tracebacks
    assert ((tb["exc_type"] == "KeyError") & (tb["rank"] == 0)).any()
    assert a.verdict.category in _expect(RAY)["categories"]
    assert list(a.verdict.culprit_ranks) == _expect(RAY)["culprit_ranks"]


RAY_LONG_EVAL = os.path.join(CASES, "straggler__long-eval-ray-train-6r-1")
RAY_OS_EXIT = os.path.join(CASES, "rank_crash__os-exit-ray-train-5r-1")


def test_ray_deduplicated_lines_are_no_ranks_facts():
    """`rank=5 step 10 loss ... [repeated 59x across cluster] (Ray deduplicates logs ...)` stands for 59 lines of
    several workers: it gives no rank a step, and its traceback lines build no rank's traceback."""
    lines = _lines(os.path.join(RAY_LONG_EVAL, "console.log"))
    grouped = [ln for ln in lines if "across cluster]" in ln]
    assert any("Ray deduplicates logs" in ln for ln in grouped)
    ar = actor_ranks.ActorRanks(lines[:200])
    for ln in grouped:
        info: dict = {}
        cut = ar.note(ln, info)
        assert info.get("ray_dedup") and "rank" not in info and "across cluster" not in cut
    a = _verdict(RAY_LONG_EVAL)
    assert 5 not in set(a.tables.steps["rank"].dropna().astype(int))  # its only step line is a grouped one


def test_ray_error_snippet_header_names_the_ranks():
    assert actor_ranks.snippet_ranks("[Rank 0,4,5 Error Snippet]:") == [0, 4, 5]
    assert actor_ranks.snippet_ranks("[Rank 2, 3 Error Snippet]:") == [2, 3]
    assert actor_ranks.snippet_ranks("see [Rank 0 Error Snippet]: above") is None
    assert actor_ranks.snippet_ranks("Rank 0 finished") is None


@pytest.mark.parametrize("case", [RAY_LONG_EVAL, RAY_OS_EXIT], ids=os.path.basename)
def test_ray_worker_group_error_tells_how_each_rank_ended(case):
    """Ray Train's WorkerGroupError lists the ranks that raised (`[Rank 0,4,5 Error Snippet]:`); the rank it does not
    list is the one that did not fail like the others: the culprit (long evaluation; os._exit without a word)."""
    a = _verdict(case)
    expect = _expect(case)
    snippet_ranks = set(a.tables.tracebacks["rank"].dropna().astype(int))
    assert set(expect["culprit_ranks"]).isdisjoint(snippet_ranks)
    assert a.verdict.category in expect["categories"]
    assert list(a.verdict.culprit_ranks) == expect["culprit_ranks"]


# ---- Open MPI's mpirun endings
@pytest.mark.parametrize("case,rank,signal", [(MPI_SEGV, "2", "11"), (MPI_ABORT, "2", "6")])
def test_mpirun_noticed_line_names_rank_and_signal(case, rank, signal):
    line = next(ln for ln in _lines(os.path.join(case, "console.log")) if ln.startswith("mpirun noticed"))
    hits = [(f, m) for f, m in formats.match_line(line) if f.name == "mpirun-noticed-signal"]
    assert hits
    d = hits[0][0].groupdict(hits[0][1])
    assert d["task"] == rank and d["mpi_signal"] == signal


def test_mpirun_first_nonzero_process_line():
    line = next(ln for ln in _lines(os.path.join(MPI_EXIT, "console.log")) if "Process name:" in ln)
    hits = [(f, m) for f, m in formats.match_line(line) if f.name == "mpirun-first-nonzero"]
    assert hits and hits[0][0].groupdict(hits[0][1])["task"] == "0"
    assert not [f for f, _ in formats.match_line("  Process name: worker") if f.name == "mpirun-first-nonzero"]


@pytest.mark.parametrize("case", [MPI_SEGV, MPI_ABORT])
def test_mpirun_signal_end_names_the_culprit(case):
    a = _verdict(case)
    assert a.verdict.category in _expect(case)["categories"]
    assert list(a.verdict.culprit_ranks) == _expect(case)["culprit_ranks"]


# ---- executed notebooks
def test_notebook_text_has_the_outputs_without_escapes():
    nb = json.load(open(os.path.join(NOTEBOOK, "train.ipynb")))
    raw = json.dumps(nb)
    assert "\\u001b[" in raw  # IPython coloured the real traceback
    text = notebook.notebook_text(nb)
    assert "\x1b" not in text
    assert "IndexError: Target 5 is out of bounds." in text
    assert "-- Process 4 terminated with the following error:" in text
    assert "[rank 3] step 1/16" in text  # the children's stream output


def test_notebook_text_skips_what_is_not_nbformat():
    assert notebook.notebook_text({"cells": [1, {"outputs": ["x", {"output_type": "stream", "text": 5}]}]}) == ""
    assert notebook.notebook_text([]) == ""


def test_notebook_is_discovered_and_read():
    from postmortem.ingest.discover import discover
    kinds = {s.source: s.kind for s in discover(NOTEBOOK)}
    assert kinds["train.ipynb"] == "notebook"
    a = _verdict(NOTEBOOK)
    assert a.verdict.category in _expect(NOTEBOOK)["categories"]
    assert list(a.verdict.culprit_ranks) == _expect(NOTEBOOK)["culprit_ranks"]


# ---- mp.spawn's child traceback inside the parent's ProcessRaisedException
def test_spawn_block_gives_the_child_traceback_its_index():
    text = notebook.notebook_text(json.load(open(os.path.join(NOTEBOOK, "train.ipynb"))))
    lines = text.splitlines()
    start = lines.index("-- Process 4 terminated with the following error:")
    sb = spawn_block.SpawnBlock()
    ranks = [sb.rank_for(ln, None) for ln in lines[start:]]
    exc = next(i for i, ln in enumerate(lines[start:]) if ln.startswith("IndexError"))
    assert ranks[1:exc + 1] == [4] * exc  # the header's index, down to the exception line
    assert all(r is None for r in ranks[exc + 1:])  # and nothing after it
    assert sb.rank_for("[rank 2] step 3", 2) == 2  # a line's own rank wins
    sb2 = spawn_block.SpawnBlock()
    sb2.rank_for("-- Process 1 terminated with the following error:", None)
    assert sb2.rank_for("some other line", None) is None  # not followed by a traceback: no block


# ---- rich's wrapped exception message (structlog's ConsoleRenderer tracebacks)
RICH = os.path.join(CASES, "host_oom__numpy-memoryerror-structlog-console-3r-1")


def _rich_lines() -> list[str]:
    import glob
    path = glob.glob(os.path.join(RICH, "tlogs", "*", "attempt_0", "0", "stdout.log"))[0]
    return _lines(path)


def test_rich_wrapped_message_is_taken_from_the_following_lines():
    import glob
    from postmortem.ingest.discover import discover
    from postmortem.parsers.base import parse_source
    from postmortem.parsers import rich_wrap
    lines = _rich_lines()
    i = lines.index("RuntimeError: ")
    assert lines[i - 1].startswith("╰")  # rich closed its frame box right before the exception line
    path = glob.glob(os.path.join(RICH, "tlogs", "*", "attempt_0", "0", "stdout.log"))[0]
    src = next(s for s in discover(RICH) if os.path.samefile(s.path, path))
    rows = parse_source(src).rows["tracebacks"]
    rich = [r for r in rows if r["end_line"] == i + 1]
    assert rich and rich[0]["exc_type"] == "RuntimeError"
    # (the lines the prefilter hands over: those holding a trigger word, which the peer-loss words are)
    assert rich[0]["exc_message"].startswith("[/__w/pytorch") and "Connection closed by peer" in rich[0]["exc_message"]
    # the message ends at a blank line or a new box
    pending = {0: [{"exc_message": ""}, 0]}
    assert rich_wrap.continues(pending, 0, "worker crashing.") and not rich_wrap.continues(pending, 0, "")
    assert 0 not in pending


def test_rich_traceback_of_a_peer_is_a_cascade_and_the_culprit_is_found():
    a = _verdict(RICH)
    tb = a.tables.tracebacks
    rich_rows = tb[(tb["exc_type"] == "RuntimeError") & tb["exc_message"].str.contains("Connection closed by peer")]
    assert len(rich_rows)
    assert list(a.verdict.culprit_ranks) == _expect(RICH)["culprit_ranks"]


# ---- mpirun's `exited on signal 9 (Killed)` is a SIGKILL like torchrun's exitcode -9
def test_mpirun_signal_9_reads_as_sigkill():
    from postmortem.ranks.ends import exit_code
    case = os.path.join(CASES, "host_oom__watchdog-sigkill-mpirun-plain-3r-1")
    line = next(ln for ln in _lines(os.path.join(case, "console.log")) if ln.startswith("mpirun noticed"))
    f, m = next((f, m) for f, m in formats.match_line(line) if f.name == "mpirun-noticed-signal")
    assert exit_code(f.groupdict(m)) == -9
    a = _verdict(case)
    assert a.verdict.category in _expect(case)["categories"]
    assert list(a.verdict.culprit_ranks) == _expect(case)["culprit_ranks"]


# ---- DDP's shape check: every other rank reports a mismatch with process 0, so process 0 is the odd one
def test_every_rank_but_the_reference_reporting_a_mismatch_names_the_reference():
    case = os.path.join(CASES, "ddp_usage_error__ddp-param-mismatch-torchrun-multinode-3r-1")
    reports = [ln for f in ("node0.log", "node1.log") for ln in _lines(os.path.join(case, f))
               if "appears not to match" in ln]
    assert {ln.split("RuntimeError: ", 1)[1][:3] for ln in reports} == {"[1]", "[2]"}  # ranks 1, 2 report, not 0
    a = _verdict(case)
    assert list(a.verdict.culprit_ranks) == _expect(case)["culprit_ranks"] == [0]


# ---- `%(asctime)s %(levelname)s rank N: msg`: the level no longer hides the rank
def test_a_level_word_before_rank_n_keeps_the_rank():
    from postmortem.parsers.textlog import message_rank
    case = os.path.join(CASES, "barrier_skew__rank0-only-barrier-torchrun-multinode-3r-1")
    line = next(ln for ln in _lines(os.path.join(case, "node1.log")) if " INFO rank 2: step" in ln)
    from postmortem.parsers.prefixes import strip_prefixes
    msg, info = strip_prefixes(line)
    assert msg.startswith("INFO rank 2:") and message_rank(msg) == 2
    assert message_rank("INFO the rank 2: x") is None and message_rank("INFO - rank 3: x") is None


@pytest.mark.parametrize("name", ["ddp_usage_error__ddp-mark-ready-twice-notebook-2r-1",
                                  "ddp_usage_error__ddp-unused-params-ray-train-4r-1",
                                  "ddp_usage_error__ddp-param-mismatch-accelerate-3r-1"])
def test_a_reducer_error_shown_for_one_rank_only_names_no_culprit(name):
    """mp.spawn prints the first failing child's traceback only and Ray groups the others' identical errors: DDP's
    reducer error (every rank's model is the same) shown for one rank makes it no culprit, and how the ranks ended
    lends it none either. A parameter mismatch (one rank's model differs) still names that rank."""
    case = os.path.join(CASES, name)
    if not os.path.isdir(case):
        pytest.skip("lab case not present")
    a = _verdict(case)
    assert a.verdict.category == "ddp_usage_error"
    assert list(a.verdict.culprit_ranks) == _expect(case)["culprit_ranks"]

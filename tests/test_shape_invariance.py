"""The same real incident written in another shape keeps its verdict: shared re-runs (real torchrun/gloo jobs)
re-shaped as a log collector, another launcher or a healthy start-up would write them (the transforms of
../shared/tools/perturb_corpus.py, done here in a few lines each). A verdict that changes with the shape was resting
on the shape, not on the evidence."""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil

import pytest

import postmortem
from postmortem.ingest.discover import path_hints

REALRUNS = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "realruns")


def _case(name: str, tmp_path) -> str:
    src = os.path.join(REALRUNS, name)
    if not os.path.isdir(src):
        pytest.skip("shared re-runs not present")
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return str(dst)


def _logs(case: str):
    for dp, _, fns in os.walk(case):
        for fn in fns:
            if fn != "case.json":
                yield os.path.join(dp, fn)


def _verdict(case: str) -> tuple:
    v = json.loads(postmortem.analyze(case, quiet=True).to_json())["verdict"]
    return v["category"], sorted(v["culprit_ranks"])


def _expected(case: str) -> tuple[list, list]:
    e = json.load(open(os.path.join(case, "case.json")))["expect"]
    return e["categories"], sorted(e["culprit_ranks"])


def test_torchrun_rank_folder_names_the_rank_a_folder_further_down():
    assert path_hints("tlogs/x/attempt_2/3/stdout.log")["local_rank"] == 3
    assert path_hints("tlogs/x/attempt_2/3/job/stdout.log.gz") == {"local_rank": 3, "attempt": 2}
    assert "local_rank" not in path_hints("tlogs/x/attempt_2/notes/stdout.log")


@pytest.mark.parametrize("name", ["barrier_skew__rank0-only-barrier-after-fit-4ranks",
                                  "rank_crash__truncated-jsonl-record-restarts-die-in-gloo-rendezvous-rank3-4ranks"])
def test_gzipped_a_folder_down(name, tmp_path):
    """A collector gzips every log and moves it one folder down (torchrun's attempt_K/<rank>/ layout included)."""
    case = _case(name, tmp_path)
    for f in list(_logs(case)):
        d = os.path.join(os.path.dirname(f), "job")
        os.makedirs(d, exist_ok=True)
        with open(f, "rb") as src, gzip.open(os.path.join(d, os.path.basename(f) + ".gz"), "wb") as out:
            out.write(src.read())
        os.remove(f)
    cats, culprits = _expected(case)
    cat, got = _verdict(case)
    assert cat in cats and got == culprits


def test_srun_labels_on_the_failure_block_only(tmp_path):
    """`[rankN]:` prefixes rewritten as srun --label's `N: `: the labelled block sits inside a console whose other
    lines (the job's own logger) carry no label; monitored_barrier's report still names rank 3."""
    case = _case("straggler__email-regex-backtracking-monitored-barrier-rank3-4ranks", tmp_path)
    console = os.path.join(case, "console.log")
    text = open(console, encoding="utf-8").read()
    relabelled = re.sub(r"(?m)^\[rank(\d+)\]:", r"\1: ", text)
    assert relabelled != text
    open(console, "w", encoding="utf-8").write(relabelled)
    cats, culprits = _expected(case)
    cat, got = _verdict(case)
    assert cat in cats and got == culprits


def test_shard_loading_bars_of_other_ranks_are_not_the_culprits_work(tmp_path):
    """Every rank's file starts with a healthy start-up (checkpoint-shard loading bars, NCCL INFO): a waiting rank's
    progress bar is not what the rank the others waited for was doing."""
    case = _case("nccl_error__master-port-held-by-notebook-pg-eaddrinuse-4ranks", tmp_path)
    start = ["node01:4101:4202 [1] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"] + [
        f"Loading checkpoint shards:  {p}%|{'#' * (p // 10):10}| {p * 4 // 100}/4 [00:0{p % 10}<00:10,  2.51s/it]"
        for p in range(0, 101, 25)]
    for f in _logs(case):
        text = open(f, encoding="utf-8", errors="replace").read()
        open(f, "w", encoding="utf-8").write("\n".join(start) + "\n" + text)
    cats, culprits = _expected(case)
    cat, got = _verdict(case)
    assert cat in cats and got == culprits


def test_a_pasted_ddp_warning_is_a_jobs_output(tmp_path):
    """The corpus's sam2 post is only DDP's grad-strides warning (four lines): PyTorch's words make it a job's output
    to judge (no_failure), not 'nothing looks like training' (a stray control byte once ended the word pattern)."""
    from postmortem.ingest import recognised
    src = os.path.join(REALRUNS, "..", "corpus", "no_failure__sam2-ddp-grad-strides-bucket-view-warning", "console.log")
    if not os.path.isfile(src):
        pytest.skip("shared corpus not present")
    assert recognised._has_training_words([src])
    assert recognised._TRAINING_WORDS.pattern.endswith(rb"\b")
    (tmp_path / "notes.txt").write_text("Shopping list: eggs, milk, bread.\nCall the plumber on Monday.\n")
    assert not recognised._has_training_words([str(tmp_path / "notes.txt")])
    cat, _ = _verdict(os.path.dirname(src))
    assert cat == "no_failure"


CORPUS = os.path.join(REALRUNS, "..", "corpus")


def _corpus_case(name: str, tmp_path) -> str:
    src = os.path.join(CORPUS, name)
    if not os.path.isdir(src):
        pytest.skip("shared corpus not present")
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return str(dst)


def test_colour_codes_around_an_exception_name_keep_a_log_a_log(tmp_path):
    """A posted CUDA ECC error (corpus) with colour codes around the exception name, as rich/colorlog print it: it is
    still the run's output, not prose beside the logs."""
    case = _corpus_case("gpu_hardware__jade-hpc-node-dgk713-uncorrectable-ecc", tmp_path)
    for f in _logs(case):
        text = open(f, encoding="utf-8").read()
        open(f, "w", encoding="utf-8").write(re.sub(r"\b(\w*Error)\b", "\x1b[33m\\1\x1b[0m", text))
    assert _verdict(case)[0] == "gpu_hardware"


def test_a_collector_prefix_on_the_last_lines_only_after_a_long_start_up(tmp_path):
    """A Megatron job's log (corpus) whose own lines carry `DATE TIME (worker_7) : ` after a long unprefixed start-up:
    the prefix is learned from the end and the traceback under it is read."""
    case = _corpus_case("logging_blocking__bigcode-megatron-wandb-init-stall-last-rank", tmp_path)
    start = [f"node01:41{i % 8:02d}:4200 [{i % 8}] NCCL INFO Channel {i % 32:02d}/0 : 0[0] -> 1[1] via P2P/IPC"
             for i in range(250)]
    for f in _logs(case):
        text = open(f, encoding="utf-8").read()
        open(f, "w", encoding="utf-8").write("\n".join(start) + "\n" + text)
    assert _verdict(case)[0] == "logging_blocking"


def test_a_gzipped_pasted_warning_is_still_a_jobs_output(tmp_path):
    case = _corpus_case("no_failure__sam2-ddp-grad-strides-bucket-view-warning", tmp_path)
    for f in list(_logs(case)):
        with open(f, "rb") as src, gzip.open(f + ".gz", "wb") as out:
            out.write(src.read())
        os.remove(f)
    assert _verdict(case)[0] == "no_failure"


def _reshape():
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    import reshape_collectors
    return reshape_collectors


@pytest.mark.parametrize("shape", ["journald", "compose", "kubectl", "azureml", "sagemaker"])
@pytest.mark.parametrize("name", ["barrier_skew__rank1-sys-exit-end-of-data-3ranks",
                                  "nan_inf__duration-unit-change-saturates-sigmoid-rank1-3ranks",
                                  "barrier_skew__rank0-only-barrier-after-fit-4ranks"])
def test_collectors_the_lab_lacks_keep_the_verdict(name, shape, tmp_path):
    """Real re-runs (a torchrun console with [rankN]: lines, per-rank JSON-lines logs, torchrun's per-rank files) as
    journald, `docker compose logs`, `kubectl logs --prefix`, Azure ML's std_log_process_N.txt and SageMaker's MPI
    prefixes keep them (benchmarks/reshape_collectors.py): category and exact culprits stay."""
    src = os.path.join(REALRUNS, name)
    if not os.path.isdir(src):
        pytest.skip("shared re-runs not present")
    out = str(tmp_path / name)
    if not _reshape().reshape(src, shape, out):
        pytest.skip(f"{shape} changes nothing in this case")
    cats, culprits = _expected(out)
    cat, got = _verdict(out)
    assert cat in cats and got == culprits

"""Launcher shapes added after issue 30 (benchmarks/lab: torchx, submitit, ranks-filter, shared-logfile): the
prefixes and file names they write, then the real lab runs under each (benchmarks/lab/cases), culprit exact."""
from __future__ import annotations

import json
import os

import pytest

import postmortem
from postmortem.ingest.discover import path_hints
from postmortem.parsers.prefixes import strip_prefixes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = os.path.join(ROOT, "benchmarks", "lab", "cases")
SHAPES = ("torchx", "submitit", "ranks-filter", "shared-logfile", "hydra", "distributed-launch", "notebook-shell",
          "deepspeed-rank-logs", "wandb", "mpirun-files", "pty-script")


def test_torchx_replica_and_role_less_tee_prefixes_are_stripped():
    msg, info = strip_prefixes("train/0 [1]:Traceback (most recent call last):")
    assert msg == "Traceback (most recent call last):"
    assert info["local_rank"] == 1 and info["host"] == "train/0"
    msg, info = strip_prefixes("trainer/2 W1129 02:34:21.110000 15113 torch/distributed/run.py:874] x")
    assert info["host"] == "trainer/2" and msg.startswith("W1129")


def test_a_failure_index_of_torchruns_summary_is_no_prefix():
    # `[1]:` alone on its line numbers a failure in ChildFailedError's summary; the summary parser needs it
    assert strip_prefixes("[1]:") == ("[1]:", {})
    assert strip_prefixes("train/0 [0]:")[0] == "[0]:"


def test_ordinary_lines_with_a_slash_keep_their_words():
    # (a line that starts with `word/N ` is read as TorchX's tag: `data/2 files missing` loses `data/2`; progress
    # counts, paths and metric names keep theirs)
    for line in ("epoch 3/10 loss 0.5", "step 12/100: loss=0.3", "12/100 [00:01<00:02, 50.0it/s]",
                 "train/loss 0.53 at step 4", "/data/2 files missing", "ckpt/step_2 saved"):
        msg, info = strip_prefixes(line)
        assert "host" not in info, line


def test_open_mpi_output_filename_folders_name_their_rank():
    assert path_hints("mpilogs/1/rank.0/stdout") == {"rank": 0}
    assert path_hints("out/1/rank.12/stderr") == {"rank": 12}
    assert path_hints("rank.3/notes.txt") == {}


def test_submitit_task_files_name_their_rank():
    assert path_hints("logs/15085/15085_1_log.err") == {"rank": 1}
    assert path_hints("logs/123_4/123_4_2_log.out") == {"rank": 2}  # an array job's index, then the task
    assert path_hints("logs/15085/15085_submitted.pkl") == {}


def _lab_cases() -> list[str]:
    if not os.path.isdir(CASES):
        return []
    out = []
    for name in sorted(os.listdir(CASES)):
        path = os.path.join(CASES, name, "case.json")
        if os.path.isfile(path) and json.load(open(path, encoding="utf-8")).get("launcher") in SHAPES:
            out.append(name)
    return out


# runs whose inputs do not hold the category's evidence: the verdict must name the culprit and stay hedged
HIDDEN = {
    # --local-ranks-filter 0: rank 3's NaN and its FloatingPointError never reach the console; rank 0 only waited
    "nan_inf__nan-check-raises-ranks-filter-8r-1": "the culprit's output is filtered out of the console",
}


@pytest.mark.parametrize("name", _lab_cases())
def test_real_runs_under_the_new_launchers_name_the_culprit(name):
    """Each real run: the verdict's category is one the case accepts and its culprits are exactly the case's."""
    case = json.load(open(os.path.join(CASES, name, "case.json"), encoding="utf-8"))
    a = postmortem.analyze(os.path.join(CASES, name), quiet=True)
    if name in HIDDEN:
        assert sorted(a.verdict.culprit_ranks) == sorted(case["expect"]["culprit_ranks"])
        assert a.verdict.confidence < 0.5, HIDDEN[name]
        return
    assert a.verdict.category in case["expect"]["categories"], (a.verdict.category, a.verdict.culprit_ranks)
    assert sorted(a.verdict.culprit_ranks) == sorted(case["expect"]["culprit_ranks"])


def _notebook_case():
    name = "rank_crash__target-out-of-bounds-notebook-shell-8r-1"
    path = os.path.join(CASES, name)
    if not os.path.isdir(path):
        pytest.skip("lab case not present")
    return path, json.load(open(os.path.join(path, "case.json"), encoding="utf-8"))["expect"]


def test_a_notebook_shipped_gzipped_stamped_or_with_raw_escapes_is_still_its_outputs(tmp_path):
    """The same executed notebook (a real `!torchrun` cell) gzipped, with a collector's stamp before every line, and
    with raw escape bytes where Jupyter writes \\u001b: the verdict and its culprit stay those of the original."""
    import gzip
    import re
    path, expect = _notebook_case()
    raw = open(os.path.join(path, "train.ipynb"), "rb").read()
    shapes = {
        "gz": ("train.ipynb.gz", gzip.compress(raw)),
        "stamped": ("train.ipynb", b"\n".join(b"[2026-03-04T02:13:16.686Z] " + ln for ln in raw.split(b"\n"))),
    }
    cases = [(shape, name, data, expect) for shape, (name, data) in shapes.items() if shape != "escapes"]
    # (IPython's coloured traceback of a notebook that started the processes itself holds the escapes)
    colour = os.path.join(CASES, "barrier_skew__rank0-only-allgather-notebook-3r-1")
    if os.path.isdir(colour):
        raw = open(os.path.join(colour, "train.ipynb"), "rb").read()
        bare = re.sub(rb"\\u001b", b"\x1b", raw)
        assert bare != raw
        with pytest.raises(ValueError):
            json.loads(bare)  # (strict JSON refuses the raw control characters)
        (tmp_path / "as_written").mkdir()
        (tmp_path / "as_written" / "train.ipynb").write_bytes(raw)
        alone = postmortem.analyze(str(tmp_path / "as_written"), quiet=True).verdict  # (the notebook alone)
        cases.append(("escapes", "train.ipynb", bare,
                      {"categories": [alone.category], "culprit_ranks": alone.culprit_ranks}))
    for shape, name, data, want in cases:
        d = tmp_path / shape
        d.mkdir()
        (d / name).write_bytes(data)
        a = postmortem.analyze(str(d), quiet=True)
        assert a.verdict.category in want["categories"], shape
        assert a.verdict.culprit_ranks == want["culprit_ranks"], shape


def test_hydra_records_lose_their_stamp_and_keep_their_level():
    msg, info = strip_prefixes("[2026-11-29 02:43:26,549][train][ERROR] - Training failed")
    assert msg == "[train][ERROR] - Training failed" and info["ts"] == "2026-11-29 02:43:26,549"

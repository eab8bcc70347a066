"""Training frameworks' progress lines as steps with loss, gradient norm, loss scale and skipped / non-finite counters
(parsers/framework_steps.py), on real output: DeepSpeed 0.19's engine on CPU and fairseq's own progress bar over a
loop that diverges (tests/fixtures/progress), HF Trainer 4.57/5.23 and Lightning 2.6 captures (../shared/captured),
torchtune's bar as a user posted it (../shared/corpus); Megatron-LM / NeMo lines are built by the sources' own format
expressions (megatron/training/training.py training_log, NeMo's ProgressPrinter), as no run of theirs is at hand."""
from __future__ import annotations

import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

import postmortem
from postmortem.parsers.steps import parse_step
from postmortem.rules.numerics import nonfinite_at_end

FIX = Path(__file__).parent / "fixtures" / "progress"
SHARED = Path("/work/shared")


def _analyze(tmp_path, src: Path):
    shutil.copy(src, tmp_path / "console.log")
    return postmortem.analyze(str(tmp_path))


def test_deepspeed_engine_step_reports(tmp_path):
    st = _analyze(tmp_path, FIX / "deepspeed0.19_cpu_engine_steps.txt").tables.steps
    ds = st[st["desc"] == "deepspeed"]
    assert ds["step"].tolist() == [0, 5, 10, 15, 20]
    assert ds["skipped"].tolist() == [0] * 5 and ds["lr"].tolist() == [0.001] * 5
    assert ds["rank"].tolist() == [0] * 5                        # `[Rank 0]` names the printing rank


def test_fairseq_bar_of_a_diverging_run_is_nan_inf_at_the_first_nonfinite_report(tmp_path):
    a = _analyze(tmp_path, FIX / "fairseq_simple_bar_diverging.txt")
    st = a.tables.steps
    assert st["step"].tolist() == [5, 10, 15, 20, 25, 30, 35, 40]   # num_updates, across both epochs
    assert st["grad_norm"].iloc[0] == pytest.approx(1.56931) and st["loss_scale"].iloc[0] == 128
    assert st["nan_iters"].fillna(0).tolist() == [0, 0, 0, 0, 0, 1, 1, 1]
    assert (a.verdict.category, a.verdict.step) == ("nan_inf", 30)


@pytest.mark.skipif(not (SHARED / "captured").is_dir(), reason="needs /work/shared/captured")
@pytest.mark.parametrize("name,first", [("hf_trainer_4.57.1_single_stdout.txt", 1.1156082153320312),
                                        ("hf_trainer_5.23_single_stdout.txt", 1.488)])   # 5.x prints '1.488'
def test_hf_trainer_dicts_give_the_gradient_norm(tmp_path, name, first):
    st = _analyze(tmp_path, SHARED / "captured" / name).tables.steps
    logs = st[st["desc"] == "hf-trainer-log"]
    assert logs["grad_norm"].iloc[0] == pytest.approx(first) and logs["nan_iters"].isna().all()


@pytest.mark.skipif(not (SHARED / "corpus").is_dir(), reason="needs /work/shared/corpus")
def test_torchtune_bar_description_gives_epoch_and_loss():
    line = (SHARED / "corpus" / "rank_crash__torchtune-gemma-lora-rank0-keyerror-at-epoch-save-allgather-timeout" /
            "console.log").read_text(encoding="utf-8", errors="replace").splitlines()[0]
    row = parse_step(line)
    assert row["desc"] == "torchtune" and row["epoch"] == 1.0 and row["loss"] == pytest.approx(2.572175979614258)


def _megatron_line(iteration, loss=None, grad_norm=1.095, loss_scale=131072.0, skipped=0, nan=0):
    # megatron/training/training.py training_log, in its order; a loss that is NaN/Inf is left out (`avg >= 0.0`)
    s = " [2025-09-07 23:58:47.123456]"
    s += " iteration {:8d}/{:8d} |".format(iteration, 500000)
    s += " consumed samples: {:12d} |".format(iteration * 32)
    s += " elapsed time per iteration (ms): {:.1f} |".format(438.3)
    s += f" learning rate: {5.999998e-05:.6E} |"
    s += f" global batch size: {32:5d} |"
    if loss is not None:
        s += " {}: {:.6E} |".format("lm loss", loss)
    s += f" loss scale: {loss_scale:.1f} |"
    s += f" grad norm: {grad_norm:.3f} |"
    s += " number of skipped iterations: {:3d} |".format(skipped)
    s += " number of nan iterations: {:3d} |".format(nan)
    return s


def test_megatron_interval_line_fields():
    row = parse_step(_megatron_line(609, loss=6.159759))
    assert (row["step"], row["total"], row["desc"]) == (609, 500000, "megatron")
    assert row["loss"] == pytest.approx(6.159759) and row["grad_norm"] == pytest.approx(1.095)
    assert (row["loss_scale"], row["skipped"], row["nan_iters"]) == (131072.0, 0, 0)
    assert row["step_time"] == pytest.approx(0.4383) and row["lr"] == pytest.approx(5.999998e-05)


def test_megatron_nan_interval_has_no_loss_and_counts_the_nan_iterations():
    row = parse_step(_megatron_line(620, loss=None, grad_norm=float("nan"), nan=10))
    assert row["loss"] is None and math.isnan(row["grad_norm"]) and row["nan_iters"] == 10


def test_nemo_progress_printer_line():
    # nemo/lightning/pytorch/callbacks/progress_printer.py: prefix, then ` | {metric}: {val:.4}` (ints plain)
    prefix = "Training" + f" epoch {0}, iteration {2}/{19}"
    metrics = {"lr": 4.498e-07, "global_batch_size": 512.0, "global_step": 2.0, "reduced_train_loss": 11.03,
               "train_step_timing in s": 7.556}
    line = prefix + "".join(f" | {k}: {int(v)}" if float(v).is_integer() else f" | {k}: {v:.4}"
                            for k, v in metrics.items())
    row = parse_step(line)
    assert (row["step"], row["total"], row["desc"], row["epoch"]) == (2, 19, "nemo", 0.0)
    assert row["loss"] == pytest.approx(11.03) and row["step_time"] == pytest.approx(7.556)


def test_a_series_that_recovers_from_a_nonfinite_report_is_not_a_failure():
    st = pd.DataFrame({"source": "a.log", "rank": 0, "desc": "hf-trainer-log", "phase": "train",
                       "line": [1, 2, 3, 4], "nan_iters": pd.array([None, 1, None, None], dtype="Int64")})
    assert not nonfinite_at_end(st).any()                           # fp16's skipped step: training went on
    st.loc[3, "nan_iters"] = 1
    st.loc[2, "nan_iters"] = 1
    assert nonfinite_at_end(st).tolist() == [False, True, True, True]


@pytest.mark.parametrize("line", [
    "epoch 3 step=100 loss=2.3",                                   # a loop's own words, not fairseq's bar
    "Validation iteration counts are per rank",
    "steps: many loss: none",
])
def test_other_lines_are_not_read_as_a_framework(line):
    row = parse_step(line)
    assert row is None or row.get("desc") not in ("fairseq", "megatron", "nemo", "deepspeed")

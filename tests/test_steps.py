"""Step and progress lines (parsers/steps.py): the gated searches find what their plain regexes find."""
from __future__ import annotations

import pytest

from postmortem.parsers import steps

_LINES = [
    "step 12 loss 2.5", "Step: 3/100 | loss=0.5", "[step 7] lr 1e-4", "global_step=42, loss: nan", "it 5", "Iter #3",
    "iteration 10/20 | lm loss: 1.5", "(batch 4)", "epoch 2 batch 30 loss 0.1", "x,step=1", "|it 9", "splitting 3",
    "\u017ftep 5", "\u0131t 4", "STEP\u00a09", "step\u2003\u0665", "\x1cstep 3", "steps 4", "waiting 3", "no step here",
    "Steps:   7%|\u258b         | 15980/225000 [2:28:04<32:16:51,  1.80it/s, loss=0.655, lr=0.000296]",
    "Validation DataLoader 0:   0%|          | 0/20 [00:00<?, ?it/s]", "train: 50%|##### | 5/10 [00:01<00:01, 2.5s/it, LOSS=1]",
    "Sampling: 100%|\u2588\u2588| 50/50 [01:35<00:00,  1.90s/it, lo\u017fs=3]", "{'loss': 0.5, 'learning_rate': 1e-05, 'epoch': 0.1}",
]


@pytest.mark.parametrize("line", _LINES)
def test_generic_step_search_equals_the_regex(line):
    for v in (line, line.upper(), line.swapcase(), " " + line, "x" + line, "[" + line):
        got, want = steps._generic_step_search(v), steps.GENERIC_STEP_RE.search(v)
        assert (got.span(), got.groupdict()) == (want.span(), want.groupdict()) if want else got is None, v


def test_tqdm_row_reads_loss_rate_and_phase():
    row = steps.parse_step(_LINES[20])
    assert row == {"step": 15980, "total": 225000, "phase": "train", "desc": "Steps", "loss": 0.655,
                   "step_time": 1 / 1.80, "elapsed_s": 8884.0}  # tqdm's [2:28:04<...]
    assert steps.parse_step(_LINES[21])["phase"] == "eval" and "loss" not in steps.parse_step(_LINES[21])
    assert steps.parse_step(_LINES[22])["loss"] == 1.0 and steps.parse_step(_LINES[22])["step_time"] == 2.5
    assert steps.parse_step(_LINES[23])["loss"] == 3.0  # the long s still reads as a loss key (case-insensitive)


def test_hf_dict_reader_agrees_with_literal_eval():
    """The regex reader of HF log dicts gives what ast.literal_eval gives (values and their types), and falls back
    to it for anything but a flat dict of plain values (odd numbers, nesting, escapes, separators)."""
    import ast
    import random

    from postmortem.parsers.steps import _hf_dict
    toks = ["1", "0", "00", "01", "1.5", "-1.5", "1.", "0.0001", "1e-05", "1E5", "01e5", "00.5", ".5", "-.5", "None",
            "True", "False", "'a b'", "''", "1_000", "0x1f", "nan", "-0", "1.2.3", "[1, 2]", "{'a': 1}", "1e", "-",
            "'a\\'b'"]
    keys = ["loss", "grad_norm", "learning_rate", "epoch", "eval_loss", "x y", "a'b"]
    rnd = random.Random(7)
    for _ in range(5000):
        parts = [f"'{rnd.choice(keys)}': {rnd.choice(toks)}" for _ in range(rnd.randint(0, 5))]
        text = "{" + rnd.choice([", ", ",", " , "]).join(parts) + "}" + rnd.choice(["", " ", "\n", "x"])
        try:
            want = ast.literal_eval(text)
            want = want if isinstance(want, dict) else None
        except (ValueError, SyntaxError):
            want = None
        got = _hf_dict(text)
        assert got == want, text
        assert got is None or [type(v) for v in got.values()] == [type(v) for v in want.values()], text


def test_an_epoch_fraction_with_a_loss_is_the_batch_within_the_epoch():
    """`Epoch E: n/N loss=` (samples/wandb_log_blocked's real prints) is batch n of N in epoch E; an epoch counter
    in brackets (`Epoch [3/10]`) is not a step."""
    assert steps.parse_step("[Rank 0] Epoch 0: 40/400 loss=0.0124 (0.032s/it)") == {
        "step": 40, "total": 400, "phase": "train", "desc": "custom", "loss": 0.0124, "epoch": 0.0}
    assert steps.parse_step("Epoch [3/10] loss 0.5") is None
    assert steps.parse_step("Epoch 2: 40/400 done") is None  # no loss: a count of something else

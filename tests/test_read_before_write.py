"""A checkpoint loaded before its save began, then a crash (postmortem/rules/io.py `_load_failed_before_save`), on the
user's real log from ../shared/corpus (HF Trainer under DDP: a rank loaded the best model before rank 0 saved it)."""
from __future__ import annotations

from pathlib import Path

import pytest

import postmortem

CASE = Path("/work/shared/corpus/checkpoint_corruption__hf-trainer-ddp-load-best-model-before-rank0-finished-saving")
pytestmark = pytest.mark.skipif(not CASE.is_dir(), reason="needs /work/shared/corpus")


def test_load_logged_before_the_save_of_the_same_path_then_a_crash():
    a = postmortem.analyze(str(CASE))
    assert a.verdict.category == "checkpoint_corruption" and a.verdict.confidence <= 0.7
    assert "before the save of the same path" in a.finding_list[0].explanation


def test_the_usual_order_save_then_load_is_no_race(tmp_path):
    lines = (CASE / "console.log").read_text(encoding="utf-8").splitlines()
    load = next(i for i, ln in enumerate(lines) if ln.startswith("Loading best model from"))
    save = next(i for i, ln in enumerate(lines) if ln.startswith("Saving model checkpoint to"))
    lines[load], lines[save] = lines[save], lines[load]          # one process: it saves, then loads the best
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    a = postmortem.analyze(str(tmp_path))
    assert not [f for f in a.finding_list if "before the save" in f.explanation]

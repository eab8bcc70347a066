"""The shared real cases, scored by the rule of ../shared/tools/score_corpus.py: category, phase, exact culprit
ranks, hedging and evidence gaps where a case asks for them; no confident (>= 0.8) wrong verdict anywhere.

../shared/corpus holds 71 incidents users posted (8 of them are a lone OOM line whose phase nothing in the input
shows, and we do not guess it), ../shared/realruns 9 real torchrun/gloo re-runs, ../shared/seed-cases the seed
incidents."""
from __future__ import annotations

import importlib.util
import os

import pytest


SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared")


def _cases(name):
    root = os.path.join(SHARED, name)
    if not os.path.isdir(root):
        return []
    return sorted(os.path.join(root, d) for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "case.json")))


def _judge(path) -> tuple[bool, float, str]:
    """The scoring rule, as benchmarks/reliability.py applies it (one implementation for both)."""
    ok, conf, _, said = _reliability().judge(path)
    return ok, conf, said


def _reliability():
    spec = importlib.util.spec_from_file_location(
        "postmortem_bench_reliability", os.path.join(os.path.dirname(__file__), "..", "benchmarks", "reliability.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name,minimum", [("corpus", 0.83), ("realruns", 1.0), ("seed-cases", 1.0)])
def test_shared_cases_accuracy_and_no_confident_errors(name, minimum):
    cases = _cases(name)
    if not cases:
        pytest.skip(f"../shared/{name} is not beside this checkout")
    results = [_judge(c) for c in cases]
    wrong = [desc for ok, _, desc in results if not ok]
    confident_wrong = [desc for ok, conf, desc in results if not ok and conf >= 0.8]
    assert not confident_wrong, confident_wrong
    assert sum(ok for ok, _, _ in results) / len(results) >= minimum, wrong

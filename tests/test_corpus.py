"""The real-failure corpus (../shared/corpus): accuracy >= 0.85 and no confident errors (DESIGN.md scoring rule)."""
from __future__ import annotations

import json
import os

import pytest

import postmortem

CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "corpus")


def _cases():
    if not os.path.isdir(CORPUS):
        return []
    return sorted(d for d in os.listdir(CORPUS) if os.path.isfile(os.path.join(CORPUS, d, "case.json")))


@pytest.mark.skipif(not _cases(), reason="../shared/corpus is not beside this checkout")
def test_corpus_accuracy_and_no_confident_errors():
    right, confident_wrong, wrong = 0, [], []
    for case in _cases():
        path = os.path.join(CORPUS, case)
        expect = json.load(open(os.path.join(path, "case.json"), encoding="utf-8"))["expect"]
        v = postmortem.analyze(path).verdict
        ok = v.category in expect["categories"] and ("phase" not in expect or v.phase in expect["phase"])
        right += ok
        if not ok:
            wrong.append(f"{case}: {v.category}/{v.phase} {v.confidence}")
            if v.confidence >= 0.8:
                confident_wrong.append(case)
    assert not confident_wrong, confident_wrong
    assert right / len(_cases()) >= 0.85, wrong

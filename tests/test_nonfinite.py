"""postmortem.ranks.nonfinite: the rank whose own loss turned non-finite first, by step (the others get NaN
through DDP's all-reduce one step later), from loss lines as real logs print them."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from postmortem.ranks.nonfinite import origin
from parsers.json_fields import with_fields


def _tables(lines: list[tuple[int, str]]):
    events = pd.DataFrame({"rank": pd.array([r for r, _ in lines], dtype="Int64"),
                           "source": [f"logs/rank{r}.jsonl" for r, _ in lines],
                           "line": pd.array(range(1, len(lines) + 1), dtype="Int64"),
                           "message": [m for _, m in lines], "kind": ["nan"] * len(lines)})
    steps = pd.DataFrame({"source": [], "line": [], "step": [], "phase": []})
    return SimpleNamespace(events=events, steps=steps), events


def test_the_rank_whose_loss_turned_first_is_the_origin():
    # the re-run's JSON records, as postmortem reads them (fields written into the message)
    recs = [(1, {"msg": "train_step", "step": 38, "loss": float("nan"), "grad_norm": float("nan")}),
            (0, {"msg": "train_step", "step": 39, "loss": float("nan"), "grad_norm": float("nan")}),
            (2, {"msg": "train_step", "step": 39, "loss": float("nan"), "grad_norm": float("nan")})]
    tables, nan = _tables([(r, with_fields(o["msg"], o)) for r, o in recs])
    got = origin(tables, nan, [0, 1, 2])
    assert got is not None and got.ranks == [1] and got.step == 38 and got.later == {0: 39, 2: 39}


def test_every_rank_turning_at_once_names_no_one():
    tables, nan = _tables([(r, f"step 12/16 loss nan grad_norm nan") for r in (0, 1, 2)])
    assert origin(tables, nan, [0, 1, 2]) is None


def test_json_fields_are_written_once():
    assert with_fields("step 1 loss 0.0339", {"msg": "step 1 loss 0.0339", "step": 1, "loss": 0.03394}) == \
        "step 1 loss 0.0339"
    assert with_fields("train_step", {"msg": "train_step", "rank": 1, "step": 38, "loss": float("nan"),
                                      "ok": True, "tag": "x"}) == "train_step step=38 loss=nan"

"""The table builder: parse results folded into the tables as they arrive, in any order, give the tables that
building them from all results at once gives (rows in the order of the sources, the same dtypes and values)."""
from __future__ import annotations

import os
import random

import pandas as pd
import pytest

from postmortem.parsers.base import ParseResult, compact, parse_source
from postmortem.tables import fold as tables_builder
from postmortem.ingest.discover import Source, discover
from postmortem.tables.fold import Numbers, TableBuilder

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _built(sources, results, order, typed=True, monkeypatch=None):
    if not typed:
        monkeypatch.setattr(tables_builder, "_numeric", lambda col: None)
    b = TableBuilder(sources)
    for i in order:
        b.add(i, compact(ParseResult(rows={t: list(r) for t, r in results[i].rows.items()},
                                     lines=results[i].lines, problems=list(results[i].problems),
                                     meta=dict(results[i].meta))))
    if not typed:
        monkeypatch.undo()
    return b.finish()


@pytest.mark.parametrize("case", ["samples/hung_rank_pyspy/logs", "samples/uneven_batches_barrier/logs",
                                  "samples/sampling_oom_step2000/logs"])
def test_any_arrival_order_and_typed_columns_give_the_same_tables(case, monkeypatch):
    sources = discover(os.path.join(ROOT, case))
    results = [parse_source(s) for s in sources]
    ref = _built(sources, results, range(len(sources)), typed=False, monkeypatch=monkeypatch)
    order = list(range(len(sources)))
    random.Random(3).shuffle(order)
    for got in (_built(sources, results, range(len(sources))), _built(sources, results, order)):
        for name, df in ref.frames.items():
            pd.testing.assert_frame_equal(got.frames[name], df, check_exact=True)
        assert got.meta == ref.meta


def _one_table(values: list, col: str = "line"):
    src = Source(path="/x", source="x.log", kind="rank_log")
    res = ParseResult(rows={"events": [{"source": "x.log", col: v, "kind": "error"} for v in values]})
    b = TableBuilder([src])
    b.add(0, compact(res))
    return b.finish().frames["events"][col]


@pytest.mark.parametrize("values", [[1, None, 3], [1, "7", None], [True, 2], [2 ** 60 + 1, None], [2 ** 60 + 1, 5],
                                    [1.5, None, 2], []])
def test_numeric_columns_keep_the_coercion_of_the_frame_builder(values, monkeypatch):
    monkeypatch.setattr(tables_builder, "_numeric", lambda col: None)
    want = _one_table(values)
    monkeypatch.undo()
    got = _one_table(values)
    pd.testing.assert_series_equal(got, want, check_exact=True)


def test_numbers_read_and_write_like_a_list():
    n = Numbers("q")
    n.extend([5, None, 7])
    assert list(n) == [5, None, 7] and n[1] is None and len(n) == 3
    n[1] = 9
    n[0] = None
    assert n.as_list() == [None, 9, 7]
    with pytest.raises(TypeError):
        n.extend(["8"])

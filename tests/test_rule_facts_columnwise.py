"""Rule helpers that read frames column-wise (an error flood keeps thousands of tracebacks) give what the row-wise
definitions they replaced give: checked against those definitions, written out here, on random tables."""
import random

import pandas as pd
import pytest

from postmortem.tables import schema
from postmortem.rules import crash, facts
from postmortem.tables.build import Tables


def _tables(seed: int) -> Tables:
    rnd = random.Random(seed)
    base = pd.Timestamp("2026-03-01 10:00:00", tz="UTC")
    sources = ["rank0.log", "rank1.log", "node/rank2.log"]
    tracebacks, events = [], []
    for i in range(rnd.randint(0, 40)):
        line = rnd.randint(1, 200)
        tracebacks.append({
            "source": rnd.choice(sources), "line": line, "rank": rnd.choice([None, 0, 1, 2]),
            "ts": rnd.choice([None, base + pd.Timedelta(seconds=rnd.randint(0, 99))]),
            "exc_type": rnd.choice(["RuntimeError", "torch.OutOfMemoryError", "DistBackendError", "ValueError"]),
            "exc_message": rnd.choice(["boom", "Watchdog caught collective operation timeout", "CUDA out of memory",
                                       "Connection closed by peer", "bad value"]),
            "end_line": rnd.choice([None, line + rnd.randint(0, 6)])})
    for i in range(rnd.randint(0, 40)):
        events.append({"source": rnd.choice(sources), "line": rnd.choice([None, rnd.randint(1, 210)]),
                       "rank": 0, "kind": rnd.choice(["oom", "error", "nccl_error", "config", "dataloader"]),
                       "message": "m", "details": {}})
    return Tables({n: schema.frame_from_rows(n, {"tracebacks": tracebacks, "events": events}.get(n, []))
                   for n in schema.TABLE_NAMES}, {})


def _explained_row(tables, row) -> bool:
    """The row-wise definition first_exception used before."""
    ev = tables.events
    lo, hi = int(row["line"]), int(row["end_line"]) if not crash._na(row["end_line"]) else int(row["line"])
    near = ev[(ev["source"] == row["source"]) & (ev["line"] >= lo) & (ev["line"] <= hi + 3)
              & ev["kind"].isin(crash.SPECIALISED)]
    return len(near) > 0


@pytest.mark.parametrize("seed", range(30))
def test_columnwise_helpers_equal_the_rowwise_definitions(seed):
    tables = _tables(seed)
    tb = tables.tracebacks
    assert facts.order_keys(tb) == [facts.order_key(r) for _, r in tb.iterrows()]
    want = tb[~tb.apply(facts.is_cascade_traceback, axis=1)] if len(tb) else tb
    assert facts.root_tracebacks(tables).index.tolist() == want.index.tolist()
    assert crash._explained(tables, tb) == [_explained_row(tables, r) for _, r in tb.iterrows()]


def test_an_exception_with_an_oom_event_on_its_lines_is_owned_by_the_oom_rule():
    tables = Tables({n: schema.frame_from_rows(n, {
        "tracebacks": [{"source": "a.log", "line": 10, "end_line": 14, "exc_type": "RuntimeError", "exc_message": "x"},
                       {"source": "a.log", "line": 30, "end_line": None, "exc_type": "RuntimeError", "exc_message": "y"},
                       {"source": "b.log", "line": 10, "end_line": 14, "exc_type": "RuntimeError", "exc_message": "z"}],
        "events": [{"source": "a.log", "line": 17, "kind": "oom", "message": "CUDA out of memory", "details": {}},
                   {"source": "a.log", "line": 34, "kind": "oom", "message": "CUDA out of memory", "details": {}},
                   {"source": "b.log", "line": 12, "kind": "config", "message": "batch=8", "details": {}}],
    }.get(n, [])) for n in schema.TABLE_NAMES}, {})
    # 17 is within 3 lines of the end (14); 34 is 4 lines after a one-line traceback at 30; b.log's event is no OOM
    assert crash._explained(tables, tables.tracebacks) == [True, False, False]


@pytest.mark.parametrize("seed", range(10))
def test_events_of_kinds_equal_an_isin_filter_and_follow_a_replaced_table(seed):
    tables = _tables(seed)
    df = tables.events
    for kinds in ("oom", ("oom", "dataloader"), ("dataloader", "oom", "oom"), "missing", ("config", "error", "x")):
        wanted = df[df["kind"].isin((kinds,) if isinstance(kinds, str) else kinds)]
        assert facts.ev(tables, kinds).equals(wanted)
    tables.frames["events"] = df.iloc[::-1].reset_index(drop=True)  # a new events table: the cache must not answer
    flipped = tables.events
    assert facts.ev(tables, ("oom", "error")).equals(flipped[flipped["kind"].isin(("oom", "error"))])

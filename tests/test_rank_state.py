"""The rank end-state table (postmortem.ranks.state, `a.ranks`): one row per rank, documented columns and dtypes,
and facts that keep the line they came from."""
from __future__ import annotations

import os

import pandas as pd

import postmortem
from postmortem.ranks.state import COLUMN_DOCS, COLUMNS

SAMPLES = os.path.join(os.path.dirname(__file__), "..", "samples")


def test_columns_and_dtypes_are_the_documented_ones():
    a = postmortem.analyze(os.path.join(SAMPLES, "hung_rank_pyspy", "logs"), quiet=True)
    r = a.ranks
    assert list(r.columns) == COLUMNS == list(COLUMN_DOCS)
    for col, (dtype, _) in COLUMN_DOCS.items():
        assert str(r[col].dtype) == dtype.replace("[ns, UTC]", "[ns, UTC]") or (
            dtype == "datetime64[ns, UTC]" and isinstance(r[col].dtype, pd.DatetimeTZDtype)), (col, r[col].dtype)
    assert a.tables.ranks is r


def test_every_rank_has_a_row_with_its_end_state_and_evidence():
    a = postmortem.analyze(os.path.join(SAMPLES, "hung_rank_pyspy", "logs"), quiet=True)
    r = a.ranks.set_index("rank")
    assert list(r.index) == [0, 1, 2, 3]
    assert r.loc[3, "stack_class"] == "compute" and "forward" in r.loc[3, "stack_where"]
    for k in (0, 1, 2):
        assert r.loc[k, "stack_class"] == "collective_wait" and bool(r.loc[k, "waiting"])
        assert r.loc[k, "last_enqueued"] == r.loc[3, "last_enqueued"] + 1  # the others issued one more collective
    assert all(isinstance(v, str) and ":" in v for v in r["stack_at"])


def test_ranks_known_only_from_the_world_size_get_a_row(tmp_path):
    (tmp_path / "console.log").write_text(
        "[rank0]: WORLD_SIZE=4\n[rank1]:[E ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600100 milliseconds before timing "
        "out.\n")
    a = postmortem.analyze(str(tmp_path), quiet=True)
    assert list(a.ranks["rank"]) == [0, 1, 2, 3]
    row = a.ranks.set_index("rank").loc[1]
    assert row["last_started"] == 9 and row["waiting"] and row["first_error"].startswith("watchdog_timeout")
    assert a.ranks.set_index("rank").loc[3, "first_error"] is None or pd.isna(a.ranks.set_index("rank").loc[3, "first_error"])


def test_timestamps_of_different_shapes_in_one_table_all_parse():
    from postmortem.tables.schema import _times
    out = _times(pd.Series(["2026-02-18 10:28:25.496", "2026-02-18T10:48:25.681Z", None, "2024-05-01 10:00:00",
                            "garbage"], dtype=object))
    assert out.notna().tolist() == [True, True, False, True, False]
    assert str(out.dtype) == "datetime64[ns, UTC]"


def test_the_innermost_of_stacked_stamps_is_the_line_time():
    from postmortem.parsers.prefixes import strip_prefixes
    _, info = strip_prefixes("[2026-03-11T21:02:59.474Z] 2026-02-18T10:48:25.681Z [rank7]:[E218 x.cpp:1] boom")
    assert info["ts"].startswith("2026-02-18") and info["rank"] == 7

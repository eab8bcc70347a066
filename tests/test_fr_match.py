"""Cross-rank flight-recorder matching: missing ranks, op/size/dtype/state mismatches, first divergence."""
from __future__ import annotations

import os

from postmortem.parsers.base import parse_source
from postmortem.tables import schema, build as tables
from postmortem.ingest.discover import discover
from postmortem.ranks.fr_match import effective_state, is_p2p, match_collectives

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "fr")


def frame(rows: list[dict]):
    base = {"source": "s", "line": None, "host": None, "ts": None, "pg": "0", "numel_in": 16, "numel_out": 16,
            "timeout_ms": 1000, "elapsed_ms": None, "state": "completed", "last_enqueued": None,
            "last_completed": None, "dtype": "Float", "op": "nccl:all_reduce"}
    return schema.frame_from_rows("collectives", [{**base, **r} for r in rows])


def seqs(rank: int, upto: int, start: int = 1, **over) -> list[dict]:
    return [{"rank": rank, "seq": s, **over} for s in range(start, upto + 1)]


def test_real_gloo_dumps_rank1_skipped_the_last_all_reduce():
    sources = [s for s in discover(FIX) if s.kind == "flight_recorder"]  # JSON and pickle of both ranks
    t = tables.build(sources, [parse_source(s) for s in sources])
    report = match_collectives(t.collectives)
    (pg,) = report.pgs
    assert pg.ranks == (0, 1) and pg.last_seq == {0: 7, 1: 6}
    (miss,) = pg.missing
    assert (miss.seq, miss.op, miss.present_ranks, miss.missing_ranks) == (7, "gloo:all_reduce", (0,), (1,))
    d = report.first_divergence
    assert (d.pg, d.seq, d.kind, d.ranks) == ("0", 7, "missing", (1,))
    # rank 1 dumped before gloo retired its barrier: a state difference, reported but not the divergence
    assert [(m.seq, m.field) for m in pg.mismatches] == [(6, "state")]


def test_op_mismatch_names_the_odd_rank_and_wins_over_later_missing():
    rows = seqs(0, 5) + seqs(1, 5) + seqs(2, 2) + [{"rank": 2, "seq": 3, "op": "nccl:broadcast"}] + seqs(2, 4, start=4)
    report = match_collectives(frame(rows))
    d = report.first_divergence
    assert (d.seq, d.kind, d.ranks) == (3, "op", (2,))
    assert [(m.seq, m.missing_ranks) for m in report.pgs[0].missing] == [(5, (2,))]


def test_size_and_dtype_mismatches():
    rows = seqs(0, 3) + seqs(1, 2) + [{"rank": 1, "seq": 3, "numel_in": 8, "numel_out": 8, "dtype": "Half"}]
    pg = match_collectives(frame(rows)).pgs[0]
    assert sorted((m.seq, m.field) for m in pg.mismatches) == [(3, "dtype"), (3, "size")]
    size = next(m for m in pg.mismatches if m.field == "size")
    assert size.values == ((0, (16, 16)), (1, (8, 8))) and size.odd_ranks == ()  # a 1:1 tie names no one
    assert pg.first_divergence.kind == "size"


def test_ring_buffer_eviction_is_not_missing():
    rows = seqs(0, 100, start=1) + seqs(1, 100, start=60)
    report = match_collectives(frame(rows))
    assert report.first_divergence is None and report.pgs[0].missing == ()


def test_gap_inside_a_window_is_missing():
    rows = seqs(0, 5) + [r for r in seqs(1, 5) if r["seq"] != 3]
    (miss,) = match_collectives(frame(rows)).pgs[0].missing
    assert (miss.seq, miss.missing_ranks) == (3, (1,))


def test_expected_ranks_without_dump_and_groups_kept_apart():
    rows = seqs(0, 3) + seqs(1, 3) + seqs(0, 2, pg="1") + seqs(2, 2, pg="1")
    report = match_collectives(frame(rows), expected_ranks={"0": [0, 1, 2, 3]})
    by_pg = {p.pg: p for p in report.pgs}
    assert by_pg["0"].no_dump_ranks == (2, 3) and by_pg["1"].no_dump_ranks == ()
    assert report.first_divergence is None


def test_first_divergence_over_groups_is_the_earliest_in_time():
    late = "2026-01-01T00:00:09"
    rows = [dict(r, ts=late) for r in seqs(0, 2) + seqs(1, 1)]  # pg 0: rank 1 lacks #2, at 00:00:09
    rows += [{"rank": 0, "seq": 5, "pg": "1", "ts": "2026-01-01T00:00:01"},  # pg 1: rank 1 lacks #5, at 00:00:01
             {"rank": 1, "seq": 4, "pg": "1", "ts": "2026-01-01T00:00:00"}]
    report = match_collectives(frame(rows))
    assert {p.pg: p.first_divergence.seq for p in report.pgs} == {"0": 2, "1": 5}
    d = report.first_divergence
    assert (d.pg, d.seq, d.kind, d.ranks) == ("1", 5, "missing", (1,))


def test_non_fr_rows_p2p_and_duplicates_ignored():
    rows = (seqs(0, 2) + seqs(1, 2) + seqs(1, 2)  # rank 1 twice (JSON + pickle of the same dump)
            + [{"rank": 0, "seq": 3, "state": "timeout"},  # a watchdog line, not a flight-recorder entry
               {"rank": 0, "seq": 9, "op": "nccl:send 0->1"}])
    report = match_collectives(frame(rows))
    assert report.first_divergence is None and report.pgs[0].last_seq == {0: 2, 1: 2}
    assert match_collectives(frame([])).pgs == ()


def test_effective_state_and_p2p():
    assert effective_state("scheduled", 4, 4) == "completed"
    assert effective_state("scheduled", 5, 4) == "scheduled"
    assert effective_state("scheduled", 5, 4, last_started=5) == "started"
    assert effective_state("started", 5, -1) == "started"
    assert is_p2p("nccl:recv 1<-0") and is_p2p("nccl:send 0->1") and not is_p2p("nccl:reduce_scatter")


def test_all_to_all_sizes_differ_by_design():
    # MoE token routing: each rank sends a different number of rows through all_to_all; an all_reduce must match.
    rows = [{"rank": r, "seq": 1, "op": "nccl:all_to_all", "numel_in": 4096 + 17 * r, "numel_out": 4096 - r}
            for r in range(4)]
    assert match_collectives(frame(rows)).pgs[0].mismatches == ()
    rows = [{"rank": r, "seq": 1, "numel_in": 16 if r else 8, "numel_out": 16 if r else 8} for r in range(4)]
    (mm,) = match_collectives(frame(rows)).pgs[0].mismatches
    assert (mm.field, mm.odd_ranks) == ("size", (0,))

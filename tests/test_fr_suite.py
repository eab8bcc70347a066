"""A hand-made 16-rank flight-recorder suite, written from the dump schema (version 2.x, NCCL): each scenario has
the exact culprit set the rule must name, from the dumps alone (no logs)."""
from __future__ import annotations

import json

import pytest

import postmortem

N = 16


def _entry(seq: int, pg: str = "0", op: str = "nccl:all_reduce", numel: int = 1024, state: str = "scheduled",
           dtype: str = "Float") -> dict:
    return {"collective_seq_id": seq, "p2p_seq_id": 0, "is_p2p": False, "pg_id": int(pg), "op_id": seq,
            "process_group": [pg, "default_pg" if pg == "0" else f"pg{pg}"], "profiling_name": op,
            "record_id": seq * 3 + 7, "input_sizes": [[numel]], "output_sizes": [[numel]], "input_dtypes": [dtype],
            "output_dtypes": [dtype], "state": state, "time_created_ns": 1_700_000_000_000_000_000 + seq * 10 ** 9,
            "timeout_ms": 600000, "frames": [{"name": "all_reduce", "filename": "distributed_c10d.py", "line": 1}]}


def _dump(rank: int, groups: dict[str, tuple[int, int, int]], entries: list[dict], ranks_of=None) -> dict:
    """groups: pg -> (last_enqueued, last_started, last_completed)."""
    ranks_of = ranks_of or {}
    return {"version": "2.10", "rank": rank, "comm_lib_version": "2.21.5",
            "pg_config": {pg: {"name": pg, "desc": "default_pg" if pg == "0" else f"pg{pg}",
                               "ranks": str(ranks_of.get(pg, list(range(N))))} for pg in groups},
            "pg_status": {pg: {"last_enqueued_collective": e, "last_started_collective": s,
                               "last_completed_collective": c} for pg, (e, s, c) in groups.items()},
            "entries": entries}


def _write(tmp_path, dumps: dict[int, dict]):
    for r, d in dumps.items():
        (tmp_path / f"nccl_trace_rank_{r}.json").write_text(json.dumps(d))
    return postmortem.analyze(str(tmp_path), quiet=True)


def _window(last: int, **kw) -> list[dict]:
    return [_entry(s, state="completed", **kw) for s in range(last - 3, last + 1)]


def device_stalled():
    out = {}
    for r in range(N):
        started = 99 if r == 5 else 100
        out[r] = _dump(r, {"0": (100, started, 99)}, _window(99) + [_entry(100, state="scheduled" if r == 5 else "started")])
    return out, {5}, "straggler"


def host_stalled():
    out = {}
    for r in range(N):
        if r == 11:
            out[r] = _dump(r, {"0": (99, 99, 99)}, _window(99))
        else:
            out[r] = _dump(r, {"0": (100, 100, 99)}, _window(99) + [_entry(100, state="started")])
    return out, {11}, "straggler"


def mismatched_ops():
    out = {}
    for r in range(N):
        op = "nccl:all_gather" if r == 3 else "nccl:all_reduce"
        out[r] = _dump(r, {"0": (100, 100, 99)}, _window(99) + [_entry(100, op=op, state="started")])
    return out, {3}, "barrier_skew"


def all_to_all_uneven_sizes():
    out = {}
    for r in range(N):
        if r == 7:
            out[r] = _dump(r, {"0": (99, 99, 99)}, _window(99))
        else:
            out[r] = _dump(r, {"0": (100, 100, 99)},
                           _window(99) + [_entry(100, op="nccl:all_to_all", numel=1000 + 17 * r, state="started")])
    return out, {7}, "straggler"


def empty_dumps_completed():
    out = {r: _dump(r, {"0": (100, 100, 100)}, []) for r in range(N - 1)}
    out[N - 1] = _dump(N - 1, {"0": (101, 101, 100)}, _window(100) + [_entry(101, op="nccl:barrier", state="started")])
    return out, {N - 1}, "barrier_skew"


def two_groups():
    out = {}
    tp = list(range(8, 16))
    for r in range(N):
        groups = {"0": (50, 50, 50)}
        entries = _window(50)
        if r in tp:
            if r == 9:
                groups["1"] = (199, 199, 199)
                entries += _window(199, pg="1")
            else:
                groups["1"] = (200, 200, 199)
                entries += _window(199, pg="1") + [_entry(200, pg="1", state="started")]
        out[r] = _dump(r, groups, entries, {"0": list(range(N)), "1": tp})
    return out, {9}, "straggler"


SCENARIOS = [device_stalled, host_stalled, mismatched_ops, all_to_all_uneven_sizes, empty_dumps_completed, two_groups]


@pytest.mark.parametrize("make", SCENARIOS, ids=[f.__name__ for f in SCENARIOS])
def test_flight_recorder_alone_names_the_exact_culprits(tmp_path, make):
    dumps, culprits, category = make()
    a = _write(tmp_path, dumps)
    assert set(a.tables.sources["kind"]) == {"flight_recorder"}
    assert a.verdict.category == category, a.verdict
    assert set(a.verdict.culprit_ranks) == culprits, a.verdict


def test_every_rank_completed_everything_is_no_hang(tmp_path):
    a = _write(tmp_path, {r: _dump(r, {"0": (100, 100, 100)}, _window(100)) for r in range(N)})
    assert not any(f.rule == "flight-recorder-first-pending" for f in a.finding_list)

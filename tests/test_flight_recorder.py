"""Flight-recorder parser: real gloo JSON and pickle dumps, NCCL-shaped dumps, and hostile pickles/JSON."""
from __future__ import annotations

import os
import pickle

import pytest

from postmortem.parsers.base import parse_source
from postmortem.parsers.flight_recorder import numel, parse_flight_recorder
from postmortem.ingest.discover import Source, discover

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "fr")


def parse(name: str):
    src = next(s for s in discover(FIX) if s.source == name)
    assert src.kind == "flight_recorder"
    return parse_source(src)


def parse_bytes(tmp_path, data: bytes, name: str = "nccl_trace_rank_3"):
    p = tmp_path / name
    p.write_bytes(data)
    return parse_flight_recorder(Source(path=str(p), source=name, kind="flight_recorder", rank=3))


@pytest.mark.parametrize("ext", ["json", "pkl"])
def test_gloo_dump_rank0(ext):
    result = parse(f"gloo_skip_last_allreduce_rank0.{ext}")
    assert not result.problems
    rows = result.rows["collectives"]
    assert [r["seq"] for r in rows] == [1, 2, 3, 4, 5, 6, 7]
    assert [r["op"] for r in rows][4:] == ["gloo:broadcast", "gloo:barrier", "gloo:all_reduce"]
    last = rows[-1]
    assert (last["rank"], last["pg"], last["numel_in"], last["numel_out"], last["dtype"]) == (0, "0", 32, 32, "Float")
    assert (last["state"], last["last_enqueued"], last["last_completed"], last["timeout_ms"]) == ("scheduled", 7, 6, 5000)
    assert rows[5]["numel_in"] == 0 and rows[5]["dtype"] is None  # barrier: no tensors
    assert last["ts"].startswith("2026-11-21T14:03:52")


def test_json_and_pickle_dumps_agree():
    def key(rows):
        return [{k: v for k, v in r.items() if k != "source"} for r in rows]
    for rank in (0, 1):
        a = parse(f"gloo_skip_last_allreduce_rank{rank}.json").rows["collectives"]
        b = parse(f"gloo_skip_last_allreduce_rank{rank}.pkl").rows["collectives"]
        assert key(a) == key(b)


def test_pg_status_event_names_first_pending_entry_with_frames():
    (ev,) = parse("gloo_skip_last_allreduce_rank0.pkl").rows["events"]
    a = ev["details"]
    assert ev["kind"] == "fr_pg_status" and ev["level"] == "W" and ev["rank"] == 0
    assert (a["first_pending_seq"], a["first_pending_op"], a["backend"]) == (7, "gloo:all_reduce", "gloo")
    assert a["ranks"] == [0, 1] and a["version"] == "2.10" and a["entries"] == 7
    assert any(f["func"] == "main" and f["file"].endswith("make_fr_dumps.py") for f in a["first_pending_frames"])
    (ev1,) = parse("gloo_skip_last_allreduce_rank1.json").rows["events"]
    assert ev1["details"]["first_pending_seq"] == 6 and "first_pending_frames" in ev1["details"]


def _nccl_dump(**extra) -> dict:
    entries = [
        {"record_id": 0, "pg_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": 41, "p2p_seq_id": 0,
         "profiling_name": "nccl:all_reduce", "time_created_ns": 1_700_000_000_000_000_000,
         "input_sizes": [[1024, 1024]], "input_dtypes": ["BFloat16"], "output_sizes": [[1024, 1024]],
         "output_dtypes": ["BFloat16"], "state": "completed", "duration_ms": 12.6, "timeout_ms": 600000,
         "is_p2p": False, "frames": []},
        {"record_id": 1, "pg_id": 1, "process_group": ("1", "pp_group"), "collective_seq_id": 0, "p2p_seq_id": 9,
         "profiling_name": "nccl:send 3->4", "time_created_ns": 1_700_000_000_100_000_000,
         "input_sizes": [[8, 4096]], "input_dtypes": ["Float"], "output_sizes": [[8, 4096]],
         "output_dtypes": ["Float"], "state": "started", "timeout_ms": 600000, "is_p2p": True},
    ]
    dump = {"version": "2.4", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3, 4]"}},
            "pg_status": {"0": {"last_enqueued_collective": 41, "last_completed_collective": 41,
                                "last_started_collective": 41}},
            "comm_lib_version": "2.21.5", "entries": entries}
    dump.update(extra)
    return dump


def test_nccl_shaped_pickle_with_p2p_and_duration(tmp_path):
    result = parse_bytes(tmp_path, pickle.dumps(_nccl_dump()))
    coll, p2p = result.rows["collectives"]
    assert (coll["seq"], coll["numel_in"], coll["elapsed_ms"], coll["state"], coll["rank"]) == (41, 1048576, 13,
                                                                                               "completed", 3)
    assert (p2p["pg"], p2p["seq"], p2p["op"], p2p["last_completed"]) == ("1", 9, "nccl:send 3->4", None)
    status = {e["details"]["pg"]: e for e in result.rows["events"]}
    assert status["0"]["level"] == "I" and status["0"]["details"]["ranks"] == [0, 1, 2, 3, 4]


def test_rank_key_in_dump_wins_over_path(tmp_path):
    result = parse_bytes(tmp_path, pickle.dumps(_nccl_dump(rank=11)))
    assert {r["rank"] for r in result.rows["collectives"]} == {11}


def test_unknown_rank_is_a_problem(tmp_path):
    p = tmp_path / "dump.pkl"
    p.write_bytes(pickle.dumps(_nccl_dump()))
    result = parse_flight_recorder(Source(path=str(p), source="dump.pkl", kind="flight_recorder"))
    assert any("rank unknown" in pr for pr in result.problems) and result.rows["collectives"][0]["rank"] is None


class _Evil:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_pickle_that_would_run_os_system_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "pwned"
    payload = pickle.dumps({"version": "2.10", "entries": [_Evil(str(marker))]})
    assert b"system" in payload  # the payload really names os.system / posix.system
    result = parse_bytes(tmp_path, payload)
    assert not result.rows and any("system" in p and "not loaded" in p for p in result.problems)
    assert not marker.exists()


def test_pickle_naming_any_class_is_refused(tmp_path):
    import collections
    result = parse_bytes(tmp_path, pickle.dumps({"entries": collections.OrderedDict(a=1)}))
    assert not result.rows and any("collections" in p for p in result.problems)


@pytest.mark.parametrize("data,why", [
    (pickle.dumps(_nccl_dump())[:-40], "corrupt or truncated pickle"),
    (pickle.dumps([1, 2, 3]), "not a dict"),
    (b'{"entries": ' + b"[" * 1000 + b"]" * 1000 + b"}", "levels deep"),
    (b'{"version": "2.10", "entries": [{"collective_seq_id": 1', "not understood"),
    (b"b'{\"entries\":[]}'\nPICKLE KEYS: []", "printed bytes literal"),
])
def test_hostile_or_broken_dumps_become_problems(tmp_path, data, why):
    result = parse_bytes(tmp_path, data)
    assert not result.rows.get("collectives") and any(why in p for p in result.problems), result.problems


def test_random_bytes_with_pickle_header(tmp_path):
    import random
    rng = random.Random(3)
    for i in range(20):
        data = b"\x80\x04" + bytes(rng.randrange(256) for _ in range(500))
        result = parse_bytes(tmp_path, data, f"nccl_trace_rank_{i}")
        assert result.problems and not result.rows.get("collectives")


def test_numel_of_shapes():
    assert numel([[16], [4, 4]]) == 32 and numel([]) == 0 and numel([[]]) == 1
    assert numel("x") is None and numel([["a"]]) is None


# --- group identity: a dump's local pg ids (pg_status keys, entries' pg_id) -> global names (pg_config keys) ---

from postmortem.parsers.flight_recorder import group_names, p2p_peer  # noqa: E402

NVRX = os.path.join(os.path.dirname(__file__), "fixtures", "fr_nvrx")


def test_group_names_by_entries_then_creation_order():
    # ids 0,1,4,5,6 (local creation order), names 0,1,33,35,43 (job-wide creation order); entries pair 5 <-> 35.
    got = group_names(["0", "1", "4", "5", "6"], ["0", "1", "33", "35", "43"], {"5": "35"})
    assert got == {"5": ("35", "entries"), "0": ("0", "order"), "1": ("1", "order"), "4": ("33", "order"),
                   "6": ("43", "order")}


def test_group_names_leaves_unknown_what_order_cannot_settle():
    # one more name than ids between the anchors: which one never ran an op is unknown
    got = group_names(["0", "4", "6"], ["0", "33", "34", "43"], {"0": "0", "6": "43"})
    assert got == {"0": ("0", "entries"), "6": ("43", "entries")}
    # hashed names carry no order
    assert group_names(["0", "1"], ["a1f3", "9c2e"], {}) == {}
    # anchors out of order: no inference at all
    assert group_names(["1", "2", "3"], ["10", "20", "30"], {"1": "30", "3": "10"}) == {"1": ("30", "entries"),
                                                                                      "3": ("10", "entries")}


def test_group_names_of_a_gloo_dump_with_one_unnamed_group():
    assert group_names(["0"], [""], {}) == {"0": ("0", "single")}
    assert group_names(["0"], [""], {"0": "0"}) == {"0": ("0", "entries")}


def test_p2p_peer_is_a_position_in_the_group():
    assert p2p_peer("nccl:send 0->3", [0, 4, 8, 12]) == 12 and p2p_peer("nccl:recv 3<-1", [3, 7, 11, 15]) == 7
    assert p2p_peer("nccl:recv 0<-9", [0, 8]) is None and p2p_peer("nccl:all_reduce", [0, 1]) is None


@pytest.mark.parametrize("case", ["gpu_error_1st", "lock_gil_1st"])
def test_real_nccl_dumps_name_every_group_globally(case):
    """Every status event of the real 16-rank dumps carries the global group name; where an entry pairs a local id
    with its name, the events agree with it, and a group with no entry gets the name its rank set implies."""
    folder = os.path.join(NVRX, case)
    for src in discover(folder):
        if src.kind != "flight_recorder":
            continue
        result = parse_source(src)
        rows = result.rows.get("collectives", [])  # ranks 9 and 14 of lock_gil: nothing pending
        paired = {}
        for ev in result.rows["events"]:
            d = ev["details"]
            assert d["pg"] is not None and src.rank in d["ranks"], d
            paired[d["pg_id"]] = d["pg"]
        for row in rows:
            assert row["pg"] in paired.values()
        assert len(set(paired.values())) == len(paired)  # no two local ids on one group


def test_real_dump_marks_send_recv_groups_and_the_peer_waited_on():
    src = next(s for s in discover(os.path.join(NVRX, "lock_gil_1st")) if s.source == "_dump_0")
    events = {e["details"]["pg"]: e["details"] for e in parse_source(src).rows["events"]}
    pipe = events["39"]  # PIPELINE_MODEL_PARALLEL_GROUP [0, 8]: rank 0 sends to rank 8
    assert pipe["p2p"] and pipe["p2p_pending_op"] == "nccl:send 0->1" and pipe["p2p_peer"] == 8
    assert events["0"]["p2p"] and events["0"]["p2p_peer"] == 8  # the default group carried a recv from rank 8
    tp = events["35"]
    assert not tp.get("p2p") and tp["first_pending_seq"] == 84920 and tp["pending_count"] == 6


def test_group_in_pg_config_without_status_is_never_used_only_for_its_members(tmp_path):
    dump = _nccl_dump()
    dump["pg_config"]["7"] = {"name": "7", "desc": "tp", "ranks": "[2, 3]"}     # rank 3 belongs, never ran an op
    dump["pg_config"]["8"] = {"name": "8", "desc": "other", "ranks": "[5, 6]"}  # not rank 3's group
    events = {e["details"]["pg"]: e["details"] for e in parse_bytes(tmp_path, pickle.dumps(dump)).rows["events"]}
    assert events["7"]["never_used"] and events["7"]["last_enqueued"] == -1 and "8" not in events

"""Column-wise rows: repeated text of results from different parser processes is held once."""
from postmortem.tables.columns import Columns, share_text, to_columns


def _result(rank: int) -> dict:
    rows = [{"template": "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=<n>)",
             "message": f"[rank{rank}] timeout", "line": 10, "details": {"format": "watchdog"}},
            {"template": "loss <num>", "message": "loss 0.5", "line": None, "details": {}}]
    return {"events": to_columns(rows), "other": [{"x": 1}]}


def test_equal_text_becomes_one_object_and_nothing_else_changes():
    a, b = _result(1), _result(2)
    # equal strings built separately (as two unpicklings give them) are distinct objects before
    b["events"].data["template"] = ["".join(t) for t in b["events"].data["template"]]
    assert a["events"].data["template"][0] is not b["events"].data["template"][0]
    before = [dict(r["events"].data) for r in (a, b)]
    canon: dict = {}
    for r in (a, b):
        share_text(r, canon)
    assert [r["events"].data for r in (a, b)] == before              # same values
    assert a["events"].data["template"][0] is b["events"].data["template"][0]
    assert a["events"].data["message"][1] is b["events"].data["message"][1]
    assert a["events"].data["message"][0] != b["events"].data["message"][0]
    assert a["events"].data["line"] == [10, None] and a["other"] == [{"x": 1}]  # non-text and non-Columns untouched
    assert isinstance(a["events"], Columns)


def test_equal_details_and_frames_become_one_object_but_not_values_of_other_types():
    def res(pid):
        rows = [{"details": {"key": "sample_every", "value": 1000.0, "format": "config-echo"}},
                {"details": {"key": "x", "value": 1}}, {"details": {"key": "x", "value": True}},
                {"details": {"format": "f", "pid": pid}}]
        stacks = [{"frames": [{"func": "all_gather", "file": "c10d.py", "line": 3707}]}]
        return {"events": to_columns(rows), "stacks": to_columns(stacks)}
    a, b = res(1), res(2)
    canon: dict = {}
    for r in (a, b):
        share_text(r, canon)
    da, db = a["events"].data["details"], b["events"].data["details"]
    assert da[0] is db[0] and a["stacks"].data["frames"][0] is b["stacks"].data["frames"][0]
    assert da[1] is not da[2] and da[2]["value"] is True   # 1 and True are equal, but not the same value
    assert da[3] is not db[3] and db[3]["pid"] == 2


def test_past_the_limit_new_text_is_not_remembered_but_known_text_is_still_shared():
    canon: dict = {}
    first = {"events": to_columns([{"message": "every rank prints this"}, {"message": "rank 0's own"}])}
    share_text(first, canon, limit=2)
    later = {"events": to_columns([{"message": "".join(["every rank ", "prints this"])}, {"message": "rank 1's own"}])}
    share_text(later, canon, limit=2)
    assert later["events"].data["message"][0] is first["events"].data["message"][0]
    assert sum(isinstance(k, str) for k in canon) == 2 and "rank 1's own" not in canon


def test_stacks_that_come_after_the_text_filled_its_share_are_still_shared():
    # thousands of ranks: the rank logs' own text fills the limit before the small py-spy dumps are parsed
    canon: dict = {}
    share_text({"events": to_columns([{"message": f"rank {r}'s own"} for r in range(4)])}, canon, limit=2)
    a, b = ({"stacks": to_columns([{"frames": [{"func": "all_gather", "file": "c10d.py", "line": 3707}]}])}
            for _ in range(2))
    for r in (a, b):
        share_text(r, canon, limit=2)
    assert a["stacks"].data["frames"][0] is b["stacks"].data["frames"][0]

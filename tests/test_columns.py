"""Column-wise rows: repeated text of results from different parser processes is held once."""
from postmortem.columns import Columns, share_text, to_columns


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

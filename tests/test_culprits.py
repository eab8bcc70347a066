"""postmortem.ranks.culprits: culprits from how every rank ended (a pure function of the `ranks` table), one positive and
one negative case per mechanism, then the odd lines and `--baseline` on real runs."""
from __future__ import annotations

import os

import pandas as pd
import pytest

import postmortem
from postmortem.ranks.culprits import find_culprits
from postmortem.ranks.odd_lines import odd_lines

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = os.path.join(ROOT, "benchmarks", "lab", "cases")


def _ranks(*rows) -> pd.DataFrame:
    """A ranks table from (end, detail[, extra columns]) per rank 0..n-1."""
    out = []
    for r, row in enumerate(rows):
        end, detail = row[0], row[1]
        rec = {"rank": r, "end": end, "end_detail": detail, "end_at": f"rank{r}.log:{10 + r}", "end_ts": None,
               "stack_where": None, "stack_in_step": None, "last_completed": None, "stack_at": None}
        if len(row) > 2:
            rec.update(row[2])
        out.append(rec)
    return pd.DataFrame(out)


CLOSED = "RuntimeError: Connection closed by peer"
TIMEOUT = "RuntimeError: Timed out waiting 30000ms for recv operation to complete"


@pytest.mark.parametrize("rows,want,mechanism", [
    # the earliest failure a rank came to on its own; the rest are consequences
    ([("lost_peer", CLOSED), ("exception", "KeyError: 'x'"), ("terminated", "exit: SIGTERM")], [1], "root-failure"),
    # one rank busy elsewhere while the others wait
    ([("busy", "checkpoint io: _save"), ("waiting", TIMEOUT), ("waiting", TIMEOUT)], [0], "busy-while-waited"),
    # one rank left (exited normally) while the others were still in a collective
    ([("waiting", TIMEOUT), ("exited", "exit code 0"), ("waiting", TIMEOUT)], [1], "left-while-waited"),
    # one rank still in a collective after the others exited normally
    ([("lost_peer", CLOSED), ("exited", "exit code 0"), ("exited", "exit code 0")], [0], "extra-collective"),
    # one rank silent while its peers saw its connection close: it was gone (also one against one)
    ([("running", None), ("lost_peer", CLOSED)], [0], "gone"),
    # one rank silent while its peers timed out: it was alive, elsewhere
    ([("waiting", TIMEOUT), ("terminated", "exit: SIGTERM"), ("waiting", TIMEOUT)], [1], "never-reached"),
    # the ones that lost their peer after the others timed out arrived late
    ([("lost_peer", CLOSED), ("waiting", TIMEOUT), ("waiting", TIMEOUT)], [0], "late-arrival"),
    # the one that timed out while the others lost it waited alone first
    ([("waiting", TIMEOUT), ("lost_peer", CLOSED), ("lost_peer", CLOSED)], [0], "first-to-wait"),
    # every rank waits; a minority at another call site
    ([("waiting", TIMEOUT, {"stack_where": "barrier (x.py:1)"})] + [("waiting", TIMEOUT, {"stack_where": "all_reduce (x.py:9)"})] * 3,
     [0], "other-call-site"),
    # two ranks at two call sites: the one outside the training step
    ([("waiting", TIMEOUT, {"stack_where": "barrier (x.py:1)", "stack_in_step": False}),
      ("waiting", TIMEOUT, {"stack_where": "_engine_run_backward (g.py:9)", "stack_in_step": True})], [0], "other-call-site"),
])
def test_each_mechanism_names_its_culprit(rows, want, mechanism):
    c = find_culprits(_ranks(*rows))
    assert (c.ranks, c.mechanism) == (want, mechanism), c.reason


@pytest.mark.parametrize("rows", [
    [("exception", "ValueError: bad config"), ("exception", "ValueError: bad config")],  # every rank alike
    [("exited", "exit code 0"), ("exited", "exit code 0")],                              # a clean end
    [("waiting", TIMEOUT), ("exited", "exit code 0")],                                   # one against one: who diverged?
    [("waiting", TIMEOUT), ("waiting", TIMEOUT), ("waiting", TIMEOUT)],                  # all wait, nothing tells
])
def test_no_culprit_where_no_rank_stands_out(rows):
    assert find_culprits(_ranks(*rows)).ranks == []


def test_every_rank_failing_alike_is_said_so():
    c = find_culprits(_ranks(("exception", "RuntimeError: Expected to have finished reduction"),
                             ("exception", "RuntimeError: Expected to have finished reduction")))
    assert c.alike and c.ranks == [] and c.affected == [0, 1]


def test_odd_lines_name_no_culprit_in_a_job_that_did_not_fail():
    odd = pd.DataFrame([{"template": "x", "example": "end of data after 41 steps, exiting", "key": 1,
                         "kind": "minority", "ranks": [1], "count": 1, "at": ["rank1.log:3"], "distance": 0,
                         "new": None, "cascade": False, "suspect": True}])
    assert find_culprits(_ranks(("exited", "ok"), ("exited", "ok"), ("exited", "ok")), odd).ranks == []
    failed = _ranks(("waiting", TIMEOUT), ("waiting", TIMEOUT), ("waiting", TIMEOUT))
    assert find_culprits(failed, odd).ranks == [1]


# ---- the odd lines on real runs

def _lab(name):
    return os.path.join(CASES, name)


@pytest.mark.skipif(not os.path.isdir(CASES), reason="no lab cases")
def test_odd_lines_find_the_line_only_the_culprit_printed():
    """A real torchrun --redirects run: rank 0 alone runs a save that synchronises after training; only it printed
    the save line near its end, and the odd-lines table says so (new there, not a cascade)."""
    a = postmortem.analyze(_lab("barrier_skew__rank0-only-barrier-torchrun-redirects-3r-1"), quiet=True)
    odd = a.tables.odd_lines
    assert len(odd) and list(odd.columns)[:3] == ["template", "example", "key"]
    sus = odd[odd["suspect"]]
    assert len(sus) and all(rs == [0] for rs in sus["ranks"]), sus[["kind", "ranks", "example"]]


@pytest.mark.skipif(not os.path.isdir(CASES), reason="no lab cases")
def test_a_baseline_run_makes_its_own_lines_not_new():
    """`--baseline`: a template the good run printed is not new, so it is no suspect; against another job's run the
    culprit's line stays new."""
    case = _lab("barrier_skew__rank0-only-barrier-torchrun-redirects-3r-1")
    same = postmortem.analyze(case, quiet=True, baseline=case).tables.odd_lines
    assert len(same) and not same["new"].any() and not same["suspect"].any()
    other = postmortem.analyze(case, quiet=True, baseline=_lab("no_failure__max-steps-slurm-2r-1")).tables.odd_lines
    assert other["suspect"].any() and other[other["suspect"]]["new"].all()


def test_odd_lines_of_tables_without_last_lines_is_empty_with_the_documented_columns():
    from postmortem.ranks.odd_lines import COLUMNS
    df = odd_lines(pd.DataFrame(columns=["source", "line", "rank", "key", "message", "seen", "distance"]))
    assert list(df.columns) == COLUMNS and df.empty

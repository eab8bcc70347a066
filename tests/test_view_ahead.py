"""The report's verdict-independent parts computed by a child beside the rules (postmortem.reports.view_ahead), and
the helpers that made the report cheaper at thousands of ranks: the same report, byte for byte."""
from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import threading

import pytest

from postmortem import api
from postmortem.ingest import beside
from postmortem.reports import chart_process, view_ahead
from postmortem.reports.view_evidence import _RANK_TAG
from postmortem.reports.view_ranks import _NUMBER, sub_each
from postmortem.stacks import classify

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.join(os.path.dirname(HERE), "samples")
REPORTS = os.path.join(HERE, "fixtures", "report")

needs_fork = pytest.mark.skipif(
    not beside.can_fork() or (os.cpu_count() or 1) < 2 or threading.active_count() > 1,
    reason="needs fork, two CPUs and no other thread in the test process")


@pytest.fixture(autouse=True)
def _no_process_left():
    yield
    view_ahead.discard()
    left = chart_process.take()
    if left is not None:
        left.close()


# Run in a fresh interpreter: a thread some other test left running in this process would (rightly) stop the fork.
_COMPARE = """
import sys
from postmortem import api
from postmortem.reports import view_ahead
path, lang, broken = sys.argv[1], sys.argv[2], sys.argv[3] == "broken"
if broken:
    def parts(*_a, **_k):
        raise RuntimeError("the child fails")
    view_ahead.parts = parts  # (the child is a fork: it runs the broken one)
taken = []
real_take = view_ahead.take
view_ahead.take = lambda tables: taken.append(real_take(tables)) or taken[-1]
a = api.analyze(path, jobs=2, html=True, quiet=True)   # jobs=2: the parallel path, where the child is forked
with_ahead = a.to_html(generated_at="2026-11-29 00:00", lang=lang)
b = api.analyze(path, jobs=2, quiet=True)
assert view_ahead.take(b.tables) is None
plain = b.to_html(generated_at="2026-11-29 00:00", lang=lang)
got = taken[0]
print("parts:", ",".join(sorted(got)) if got else "none")
print("same" if with_ahead == plain else "differ")
"""


def _compare(path: str, lang: str = "en", broken: bool = False) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _COMPARE, path, lang, "broken" if broken else "ok"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split("\n")


@needs_fork
@pytest.mark.parametrize("path", [os.path.join(SAMPLES, "hung_rank_pyspy"),            # stacks, collectives
                                  os.path.join(SAMPLES, "uneven_batches_barrier"),
                                  os.path.join(REPORTS, "nccl_p2p_oom"),               # NCCL's own lines
                                  os.path.join(REPORTS, "gpu_oom_nvidia_smi"),
                                  os.path.join(REPORTS, "watchdog_timeout_tokenization")])
def test_the_parts_computed_ahead_give_the_same_report(path):
    parts, same = _compare(path)[:2]
    assert parts == "parts: collectives,labels,nccl,ranks,stacks"   # computed by the child, and used
    assert same == "same"


@needs_fork
def test_a_report_in_another_language_computes_the_worded_parts_itself():
    assert _compare(os.path.join(SAMPLES, "hung_rank_pyspy"), lang="zh")[1] == "same"


@needs_fork
def test_a_child_that_fails_leaves_the_parts_to_the_report():
    parts, same = _compare(os.path.join(SAMPLES, "hung_rank_pyspy"), broken=True)[:2]
    assert parts == "parts: none" and same == "same"


def test_parts_are_handed_only_for_the_tables_they_were_computed_from():
    if not beside.can_fork():
        pytest.skip("another thread runs in this process: no fork")
    a = api.analyze(os.path.join(SAMPLES, "hung_rank_pyspy"), jobs=2, html=True, quiet=True)
    b = api.analyze(os.path.join(SAMPLES, "hung_rank_pyspy"), jobs=2, quiet=True)
    assert view_ahead.take(b.tables) is None   # another analysis' tables: the child is stopped
    assert view_ahead.take(a.tables) is None   # and nothing is left for the first one either


def test_sub_each_is_a_sub_per_text():
    rng = random.Random(7)
    words = ["rank", "Rank ", "[rank", "]", "pid", ": ", "0x", "deadbeef12", "Thread ", "Process ", "7", "42", " ",
             "\n", "a", "é", "\x1f", "[default", "ranks", "crank", "_"]
    for _ in range(300):
        texts = ["".join(rng.choice(words) for _ in range(rng.randrange(0, 12))) for _ in range(rng.randrange(0, 9))]
        for rx, repl in ((_RANK_TAG, "#"), (_NUMBER, "N")):
            assert sub_each(rx, repl, texts) == [rx.sub(repl, t) for t in texts]


def test_the_rank_tag_pattern_matches_as_its_word_boundary_form():
    before = re.compile(r"\[(?:rank|default|Rank )\d+\]:?|\brank ?\d+\b|\bpid:? ?\d+|\bThread \d+|\bProcess \d+|"
                        r"\b0x[0-9a-fA-F]{6,}\b")
    rng = random.Random(11)
    parts = ["rank", "rank ", "Rank ", "[rank", "[Rank ", "[default", "]", "]:", "pid", "pid:", "pid: ", "0x",
             "0xdeadbeef", "Thread ", "Process ", "3", "12", "x", "_", "é", " ", "-", "."]
    for _ in range(3000):
        text = "".join(rng.choice(parts) for _ in range(rng.randrange(1, 10)))
        assert _RANK_TAG.sub("#", text) == before.sub("#", text), text


def test_a_stack_answer_is_remembered_per_list_and_never_for_an_equal_new_one():
    frames = [{"func": "all_reduce", "file": "torch/distributed/distributed_c10d.py", "line": 2050},
              {"func": "train_step", "file": "train.py", "line": 40}]
    assert classify.last_user_frame(frames)["func"] == "train_step"
    assert classify.last_user_frame(frames) is frames[1]   # the same list: the remembered answer
    other = [dict(f) for f in frames]
    assert classify.last_user_frame(other) is other[1]      # an equal list is asked again, not given frames[1]
    assert classify._decide(frames) == classify._decide.__wrapped__(frames) == ("collective_wait", 0)

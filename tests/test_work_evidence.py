"""What a straggler was doing: a progress bar is the work the others waited for only if, by its own rate, what was
left of it could have outlasted a good part of the timeout (a user's real NCCL log, and the same log with its
tokenizer bar swapped for a shard-loading bar seconds from its end)."""
from __future__ import annotations

import os

import postmortem

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL = os.path.join(ROOT, "tests", "fixtures", "report", "watchdog_timeout_tokenization", "console.log")


def test_a_bar_hours_from_its_end_is_the_stragglers_work():
    a = postmortem.analyze(os.path.dirname(REAL), quiet=True)
    assert (a.verdict.category, a.verdict.culprit_ranks) == ("straggler", [0])
    assert "tokenizer" in a.verdict.summary.lower() or "tokenizer" in a.finding_list[0].title.lower()


def test_a_bar_seconds_from_its_end_does_not_explain_a_30_minute_wait(tmp_path):
    lines = open(REAL, encoding="utf-8").read().split("\n")
    short = "Loading checkpoint shards:  75%|#######   | 3/4 [00:06<00:02,  2.51s/it]"
    # the bar glued to the first timeout becomes the short one; the fresh bar glued to a later timeout goes
    first = next(i for i, ln in enumerate(lines) if ln.startswith("Running tokenizer"))
    lines = [(short if i == first else "") + ln[ln.index("[E "):] if ln.startswith("Running tokenizer") and "[E " in ln
             else ln for i, ln in enumerate(lines)]
    (tmp_path / "console.log").write_text("\n".join(lines), encoding="utf-8")
    a = postmortem.analyze(str(tmp_path), quiet=True)
    busy = [f for f in a.finding_list if f.rule == "straggler-busy-rank"]
    assert not any("Loading checkpoint shards" in e.text for f in busy for e in f.evidence)

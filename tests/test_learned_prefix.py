"""Collector prefixes learned from a file's own lines (postmortem.parsers.learned_prefix) and their use in discovery/parsing."""
from __future__ import annotations

import pytest

from postmortem.parsers.learned_prefix import learn, strip_head
from postmortem.ingest.discover import sniff_kind

SHAPES = {
    "determined": [
        "[2024-02-27T21:35:28.705869Z] fa88a9df [rank=1] || step 10 loss 0.5",
        "[2024-02-27T21:35:28.726901Z] fa88a9df [rank=2] || Traceback (most recent call last):",
        '[2024-02-27T21:35:28.727029Z] fa88a9df [rank=2] ||   File "/w/train.py", line 126, in <module>',
    ],
    "arrival_stamp": [
        "2026-03-01T12:00:15.703Z Thread 339 (idle): \"MainThread\"",
        "2026-03-01T12:00:15.704Z     process_renderables (rich/live.py:246)",
        "2026-03-01T12:00:15.705Z     print (rich/console.py:1600)",
    ],
    "k8s_rank_pipe": [
        "12:00:01 rank:3 | epoch 1 step 5",
        "12:00:02 rank:3 | epoch 1 step 6",
        "12:00:03 rank:0 | epoch 1 step 6",
    ],
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_learned_prefix_strips_collector_tokens_and_keeps_indentation(name):
    lines = SHAPES[name]
    p = learn(lines)
    assert p is not None
    rest, info = p.strip(lines[1])
    assert "ts" in info
    assert not rest.startswith(("[", "2026", "12:"))
    if name == "determined":
        assert p.strip(lines[2])[0] == '  File "/w/train.py", line 126, in <module>'
        assert p.strip(lines[0])[1]["rank"] == 1
    if name == "k8s_rank_pipe":
        assert info["rank"] == 3 and rest == "epoch 1 step 6"


@pytest.mark.parametrize("lines", [
    ["{'loss': 1.0, 'lr': 2e-5, 'epoch': 0.1}"] * 5,           # metric dicts share a first word, not a prefix
    ["3: step 1", "2: step 1", "1: step 1", "0: step 1"],        # srun labels: handled by the scheme, not learned
    ["INFO root step 1", "INFO root step 2", "INFO root step 3"],  # words are never prefix tokens
    ["a", "b"],                                                  # too few lines to learn from
    ["node-7 | x", "node-8 | y", "node-9 | z"],                  # an id that changes from line to line is content
    ["job-7 | x", "job-7 | y", "other | z", "x | w"],              # one tag on too few lines to be a collector's
])
def test_no_prefix_learned_where_lines_share_none(lines):
    assert learn(lines) is None


def test_stamped_pyspy_dump_is_sniffed_as_pyspy():
    dump = ("Process 28634: python train.py\nPython v3.11.7 (/usr/bin/python3)\n\n"
            "Thread 339 (idle): \"MainThread\"\n    barrier (torch/distributed/distributed_c10d.py:4000)\n"
            "    main (train.py:40)\n    <module> (train.py:50)\n")
    stamped = "\n".join(f"[2026-03-05T12:26:{i:02d}.806Z] {ln}" for i, ln in enumerate(dump.split("\n")))
    assert sniff_kind(dump.encode(), "x.txt") == "pyspy"
    assert sniff_kind(stamped.encode(), "x.txt") == "pyspy"
    assert strip_head(b"plain log line\nanother\n") == b"plain log line\nanother\n"


def test_headless_pyspy_excerpt_is_a_stack(tmp_path):
    import postmortem
    (tmp_path / "dump.txt").write_text(
        "proxy         (miles/router/router.py:127)\n"
        "request       (httpx/_client.py:1527)\n"
        "__call__      (weakref.py:590)      # finalizer\n"
        "_cleanup      (wandb/apis/public/service_api.py:31)\n")
    a = postmortem.analyze(str(tmp_path))
    assert len(a.tables.stacks) == 1
    assert len(a.tables.stacks.iloc[0]["frames"]) == 4
    assert a.verdict.category == "logging_blocking"


def test_headless_sniff_near_miss_plain_log():
    log = b"epoch 1 (train.py:10) started\nloss went down\nall good\nstep 5\n"
    assert sniff_kind(log, "x.log") == "rank_log"


def _collector_head(seed: int) -> list[str]:
    """Random head lines whose share of stamped/rank-tagged lines straddles learn()'s threshold."""
    import random
    rnd = random.Random(seed)
    stamps = ["2024-05-01T10:00:00Z", "[2024-05-01", "10:00:01.123]", "[rank3]:", "RANK=7", "Rank:12", "rank"]
    plain = ["gpu-node-001:{pid}:{tid}", "[1]", "|", "::", "job-42", "INFO", "NCCL", "loss=0.5", "step", "12:00:0",
             "٢٠٢٤-٠٥-٠١", "10:00:0١", "{'loss':", "x" * 70]
    shape = rnd.sample(plain, rnd.randint(1, 3))
    if rnd.random() < 0.6:
        shape.insert(rnd.randint(0, len(shape)), rnd.choice(stamps))
    follow, stray = rnd.choice([0.3, 0.55, 0.62, 0.7, 0.95]), rnd.choice([0.0, 0.1, 0.3])
    host = rnd.choice(["gpu-node-001", "worker-7"])
    lines = []
    for _ in range(rnd.randint(0, 70)):
        head = shape if rnd.random() < follow else rnd.sample(plain, rnd.randint(0, 3))
        if head is not shape and rnd.random() < stray:
            head = head + [rnd.choice(stamps)]
        text = " ".join(head).replace("{pid}", str(rnd.choice([101, 102]))).replace("{tid}", str(rnd.choice([5, 6, 7])))
        lines.append(text.replace("gpu-node-001", host) + " " + rnd.choice(
            ["training started", "NCCL INFO Channel 00/0 : 0[0] -> 1[1]", "", "loss 0.5 at step 3", "Saving"]))
    return lines


@pytest.mark.parametrize("seed", range(200))
def test_stamp_or_rank_shortcut_never_changes_what_is_learned(seed, monkeypatch):
    """learn() stops early when too few lines hold a date, a time or `rank`; on random heads of collector-like
    tokens (stamps, rank tags, ids, separators, words, non-ASCII digits) it learns what the full search learns."""
    from postmortem.parsers import learned_prefix
    lines = _collector_head(seed)
    full = learned_prefix.learn(lines)
    monkeypatch.setattr(learned_prefix, "_too_few_stamps_or_ranks", lambda _lines: False)
    assert learned_prefix.learn(lines) == full


def test_the_shortcut_test_reaches_both_sides():
    """The generator above gives heads the shortcut stops on, heads it lets through, and learned prefixes."""
    from postmortem.parsers import learned_prefix, literal_scan
    if not literal_scan.available():
        pytest.skip("hyperscan not installed: learn() takes no shortcut")
    seen = set()
    for seed in range(200):
        lines = _collector_head(seed)
        body = [ln for ln in lines[:64] if ln.strip()]
        if len(body) >= 3:
            seen.add("stopped" if learned_prefix._too_few_stamps_or_ranks(body) else "searched")
        seen.add("learned" if learned_prefix.learn(lines) else "none")
    assert seen == {"stopped", "searched", "learned", "none"}


@pytest.mark.parametrize("lines,rest", [
    # `docker compose logs`: the service name padded and a bar before every line
    (["trainer-1  | step 1 loss 0.5", "trainer-1  | step 2 loss 0.4", "trainer-1  | [rank1]: ValueError: x"],
     "[rank1]: ValueError: x"),
    # `kubectl logs --prefix`: [pod/NAME/CONTAINER]
    (["[pod/train-worker-0/pytorch] step 1", "[pod/train-worker-0/pytorch] step 2",
      "[pod/train-worker-0/pytorch] [rank1]: ValueError: x"], "[rank1]: ValueError: x"),
    # journald / syslog: month, day, time, host, tag[pid]
    (["Nov 27 04:58:10 gpu-node-3 python3[41000]: step 1", "Nov 27 04:58:11 gpu-node-3 python3[41000]: step 2",
      "Nov 27 04:58:12 gpu-node-3 python3[41000]: [rank1]: ValueError: x"], "[rank1]: ValueError: x"),
])
def test_collector_tags_without_a_stamp_are_learned_when_every_line_has_them(lines, rest):
    """A tag a collector writes on every line (compose's service, kubectl's pod, journald's host and tag) is learned
    though it holds no rank or stamp: the same tag on nearly every line, with a separator or in a bracketed path."""
    p = learn(lines)
    assert p is not None and p.strip(lines[2])[0] == rest

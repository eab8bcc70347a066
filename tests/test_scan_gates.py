"""Formats declared `scan: regex`: the whole-block scan looks for their regex, not for their short trigger words, and
a line holding only those words is an event only where the regex matches (on the fast and the line-by-line path)."""
from __future__ import annotations

import pytest

from postmortem.parsers import formats, parse_source, prefilter, textlog
from postmortem.ingest import textio
from postmortem.ingest.discover import discover

# What a gradient-checkpointing job prints on every step, and ordinary words that hold the weak triggers.
NOISE = ["/usr/lib/python3.11/site-packages/torch/utils/checkpoint.py:{n}: UserWarning: None of the inputs have "
         "requires_grad=True. Gradients will be None",
         "step {n}: retrieval stats ok, example count {n}",
         "[rank0]: downloaded {n} shards; the broadcast plan is unavailable"]
EVENTS = ["Saving model checkpoint to /out/checkpoint-{n}",
          "[rank0]: Loading checkpoint shards from /ckpt/step-{n}",
          "2024-05-01 10:00:00 | INFO | Sampling: starting generation of 16 images",
          "***** Running Evaluation *****"]


def _log(tmp_path, lines: int = 30000, events_at=(20000,)) -> str:
    out = []
    for i in range(lines):
        out.append(NOISE[i % len(NOISE)].format(n=i))
        if i in events_at:
            out += [e.format(n=i) for e in EVENTS]
    p = tmp_path / "rank0.log"
    p.write_text("\n".join(out) + "\n")
    return str(p)


def _handed(path: str, fast: bool, monkeypatch) -> list:
    trig = textlog._prefilter_triggers()
    if not fast:
        monkeypatch.setattr(trig, "fast_events", lambda: None)
    sc = prefilter.LineScanner(path, textio.ReadStats(), 4 << 20, trig, exact_bytes=0)  # all summarised
    return [(n, t) for n, t, steps_only in sc if not steps_only]


@pytest.mark.parametrize("fast", [True, False])
def test_noise_with_trigger_words_is_not_handed_over_but_the_events_are(tmp_path, monkeypatch, fast):
    path = _log(tmp_path)
    handed = _handed(path, fast, monkeypatch)
    texts = [t for _, t in handed]
    for e in EVENTS:
        assert any(e.format(n=20000) in t for t in texts), e
    assert not any("retrieval stats" in t or "downloaded" in t for t in texts)
    assert sum("utils/checkpoint.py" in t for t in texts) == 0  # not a checkpoint event: a warning's file name


def test_both_paths_hand_over_the_same_lines(tmp_path, monkeypatch):
    path = _log(tmp_path, events_at=(100, 15000, 29000))
    assert _handed(path, True, monkeypatch) == _handed(path, False, monkeypatch)


def test_events_become_rows(tmp_path):
    src = discover(_log(tmp_path))[0]
    kinds = [r["kind"] for r in parse_source(src).rows.get("events", [])]
    for kind in ("checkpoint_save", "checkpoint_load", "sample_start", "eval_start"):
        assert kind in kinds


@pytest.mark.parametrize("echo", ["config: sample_every=1000 sample_batch_size=16",
                                  "{'eval_every': 500, 'save_period': 5000}",
                                  "  save_period: 5000"])
def test_config_echoes_after_the_head_are_each_found(tmp_path, monkeypatch, echo):
    """Config lines printed after a long start-up (beyond the head the config words are looked for in) are found
    one by one, not only the first config word of each block: `sample_every` on the second line is the period."""
    lines = [f"NCCL INFO Channel {i % 32:02d}/0 : 0[0] -> 1[1] via P2P/IPC" for i in range(4000)]
    lines += ["config: eval_every=500 log_period=10", echo]  # the block's first `every` and `period`
    lines += [f"epoch 3 batch {i} loss 0.5" for i in range(20000)]
    p = tmp_path / "rank0.log"
    p.write_text("\n".join(lines) + "\n")
    texts = [t for _, t in _handed(str(p), True, monkeypatch)]
    assert "config: eval_every=500 log_period=10" in texts and echo in texts
    assert sum(t.startswith("epoch 3 batch") for t in texts) <= prefilter.INFO_CAP + 1  # progress, not config


def test_scan_pattern_finds_every_sample_behind_a_prefix():
    """The derived scan pattern matches every sample of its format, also after a launcher prefix (the format
    itself matches the message, which `^` anchors)."""
    from postmortem.parsers import literal_scan
    if not literal_scan.available():
        pytest.skip("hyperscan not installed")
    scanned = [f for f in formats.FORMATS if f.scan_regex]
    assert {f.name for f in scanned} >= {"checkpoint-save", "checkpoint-load", "eval-start", "sample-start"}
    defs = {d["name"]: d for d in formats.FORMAT_DEFS}
    for f in scanned:
        pattern, caseless = formats.scan_pattern(f)
        matcher = literal_scan.LiteralSet([], prefilters=[(pattern.encode(), caseless)])
        for line, _ in defs[f.name]["samples"]:
            for shown in (line, "[default3]:" + line, "2024-05-01T10:00:00Z " + line):
                assert matcher.search(shown.encode()), (f.name, shown)


def test_scan_pattern_rewrites():
    assert formats._without_optional_tail(r"(?:a|b)(?:[^\n]*?(?P<p>x))?") == r"(?:a|b)"
    assert formats._without_optional_tail(r"(a(b)?)") == r"(a(b)?)"      # the tail is not a top-level group
    assert formats._without_optional_tail(r"(?:x)?") == r"(?:x)?"         # nothing would be left
    fmt = formats.LineFormat("x", "k", "info", ("a",), formats.regex.compile(r"(?i)^\s*(?P<w>[^\n^]+)x$"))
    assert formats.scan_pattern(fmt) == (r"\s*([^\n^]+)x$", True)
    # bounded repeats lose their upper bound (a wider scan, a database built in a third of the time); escaped
    # braces, braces in a class and exact counts stay
    assert formats._unbounded(r"a[^\n{]{0,60}?b\{1,2\}c{2,5}d{3}") == r"a[^\n{]*b\{1,2\}c{2,}d{3}"
    for f in formats.FORMATS:
        if f.scan_regex:
            assert not formats._BOUNDED_REPEAT.search(formats.scan_pattern(f)[0].replace("\\{", "")), f.name


def test_unknown_scan_value_is_refused():
    bad = [{"name": "x", "kind": "e", "level": "info", "triggers": ["a"], "pattern": "a", "scan": "words",
            "samples": [("a", {})]}]
    with pytest.raises(formats.FormatError):
        formats.load_formats(bad)

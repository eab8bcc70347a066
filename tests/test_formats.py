"""Line-format declarations: every sample parses to its declared values, and bad declarations are refused."""
from __future__ import annotations

import pytest

from postmortem.parsers import formats


def test_builtin_formats_load_and_have_samples():
    loaded = formats.load_formats()  # compiled and checked against their samples (a run only declares them)
    assert len(loaded) == len(formats.FORMAT_DEFS)
    assert [f.name for f in loaded] == [f.name for f in formats.FORMATS]
    assert all(d["samples"] for d in formats.FORMAT_DEFS)


@pytest.mark.parametrize("d", formats.FORMAT_DEFS, ids=lambda d: d["name"])
def test_each_sample_matches_through_match_line(d):
    for line, want in d["samples"]:
        hits = {f.name: m for f, m in formats.match_line(line)}
        assert d["name"] in hits, f"{d['name']} not matched by match_line on {line!r}"
        for key, value in want.items():
            assert hits[d["name"]].group(key) == value


def test_format_whose_sample_does_not_match_is_refused():
    bad = [{"name": "x", "kind": "error", "level": "error", "triggers": ["boom"], "pattern": r"boom (?P<n>\d+)",
            "samples": [("boom here", {})]}]
    with pytest.raises(formats.FormatError):
        formats.load_formats(bad)


def test_format_whose_sample_yields_wrong_value_is_refused():
    bad = [{"name": "x", "kind": "error", "level": "error", "triggers": ["boom"], "pattern": r"boom (?P<n>\d+)",
            "samples": [("boom 12", {"n": "13"})]}]
    with pytest.raises(formats.FormatError):
        formats.load_formats(bad)


def test_format_without_samples_is_refused():
    with pytest.raises(formats.FormatError):
        formats.load_formats([{"name": "x", "kind": "e", "level": "error", "triggers": ["a"], "pattern": "a",
                               "samples": []}])


def test_boring_line_matches_nothing():
    assert formats.match_line(" 45%|████▌     | 450/1000 [00:10<00:12, 44.1it/s]") == []


# ---- the fast dispatch (trigger positions, requires_nocase, memo) gives what testing every format would give

# Lines for every branch of the formats that declare requires_nocase (and some overlapping triggers).
_BRANCH_LINES = [
    "gradient became nan", "loss is inf", "NaN or Inf found in input tensor.", "detected nan in the output",
    "Function 'LogSoftmaxBackward0' returned nan values in its 0th output.", "non-finite loss, ending training",
    "train/loss_total: -inf", "Restoring model weights from ckpt", "resumed from checkpoint-500",
    "x = torch.load(path)", "Loaded state dict", "Search for history checkpoints...", "Saved model to out.pt",
    "checkpoint 5 was saved", "save_checkpoint(step)", "***** Running Prediction *****", "begin the validation",
    "Evaluating: 100%", "Validation DataLoader 0: 100%", "Starting sampling", "Generating 16 images",
    "generating samples", "Sampling", "Loading dataset shards: Killed process 12 (python) NCCL WARN NCCL error nan",
]


def _all_sample_lines():
    return [line for d in formats.FORMAT_DEFS for line, _ in d["samples"]] + _BRANCH_LINES


def _variants(line: str) -> list[str]:
    """Case and folding variants a case-insensitive pattern still matches (long s, dotless i, Kelvin sign)."""
    return [line, line.upper(), line.lower(), line.swapcase(), line.replace("s", "\u017f"),
            line.replace("i", "\u0131"), line.replace("k", "\u212a"), "\u00e9 " + line.upper(), line + " \u2588\u2588"]


def _plain_match_line(message: str):
    hits = []
    for fmt in formats.FORMATS:
        if any(t in message for t in fmt.triggers):
            m = fmt.regex.search(message)
            if m:
                hits.append((fmt.name, m.span(), m.groupdict()))
    return hits


@pytest.mark.parametrize("line", _all_sample_lines() + [
    "nan" * 40 + " loss: nan",  # more trigger positions than the position walk takes
    "Validation DataLoader 0:   0%|          | 0/20 [00:00<?, ?it/s]", "", "x",
    "Resumed training; state loaded", "Search for history checkpoints...", "sampling is not generating",
])
def test_match_line_equals_testing_every_format(line):
    for variant in _variants(line):
        got = [(f.name, m.span(), m.groupdict()) for f, m in formats.match_line(variant)]
        assert got == _plain_match_line(variant), variant


def test_triggered_finds_every_format_with_a_trigger():
    for line in _all_sample_lines():
        for variant in _variants(line):
            want = sum(1 << i for i, f in enumerate(formats.FORMATS) if any(t in variant for t in f.triggers))
            assert formats.triggered(variant) == want == formats._triggered_plain(variant), variant


def test_requires_nocase_never_skips_a_match():
    for fmt in formats.FORMATS:
        if not fmt.requires_nocase:
            continue
        for line in _all_sample_lines():
            for variant in _variants(line):
                if fmt.regex.search(variant):
                    assert fmt.may_match(formats.lower_for_literals(variant)), (fmt.name, variant)


def test_lower_for_literals_declines_odd_case_folds():
    assert formats.lower_for_literals("Loss: NaN") == "loss: nan"
    assert formats.lower_for_literals("\u212aILLED \u2588") == "killed \u2588"
    for odd in ("lo\u017fs", "\u0131nf", "\u0130NF"):
        assert formats.lower_for_literals(odd) is None


def test_format_groupdict_keeps_the_regex_order():
    for fmt in formats.FORMATS:
        for d in formats.FORMAT_DEFS:
            if d["name"] == fmt.name:
                for line, _ in d["samples"]:
                    m = fmt.regex.search(line)
                    assert list(fmt.groupdict(m).items()) == list(m.groupdict().items())


def test_requires_nocase_must_hold_on_the_samples():
    bad = [{"name": "x", "kind": "e", "level": "error", "triggers": ["boom"], "pattern": "boom",
            "requires_nocase": [["bang"]], "samples": [("boom", {})]}]
    with pytest.raises(formats.FormatError):
        formats.load_formats(bad)

"""Line-format declarations: every sample parses to its declared values, and bad declarations are refused."""
from __future__ import annotations

import pytest

from parsers import formats


def test_builtin_formats_load_and_have_samples():
    loaded = formats.load_formats()
    assert len(loaded) == len(formats.FORMAT_DEFS)
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

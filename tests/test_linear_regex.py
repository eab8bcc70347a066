"""parsers/linear_regex.py: the linear search form of the gate patterns finds a match on exactly the lines the
patterns themselves match, and its cost grows with the line, not with the line squared."""
from __future__ import annotations

import random
import re
import time

import pytest
import regex

from postmortem.parsers import linear_regex, textlog
from postmortem.parsers.linear_regex import LinearSearch, NotLinear

GATES = textlog._gates()["gates"]
FLAGS = regex.M | regex.A

# The line the fuzz harness found (../shared/adversarial/long-line-rank3.log): a sentence with `saving` repeated to
# 66,000 characters, no `checkpoint` after it; `save_checkpoint`-less, so every `saving` opened a scan to the end.
SENTENCE = "ly, was transferred incorrectly, or the file was modified after saving.  file was modified after saving. "


def _words(pattern: str) -> list[str]:
    """Pieces of a line that a pattern cares about: its literal words (as they are, capitalised, upper case)."""
    words = set(re.findall(r"[A-Za-z_]{2,}", pattern.replace("\\b", " ").replace("\\s", " ").replace("\\d", " ")))
    out = set()
    for w in words:
        out |= {w, w.capitalize(), w.upper()}
    return sorted(out)


def _random_lines(pattern: str, n: int, seed: int) -> list[str]:
    """Lines of the pattern's words glued or separated (blank, dot, newline, ...) and a little noise."""
    rnd = random.Random(seed)
    words = _words(pattern) + ["*", "**", "x", "12", "(", "_"]
    seps = ["", " ", " ", " ", "  ", ".", ":", "\t", "-", "\n", "/", " the "]
    return ["".join(rnd.choice(words) + rnd.choice(seps) for _ in range(rnd.randint(1, 8))) for _ in range(n)]


@pytest.mark.parametrize("pattern,caseless", GATES)
def test_linear_form_matches_the_same_lines(pattern, caseless):
    """Random lines made of the pattern's own words, separators and newlines: same answer as the plain regex."""
    plain = regex.compile(("(?i)" if caseless else "") + pattern, FLAGS)
    linear = LinearSearch([(pattern, caseless)], regex.compile, FLAGS)
    lines = _random_lines(pattern, 4000, seed=len(pattern))
    matched = 0
    for line in lines:
        want = plain.search(line) is not None
        assert (linear.search(line) is not None) == want, (pattern, line)
        matched += want
    assert 20 < matched < len(lines) - 20  # the lines test both answers, many times each


def test_linear_form_on_the_formats_own_samples():
    """Each `scan: regex` format's sample lines pass its gate (the scan finds what the format can match)."""
    from postmortem.parsers import formats as fmts
    for d in fmts.FORMAT_DEFS:
        if d.get("scan") != "regex":
            continue
        gate = LinearSearch([fmts.scan_pattern(next(f for f in fmts.FORMATS if f.name == d["name"]))],
                            regex.compile, FLAGS)
        for line, _ in d["samples"]:
            assert gate.search(line) is not None, (d["name"], line)


def _cpu(fn, *args) -> float:
    t = time.process_time()
    fn(*args)
    return time.process_time() - t


def test_gate_search_is_linear_on_the_hostile_line():
    """The gate on the found line, and on it repeated 8x and 32x: time grows ~linearly (quadratic would be 64x and
    1024x); the whole union as one regex took 9 s on 66,000 characters, the linear form milliseconds."""
    gate = textlog._prefilter_triggers().gate_re
    line = (SENTENCE * (66_000 // len(SENTENCE) + 1))[:66_000]
    assert gate.search(line) is None
    base = min(_cpu(gate.search, line) for _ in range(3))
    for k in (8, 32):
        t = min(_cpu(gate.search, line * k) for _ in range(2))
        assert t < 3 * k * base + 0.05, (k, t, base)
    # and the answer still turns on a later `checkpoint` within the same line, not on another line's
    assert gate.search(line + " checkpoint") is not None
    assert gate.search(line + "\ncheckpoint") is None


@pytest.mark.parametrize("line", [" " * 50_000 + "x", "*" * 50_000 + "x", "saving " * 10_000,
                                  "resume " * 10_000 + "\n" + "loading " * 5_000])
def test_other_hostile_lines_stay_fast(line):
    """A run of blanks (a dropped `^\\s*`), of stars (`\\*+ Running`), a word repeated (`P[^\\n]*S`)."""
    gate = textlog._prefilter_triggers().gate_re
    assert _cpu(gate.search, line) < 0.2


@pytest.mark.parametrize("alt,err", [
    (r"(?:a|ab)[^\n]*b", "word's end"),       # a head with two ends at one start: the first P is not enough
    (r"\bx\b[^\n]*y[^\n]*z", "more than one"),
])
def test_unsafe_shapes_are_refused(alt, err):
    with pytest.raises(NotLinear, match=err):
        LinearSearch([(alt, False)])


@pytest.mark.parametrize("alt,want", [(r"\s*(?:Sampling)\b", r"(?:Sampling)\b"), (r"\*+ Running", r"\* Running"),
                                      (r"[*=]+ x", r"[*=] x"), (r"\d+\.\d+", r"\d\.\d+")])
def test_simplified_leading_runs(alt, want):
    assert linear_regex.split_alternative(alt) == (want, None)

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
    (r"ab*[^\n]*c", "word's end"),            # a head with many ends at one start: its first match may end late
    (r"\bx\b[^\n]*y[^\n]*z", "more than one"),
])
def test_unsafe_shapes_are_refused(alt, err):
    with pytest.raises(NotLinear, match=err):
        LinearSearch([(alt, False)])


@pytest.mark.parametrize("pattern", [r"(?:a|ab)[^\n]*b", r"(?:abcdef|cd)[^\n]*?e", r"(?:x|[Oo]ver)[^\n]*?(?:y|z)"])
def test_heads_of_fixed_width_alternatives(pattern):
    """Alternatives of fixed width before a gap: the tail may start at the earliest end of any of them (`abcdef`
    starts first, `cd` ends first)."""
    plain = re.compile(pattern)
    linear = LinearSearch([(pattern, False)], re.compile)
    rnd = random.Random(7)
    pieces = ["a", "b", "ab", "abcdef", "cd", "e", "x", "Over", "over", "y", "z", " ", "\n"]
    for _ in range(3000):
        line = "".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 10)))
        assert (plain.search(line) is not None) == (linear.search(line) is not None), (pattern, line)


@pytest.mark.parametrize("alt,want", [(r"\s*(?:Sampling)\b", r"(?:Sampling)\b"), (r"\*+ Running", r"\* Running"),
                                      (r"[*=]+ x", r"[*=] x"), (r"\d+\.\d+", r"\d\.\d+")])
def test_simplified_leading_runs(alt, want):
    assert linear_regex.split_alternative(alt) == (want, None)


# ---- every regex the parsers (and the stages that read log lines from the tables) apply to a line: its search time
# grows linearly with hostile lines made of the pattern's own words (a word repeated, a word then a long run of one
# character, a long run of one character). A pattern quadratic there is 16x slower on 4x the line, linear 4x.

_LINE_PACKAGES = ("parsers", "reports", "postmortem/ingest", "postmortem/tables", "postmortem/ranks", "postmortem/rules",
                  "postmortem/verdict", "postmortem/stacks")
_RUN_CHARS = (" ", "a", "0", ".", "/", "-", "*", ":", "=", "(", "[", "'", "\t", "x.", "a ")


def _modules():
    import importlib
    import pathlib
    root = pathlib.Path(__file__).resolve().parent.parent
    for pkg in _LINE_PACKAGES:
        base = f"postmortem.{pkg}" if pkg in ("parsers", "reports") else pkg.replace("/", ".")
        for path in sorted((root / pkg).glob("*.py")):
            if path.name != "__init__.py":
                yield importlib.import_module(f"{base}.{path.stem}")


def _patterns() -> list:
    from postmortem.parsers import formats
    found: dict = {}

    def add(obj, where, depth=0):
        if isinstance(obj, (re.Pattern, regex.Pattern, LinearSearch)):
            found.setdefault(id(obj), (where, obj))
        elif depth < 2 and isinstance(obj, (list, tuple)):
            for i, x in enumerate(obj):
                add(x, f"{where}[{i}]", depth + 1)
        elif depth < 2 and isinstance(obj, dict):
            for k, x in list(obj.items())[:200]:
                add(x, f"{where}[{k!r}]", depth + 1)
    for mod in _modules():
        for name, val in vars(mod).items():
            add(val, f"{mod.__name__}.{name}")
    for f in formats.FORMATS:
        add(f.regex, f"format {f.name}")
    from postmortem import catalog  # the message families (read the first catalog.MAX_LINE characters of a line)
    add(catalog.EXCEPTION_LINE_RE, "catalog.EXCEPTION_LINE_RE")
    for fam in catalog.families():
        add(fam.regex, f"family {fam.id}")
    return sorted(found.values(), key=lambda p: p[0])


def _literals(pattern) -> list[str]:
    src = pattern.pattern if isinstance(pattern.pattern, str) else pattern.pattern.decode("latin-1")
    out = set()
    for m in re.finditer(r"(?:\\.|[A-Za-z0-9_ :;,.'\"=/<>!@#%&-])+", src):
        s = re.sub(r"\\(.)", r"\1", m.group()).strip()
        if 2 <= len(s) <= 40:
            out.add(s)
            out.update(re.findall(r"[A-Za-z_]{3,}", s))
    return sorted(out)


def _hostile(pattern, n: int) -> list[tuple[str, str]]:
    cases = [(f"{c!r}*n", (c * n)[:n]) for c in _RUN_CHARS]
    for lit in _literals(pattern):
        for sep in ("", " ", "."):
            unit = lit + sep
            cases.append((f"({lit!r}+{sep!r})*n", (unit * (n // len(unit) + 1))[:n]))
        for c in (" ", "a", "0", ".", "-"):
            cases.append((f"{lit!r}+{c!r}*n", lit + c * n))
    return cases


def _search_cpu(pattern, text) -> float:
    if isinstance(pattern.pattern, bytes):
        text = text.encode("latin-1", "replace")
    t = time.process_time()
    pattern.search(text)
    return time.process_time() - t


def test_line_regexes_search_in_linear_time():
    """No regex applied to a log line backtracks super-linearly on a long hostile line (the fuzz harness finds them
    one slow input at a time; this asks every pattern at once)."""
    n, k = 1000, 4
    slow = []
    for where, pattern in _patterns():
        short, long = _hostile(pattern, n), _hostile(pattern, k * n)
        for (label, a), (_, b) in zip(short, long):
            t_short = _search_cpu(pattern, a)
            if t_short < 1e-4:
                continue
            t_long = _search_cpu(pattern, b)
            if t_long > 2e-3 and t_long > 10 * t_short:
                t_long = min(t_long, _search_cpu(pattern, b))
                t_short = min(t_short, _search_cpu(pattern, a))
                if t_long > 2e-3 and t_long > 10 * t_short:
                    slow.append(f"{where} on {label}: {t_short * 1e3:.1f} ms at {n}, {t_long * 1e3:.1f} ms at {k * n}")
    assert not slow, "\n".join(slow)

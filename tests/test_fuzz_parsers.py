"""Property-based fuzzing (small budgets for CI): arbitrary bytes and mutated real samples, for every parser and for
discovery, never raise past the parser boundary, and every failure becomes a `sources.problem`.

The same harness runs at scale with `python fuzz/run.py --budget N` (see fuzz/README.md)."""
from __future__ import annotations

import functools
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from postmortem.parsers.base import parse_source, registered_kinds
from postmortem.ingest import discover as discover_mod
from postmortem.ingest.discover import KINDS, Source, path_hints, sniff_kind

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "fuzz"))
import harness  # noqa: E402

SETTINGS = settings(max_examples=40, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


@functools.lru_cache(maxsize=1)
def _seeds():
    return harness.load_seeds([os.path.join(ROOT, "samples"), os.path.join(ROOT, "tests", "fixtures")],
                              max_bytes=64 * 1024)


@functools.lru_cache(maxsize=1)
def _workdir():
    workdir = harness.new_workdir()
    harness.warm(workdir)  # imports and compiled patterns: every input is then timed against its own CPU budget
    return workdir


def _check(inp: harness.FuzzInput, pipeline: bool = False) -> None:
    out = harness.exercise(inp, _workdir(), pipeline=pipeline, timeout_s=60)
    assert not out.failures, f"{inp.kind} {inp.name} {inp.wrap} {inp.data[:200]!r}: {out.failures}"


@pytest.mark.parametrize("kind", harness.all_kinds())
def test_parsers_survive_mutated_samples_and_arbitrary_bytes(kind):
    """Every kind, forced onto hostile content: no parser exception, no escaped exception, rows fit the schema."""
    count = {"n": 0}

    @SETTINGS
    @given(harness.fuzz_inputs(_seeds(), [kind], max_size=4096))
    def prop(inp):
        count["n"] += 1
        _check(inp, pipeline=count["n"] % 10 == 0)  # every 10th also through tables, rules and reports

    prop()


@SETTINGS
@given(st.binary(max_size=2048), st.sampled_from(sorted(harness.all_kinds())))
def test_arbitrary_bytes_become_problems_not_exceptions(data, kind):
    name = harness.NAMES.get(kind, ["x"])[0]
    _check(harness.FuzzInput(kind, name, data))


_NAME_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00")


@SETTINGS
@given(st.binary(max_size=4096), st.text(_NAME_CHARS, min_size=1, max_size=60))
def test_sniff_kind_and_path_hints_accept_anything(head, name):
    assert sniff_kind(head, name) in KINDS
    hints = path_hints(name)
    assert all(isinstance(v, (int, str)) for v in hints.values())
    assert set(hints) <= {"rank", "local_rank", "attempt", "host", "pid"}


@SETTINGS
@given(st.lists(st.tuples(st.text(_NAME_CHARS, min_size=1, max_size=40), st.binary(max_size=512)),
                min_size=1, max_size=6, unique_by=lambda t: t[0]))
def test_discovery_lists_every_file_of_any_name(tmp_path_factory, files):
    root = tmp_path_factory.mktemp("tree")
    written = 0
    for name, data in files:
        if name in (".", "..") or len(name.encode("utf-8", "surrogateescape")) > 200:
            continue
        (root / name).write_bytes(data)
        written += 1
    sources = discover_mod.discover(str(root))
    assert len(sources) == written
    for s in sources:
        assert s.kind in KINDS
        assert not any(ord(c) < 32 or 0x7f <= ord(c) < 0xa0 for c in s.source), repr(s.source)
        res = parse_source(s)
        assert not [p for p in res.problems if " failed: " in p], res.problems


def test_a_parser_that_raises_becomes_a_problem(tmp_path, monkeypatch):
    """The boundary itself: a crashing parser is reported in `sources.problem`, and the analysis goes on."""
    from postmortem.parsers import base
    (tmp_path / "rank0.log").write_text("RuntimeError: CUDA out of memory.\n")

    def broken(source: Source):
        raise KeyError("boom")

    monkeypatch.setitem(base._REGISTRY, "rank_log", [*base._REGISTRY.get("rank_log", []), broken])
    import postmortem
    a = postmortem.analyze(str(tmp_path), jobs=1)
    problem = a.tables.sources.iloc[0]["problem"]
    assert "failed: KeyError" in problem and "boom" in problem
    assert a.verdict.category == "gpu_oom"  # the other parser's rows survive


def test_every_registered_kind_is_fuzzed():
    assert set(registered_kinds()) <= set(harness.all_kinds())
    assert set(harness.NAMES) >= set(KINDS)


def test_fuzz_script_runs_a_small_budget(tmp_path):
    """The standalone script (CI budget): counts inputs, finds no failure, exits 0."""
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "fuzz", "run.py"), "--budget", "200", "--seed", "7",
                           "--pipeline-every", "20", "--json", str(tmp_path / "stats.json")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "inputs run: 200 " in proc.stdout
    import json
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["inputs"] == 200 and stats["failures"] == {} and stats["pipeline"] == 10


REGRESSIONS = os.path.join(ROOT, "fuzz", "regressions")


def _saved():
    if not os.path.isdir(REGRESSIONS):
        return []
    return [pytest.param(inp, id=label) for case in sorted(os.listdir(REGRESSIONS))
            for label, inp in harness.saved_inputs(os.path.join(REGRESSIONS, case))]


@pytest.mark.parametrize("inp", _saved())
def test_inputs_that_once_failed_now_pass(inp):
    """Every input fuzz/run.py found failing (parser exception, escape, time-out, over its CPU budget) is kept and
    replayed, through the whole pipeline and reports, within the same per-MB budget (the hostile long line also 2x
    and 8x as long)."""
    out = harness.exercise(inp, _workdir(), pipeline=True, timeout_s=60)
    assert not out.failures, out.failures

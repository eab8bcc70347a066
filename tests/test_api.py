"""The notebook API: tables as documented attributes, findings as a DataFrame, fixed dtypes, a short repr."""
from __future__ import annotations

import os

import pandas as pd
import pytest

import postmortem
from postmortem.tables import schema
from postmortem.tables.build import Tables

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "samples", "uneven_batches_barrier", "logs")


@pytest.fixture(scope="module")
def a():
    return postmortem.analyze(SAMPLE, quiet=True)


def test_tables_are_attributes_that_tab_complete(a):
    names = [n for n in dir(a.tables) if not n.startswith("_")]
    for table in schema.TABLE_NAMES:
        assert table in names
        assert isinstance(getattr(a.tables, table), pd.DataFrame)
        doc = getattr(Tables, table).__doc__
        assert all(f"{c} (" in doc for c in schema.columns(table)), table   # every column documented
    assert "events=" in repr(a.tables)


SAMPLE_DIRS = sorted(os.path.join(ROOT, "samples", d, "logs") for d in os.listdir(os.path.join(ROOT, "samples"))
                     if os.path.isdir(os.path.join(ROOT, "samples", d, "logs")))


@pytest.mark.parametrize("path", SAMPLE_DIRS, ids=os.path.basename)
def test_every_column_has_exactly_the_documented_dtype(path):
    """docs/tables.md is what pandas returns, whatever its version (pandas 3 infers `str` and `datetime64[s, UTC]`
    where the API promises `object` and `datetime64[ns, UTC]`): every table, the rank table and a.findings."""
    a = postmortem.analyze(path, quiet=True)
    wrong = []
    for table in list(schema.TABLE_NAMES) + ["ranks"]:
        df = a.tables.frames[table]
        for col, want in schema.documented_dtypes(table).items():
            if str(df[col].dtype) != want:
                wrong.append((table, col, str(df[col].dtype), want))
    from postmortem.verdict.frame import FINDING_COLUMNS
    wrong += [("findings", c, str(a.findings[c].dtype), d) for c, d in FINDING_COLUMNS.items()
              if str(a.findings[c].dtype) != d]
    assert not wrong, wrong


def test_the_verdict_carries_why_fix_and_the_lines_it_rests_on(a):
    v = a.verdict
    assert v.why and v.fix and v.evidence and all(e.source for e in v.evidence) and any(e.text for e in v.evidence)
    assert "why=" in repr(v) and "evidence=" in repr(v)


def test_steps_per_rank_over_time_can_be_plotted_from_a_sample(a):
    """The flagship sample was captured under `postmortem collect`: its step rows have a rank and a time."""
    st = a.tables.steps
    st = st[st["phase"].eq("train") & st["ts"].notna() & st["rank"].notna()]
    assert set(st["rank"].astype(int)) == {0, 1, 2, 3}
    wide = st.pivot_table(index="ts", columns="rank", values="step", aggfunc="max")
    assert list(wide.columns) == [0, 1, 2, 3] and wide.index.is_monotonic_increasing
    fig = a.figures["steps"]
    assert fig.axes[0].get_xlabel().startswith("time on 2026-11-27")


def test_figures_is_an_attribute_that_can_still_be_called(a):
    figs = a.figures
    assert isinstance(figs, dict) and {"timeline", "steps"} <= set(figs)
    assert set(a.figures()) == set(figs)
    zh = a.figures(lang="zh")
    assert set(zh) == set(figs)


def test_reference_page_is_generated_from_the_schema():
    page = open(os.path.join(ROOT, "docs", "tables.md"), encoding="utf-8").read()
    assert page == schema.reference_markdown(), "docs/tables.md is stale: python -m postmortem.tables.schema > docs/tables.md"
    for table in schema.TABLE_NAMES:
        assert f"## `{table}`" in page
        for c in schema.columns(table):
            assert f"| `{c}` | {schema.dtype_of(c)} |" in page


def test_analyze_docstring_points_to_files_in_the_repo():
    doc = postmortem.analyze.__doc__
    assert "DESIGN.md" not in doc and "docs/tables.md" in doc
    assert os.path.exists(os.path.join(ROOT, "docs", "tables.md"))


def test_findings_is_a_dataframe_with_the_verdict_first(a):
    f = a.findings
    assert isinstance(f, pd.DataFrame) and len(f) == len(a.finding_list) >= 1
    assert f.iloc[0]["rule"] == a.verdict.rule and f.iloc[0]["summary"] == a.verdict.summary
    assert str(f["confidence"].dtype) == "float64"
    assert str(f["step"].dtype) == "Int64" and str(f["first_culprit"].dtype) == "Int64"
    assert str(f["time"].dtype) == "datetime64[ns, UTC]"
    timed = postmortem.analyze(os.path.join(ROOT, "samples", "rank_raises_mid_epoch", "logs"), quiet=True).findings
    assert timed["time"].notna().all() and timed["time"].iloc[0].tzname() == "UTC"   # its cited lines carry times
    assert f.iloc[0]["first_culprit"] == a.verdict.culprit_ranks[0]
    assert list(f["confidence"]) == sorted(f["confidence"], reverse=True)


def test_empty_findings_keep_their_columns_and_dtypes():
    from postmortem.verdict.frame import FINDING_COLUMNS, findings_frame
    f = findings_frame([])
    assert list(f.columns) == list(FINDING_COLUMNS) and len(f) == 0
    assert str(f["step"].dtype) == "Int64"


def test_repr_is_a_few_lines_and_html_is_the_verdict_card(a):
    text = repr(a)
    assert len(text) < 1000 and text.count("\n") <= 6
    assert a.verdict.category in text and "rank 0" in text
    html = a._repr_html_()
    assert 'id="verdict"' in html and a.verdict.summary.split(" (")[0] in html


def test_json_contract_is_unchanged_by_the_dataframe_view(a):
    d = a.to_dict()
    assert isinstance(d["findings"], list) and d["findings"][0]["rule"] == a.verdict.rule
    assert set(d["findings"][0]) == {"rule", "category", "phase", "reason", "confidence", "severity", "title",
                                     "culprit_ranks", "affected_ranks", "step", "explanation", "remediation",
                                     "cascade_of", "evidence"}


@pytest.mark.parametrize("html", [False, True])
def test_preload_loads_matplotlib_only_for_an_html_report(html):
    import subprocess
    import sys
    code = ("import sys; from postmortem import api; p = api._Preload(html=" + str(html) + "); p.start(); p.join(); "
            "print('matplotlib' in sys.modules, 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(html), "True"]


def test_a_line_cited_twice_with_the_same_words_is_one_citation():
    from postmortem.verdict.findings import Evidence, Finding

    def cite(source, line, text, rank=0):
        return Evidence(source, line, rank, text)
    f = Finding(rule="r", category="gpu_oom", confidence=0.5, title="t", explanation="e", remediation="r",
                evidence=[cite("a.log", 7, "OOM"), cite("b.log", 3, "config"), cite("a.log", 7, "OOM"),
                          cite("a.log", 7, "OOM, in words of the rule"), cite("a.log", 7, "OOM", rank=1),
                          cite("c.log", None, "x"), cite("c.log", None, "x")])
    assert [(e.source, e.line, e.rank, e.text) for e in f.evidence] == [
        ("a.log", 7, 0, "OOM"), ("b.log", 3, 0, "config"), ("a.log", 7, 0, "OOM, in words of the rule"),
        ("a.log", 7, 1, "OOM"), ("c.log", None, 0, "x")]


def test_no_finding_of_a_sample_cites_the_same_line_twice_with_the_same_words():
    samples = os.path.join(os.path.dirname(__file__), "..", "samples")
    seen = 0
    for name in sorted(os.listdir(samples)):
        logs = os.path.join(samples, name, "logs")
        if not os.path.isdir(logs):
            continue
        for f in postmortem.analyze(logs, quiet=True).to_dict()["findings"]:
            keys = [(e["source"], e["line"], e["rank"], e["text"]) for e in f["evidence"]]
            assert len(keys) == len(set(keys)), (name, f["rule"])
            seen += len(keys)
    assert seen

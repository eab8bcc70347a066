"""The notebook API: tables as documented attributes, findings as a DataFrame, fixed dtypes, a short repr."""
from __future__ import annotations

import os

import pandas as pd
import pytest

import postmortem
from postmortem import schema
from postmortem.tables import Tables

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


def test_every_column_has_the_documented_dtype(a):
    for table in schema.TABLE_NAMES:
        df = getattr(a.tables, table)
        for col in df.columns:
            want = schema.dtype_of(col)
            got = str(df[col].dtype)
            if want == "object":
                assert got in ("object", "str", "string"), (table, col, got)
            else:
                assert got == want, (table, col, got, want)
    assert str(a.tables.events["rank"].dtype) == "Int64"
    assert str(a.tables.steps["ts"].dtype) == str(a.tables.events["ts"].dtype) == "datetime64[ns, UTC]"


def test_reference_page_is_generated_from_the_schema():
    page = open(os.path.join(ROOT, "docs", "tables.md"), encoding="utf-8").read()
    assert page == schema.reference_markdown(), "docs/tables.md is stale: python -m postmortem.schema > docs/tables.md"
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
    from postmortem.findings import FINDING_COLUMNS, findings_frame
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
    assert set(d["findings"][0]) == {"rule", "category", "phase", "confidence", "severity", "title",
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
    from postmortem.findings import Evidence, Finding

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

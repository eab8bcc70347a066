"""The HTML report: section order, escaping, determinism, languages, notebook fragment, scale, and each section's data.

Most tests render a hand-built Analysis (every table filled) so they do not depend on parsers or rules; the CLI and
512-rank tests go through the real pipeline.
"""
from __future__ import annotations

import os
import re

import pandas as pd
import pytest

import postmortem
from postmortem.tables import schema
from postmortem.api import Analysis
from postmortem.ingest.discover import Source
from postmortem.verdict.findings import Evidence, Finding, Verdict
from postmortem.tables.build import Tables
from postmortem.reports import evidence as evidence_mod
from postmortem.reports import i18n
from postmortem.reports.figures import make_figures, to_data_uri
from postmortem.reports.render import render_html
from postmortem.reports.sections import rank_ranges
from postmortem.reports.viewmodel import SECTION_IDS, build_view

XSS = "<script>alert(1)</script>"
TEMPLATES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reports", "templates")


def _tables(meta: dict, **rows) -> Tables:
    return Tables({n: schema.frame_from_rows(n, rows.get(n, [])) for n in schema.TABLE_NAMES}, meta)


def synthetic(world: int = 8, culprit: int = 3, timed: bool = True, log_dir: str | None = None) -> Analysis:
    """A job where `culprit` ran out of memory at step 40 and every other rank timed out in ALLREDUCE seq 812."""
    base = pd.Timestamp("2026-03-01 10:00:00", tz="UTC")

    def ts(s):
        return base + pd.Timedelta(seconds=s) if timed else None
    ev, steps, coll, stacks, gpu, nccl, src, sources = [], [], [], [], [], [], [], []
    for r in range(world):
        name = f"rank{r}.log"
        src.append({"source": name, "kind": "rank_log", "rank": r, "bytes": 1000, "lines": 60, "parsed_ok": True})
        if log_dir:
            sources.append(Source(path=os.path.join(log_dir, name), source=name, kind="rank_log", rank=r))
        for s in range(0, (40 if r == culprit else 50) + 1, 5):
            steps.append({"source": name, "line": s + 1, "rank": r, "ts": ts(s * 10), "step": s, "phase": "train"})
        if r == culprit:
            ev.append({"source": name, "line": 45, "rank": r, "ts": ts(420), "kind": "oom", "level": "E",
                       "message": f"torch.OutOfMemoryError: CUDA out of memory. {XSS}", "template": "oom",
                       "details": {}})
            frames = [{"func": "load_batch", "file": "train.py", "line": 12},
                      {"func": "main", "file": "train.py", "line": 40}]
        else:
            ev.append({"source": name, "line": 60, "rank": r, "ts": ts(2300), "kind": "watchdog_timeout",
                       "level": "E", "message": f"[Rank {r}] Watchdog caught collective operation timeout",
                       "template": "[Rank <N>] Watchdog caught collective operation timeout", "details": {}})
            frames = [{"func": "all_reduce", "file": "torch/distributed/distributed_c10d.py", "line": 2000 + i}
                      for i in range(15)]
        stacks.append({"source": f"pyspy_{r}.txt", "line": 1, "rank": r, "pid": 100 + r, "thread": str(100 + r),
                       "thread_name": "MainThread", "frames": frames, "active": False})
        coll.append({"source": name, "line": 60, "rank": r, "ts": ts(2300), "pg": "0",
                     "seq": 811 if r == culprit else 812, "op": "ALLREDUCE",
                     "state": "completed" if r == culprit else "timeout"})
        nccl.append({"source": "nccl.log", "line": r + 1, "rank": r, "host": "node1", "level": "INFO",
                     "nranks": world, "comm_id": "0xabc", "cuda_dev": r % 8, "version": "2.21.5",
                     "message": f"Channel 00/02 : {r}[{r}] -> {(r + 1) % world}[{(r + 1) % world}] via P2P/IPC"})
    nccl.append({"source": "nccl.log", "line": 99, "rank": 1, "host": "node1", "level": "WARN",
                 "message": "NET/IB : Got completion from peer with error 12"})
    for snap in range(6):
        for g in range(2):
            gpu.append({"source": "smi.csv", "line": snap * 2 + g + 1, "ts": ts(snap * 80), "gpu_index": g,
                        "mem_used_mib": 30000 if g == 0 else 20000 + snap * 12000, "mem_total_mib": 81920,
                        "util_pct": 90, "snapshot": snap, "host": "node1"})
    src.append({"source": "smi.csv", "kind": "nvidia_smi", "bytes": 300, "lines": 13, "parsed_ok": True})
    src.append({"source": "blob.bin", "kind": "binary", "bytes": 30, "lines": 0, "parsed_ok": False,
                "problem": f"binary file {XSS} not parsed"})
    last = []  # each rank's last lines: the culprit announced a batch nobody else loaded, the others timed out
    for r in range(world):
        lines = [f"step 40 loss 1.25 rank {r}", f"loading oversized batch 41 {XSS}" if r == culprit else
                 f"[Rank {r}] Watchdog caught collective operation timeout"]
        for i, text in enumerate(lines):
            last.append({"source": f"rank{r}.log", "line": 58 + i, "rank": r, "key": hash(text.replace(str(r), "")
                         .replace("0", "")) % (1 << 31) if r != culprit or i == 0 else 7, "message": text,
                         "seen": False, "distance": len(lines) - 1 - i})
    tables = _tables({"world_size": world, "world_size_inferred": False, "ranks_seen": list(range(world))},
                     events=ev, steps=steps, collectives=coll, stacks=stacks, gpu=gpu, nccl=nccl, sources=src,
                     last_lines=last)
    from postmortem.ranks.odd_lines import odd_lines
    tables.frames["odd_lines"] = odd_lines(tables)
    root = Finding(rule="oom-in-train", category="gpu_oom", confidence=0.86, title=f"CUDA OOM on rank {culprit}",
                   explanation=f"Rank {culprit} ran out of memory at step 40.", remediation="Lower the batch size.",
                   phase="train", culprit_ranks=[culprit], affected_ranks=range(world), step=40,
                   evidence=[Evidence(f"rank{culprit}.log", 45, culprit, f"torch.OutOfMemoryError: {XSS}")])
    cascade = Finding(rule="bare-collective-timeout", category="collective_timeout", confidence=0.35,
                      title="A collective timed out", explanation="Ranks waited.", remediation="Collect stacks.",
                      cascade_of="oom-in-train", affected_ranks=[0, 1])
    verdict = Verdict("gpu_oom", "train", "oom-in-train", 0.86, [culprit], 40,
                      f"GPU out of memory on rank {culprit} at step 40 during train: CUDA OOM.")
    gaps = [{"missing": "py-spy dumps", "why": "Stacks show where ranks were.", "how": "py-spy dump --pid $PID"},
            {"missing": "NCCL debug output", "why": "Names the transport.", "how": "export NCCL_DEBUG=INFO"}]
    return Analysis(input="job/logs", sources=sources, tables=tables, findings=[root, cascade], verdict=verdict,
                    evidence_gaps=gaps)


def section(html: str, sid: str) -> str:
    m = re.search(rf'<section id="{sid}".*?</section>', html, re.S)
    assert m, f"no section {sid}"
    return m.group(0)


@pytest.fixture(scope="module")
def job():
    return synthetic()


@pytest.fixture(scope="module")
def html(job):
    return render_html(job, generated_at="2026-03-02 08:00 UTC")


# ---------------------------------------------------------------- structure and safety

def test_sections_come_in_the_issue_order(html):
    ids = re.findall(r'<section id="([a-z]+)"', html)
    assert ids == list(SECTION_IDS)
    assert html.index('id="verdict"') < html.index('<nav class="pm-nav"')


def test_verdict_says_what_where_and_the_fix(html):
    v = section(html, "verdict")
    assert '<h1 class="pm-headline">GPU out of memory</h1>' in v
    assert "Rank 3 ran out of GPU memory during training after step 40." in v   # one sentence: what, where, when
    assert '<dd class="pm-culprits">3</dd>' in v
    assert "Lower the batch size." in v
    assert '<span class="pm-confidence">0.86</span>' in v and "lvl-high" in v
    assert "0-2, 4-7" in v   # the ranks that waited


def test_log_text_is_escaped_everywhere(html):
    assert XSS not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section(html, "evidence")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section(html, "sources")
    assert html.count("<script") == 1   # the report's own optional script only


def test_self_contained_no_network(html):
    for attr in re.findall(r'\b(?:src|href|action|poster|srcset)="([^"]*)"', html):
        assert attr.startswith(("#", "data:image/png;base64,")), attr
    assert "@import" not in html and "url(" not in html
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)
    assert "default-src 'none'" in csp and "img-src data:" in csp


def test_script_hash_in_csp_matches_the_script(html):
    import base64
    import hashlib
    script = re.search(r"<script>(.*?)</script>", html, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in html


def test_same_input_same_bytes(job):
    a = render_html(job, generated_at="2026-03-02 08:00 UTC")
    b = render_html(job, generated_at="2026-03-02 08:00 UTC")
    assert a == b


def test_the_date_is_the_only_volatile_part(job, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "86400")
    a = render_html(job)
    assert '<time id="pm-generated">1970-01-02 00:00 UTC</time>' in a
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    b = render_html(job)
    strip = re.compile(r'<time id="pm-generated">[^<]*</time>')
    assert strip.sub("", a) == strip.sub("", b)
    assert len(strip.findall(a)) == 1


def test_sections_with_nothing_to_show_are_left_out():
    job = synthetic()
    for name in ("gpu", "stacks", "nccl", "collectives"):
        job.tables.frames[name] = job.tables.frames[name].iloc[0:0]
    html = render_html(job, generated_at="x")
    ids = re.findall(r'<section id="([a-z]+)"', html)
    for name in ("gpu", "stacks", "nccl", "collectives"):
        assert name not in ids and f'href="#{name}"' not in html
    assert ids[:2] == ["verdict", "evidence"] and "sources" in ids


def test_no_input_renders_a_plain_notice():
    tables = _tables({"world_size": None, "world_size_inferred": True, "ranks_seen": []})
    job = Analysis(input="empty/", sources=[], tables=tables, findings=[], verdict=None)
    html = render_html(job, generated_at="x")
    assert "No readable input" in section(html, "verdict")
    assert re.findall(r'<section id="([a-z]+)"', html) == ["verdict"]   # nothing else to show


def test_unknown_option_is_an_error(job):
    with pytest.raises(TypeError, match="colour"):
        render_html(job, colour="red")
    with pytest.raises(ValueError, match="language"):
        render_html(job, lang="fr")


# ---------------------------------------------------------------- sections

def test_evidence_shows_context_from_the_source_file(tmp_path):
    lines = [f"line {i} of rank 3" for i in range(1, 61)]
    lines[44] = f"torch.OutOfMemoryError: CUDA out of memory. {XSS}"
    (tmp_path / "rank3.log").write_text("\n".join(lines) + "\n")
    html = render_html(synthetic(log_dir=str(tmp_path)), generated_at="x", context=3)
    ev = section(html, "evidence")
    assert [int(n) for n in re.findall(r"<i>(\d+)</i>", ev)] == list(range(42, 49))
    assert re.search(r'<span class="hit"><i>45</i>torch.OutOfMemoryError: CUDA out of memory. &lt;script', ev)
    assert '<a class="pm-loc" href="#src-3">rank3.log:45</a>' in ev
    assert '<tr id="src-3"' in section(html, "sources")


def test_evidence_context_reads_only_what_it_needs(tmp_path, monkeypatch):
    path = tmp_path / "big.log"
    path.write_text("".join(f"l{i}\n" for i in range(1, 1001)))
    monkeypatch.setattr(evidence_mod, "MAX_SCAN_LINES", 500)
    got = evidence_mod.read_context({str(path): {3, 700}, str(tmp_path / "gone.log"): {1}}, radius=1)
    assert got[(str(path), 3)] == [(2, "l2"), (3, "l3"), (4, "l4")]
    assert got[(str(path), 700)] == "too_far"
    assert got[(str(tmp_path / "gone.log"), 1)] == "not_readable"


def test_adjacent_cited_lines_share_one_context_block(tmp_path):
    (tmp_path / "rank3.log").write_text("".join(f"l{i}\n" for i in range(1, 61)))
    job = synthetic(log_dir=str(tmp_path))
    job.finding_list[0].evidence = [Evidence("rank3.log", n, r, f"l{n}") for n, r in ((10, 3), (11, 4), (40, 3))]
    ev = section(render_html(job, generated_at="x"), "evidence")
    assert ev.count('<article class="pm-ev">') == 2
    assert "rank3.log:10, 11</a><span class=\"pm-badge\">rank 3-4</span>" in ev
    assert re.findall(r'<span class="hit"><i>(\d+)</i>', ev) == ["10", "11", "40"]


def test_culprit_without_lines_still_gets_a_lane():
    job = synthetic()
    job.finding_list[0].culprit_ranks = [8]
    job.tables.meta["world_size"] = 9
    tl = section(render_html(job, generated_at="x"), "timeline")
    first = re.search(r"<tbody>\s*<tr[^>]*>(.*?)</tr>", tl, re.S).group(1)
    assert '<span class="pm-rk">8</span>' in first and "no line names this rank" in first


def test_missing_source_file_gives_a_note_not_an_error(html):
    assert "context not shown: the file could not be read again" in section(html, "evidence")


def test_timeline_has_a_lane_per_rank_for_small_jobs(html):
    tl = section(html, "timeline")
    assert tl.count("<tr class=\"role-") == 8            # one row per rank, the two rank tables now one
    assert 'class="role-culprit is-hot"><td data-label="Ranks"><span class="pm-rk">3</span>' in tl
    assert "data:image/png;base64," in tl
    assert "times from the logs" in tl
    assert ">Count<" not in tl                              # a column that would always say 1


def test_timeline_groups_identical_ranks_at_1024():
    html = render_html(synthetic(world=1024, culprit=700), generated_at="x")
    tl = section(html, "timeline")
    assert tl.count("<tr class=\"role-") == 2
    assert '<span class="pm-rk">0-699, 701-1023 (1023)</span>' in tl
    steps = section(html, "steps")
    assert ('<span class="pm-rk">700</span></td><td class="num" data-label="Last step">40</td>'
            '<td class="num" data-label="Behind the front by">10</td>') in steps


def test_untimed_logs_fall_back_to_line_positions():
    html = render_html(synthetic(timed=False), generated_at="x")
    tl = section(html, "timeline")
    assert "No source gives a time" in tl and 'data-label="Last line">rank3.log:' in tl
    assert "data:image/png" not in tl                      # no chart of line counts passed off as a timeline


def test_steps_list_laggards_first(html):
    rows = re.findall(r'<tr( class="is-warm")?><td data-label="Ranks"><span class="pm-rk">([^<]*)</span>',
                      section(html, "steps"))
    assert rows[0] == (' class="is-warm"', "3") and rows[1] == ("", "0-2, 4-7 (7)")


def test_gpu_memory_marks_the_oom(html):
    gpu = section(html, "gpu")
    assert "first out-of-memory error (2026-03-01 10:07:00)" in gpu
    assert ('<td data-label="GPU">1</td><td data-label="Bus id"></td><td class="num" data-label="Peak used (MiB)">'
            '80,000</td><td class="num" data-label="Total (MiB)">81,920</td>') in gpu


def test_merged_stacks_highlight_the_odd_rank(html):
    st = section(html, "stacks")
    odd = re.search(r'<div class="pm-stack odd">.*?</div>', st, re.S).group(0)
    assert "load_batch (train.py:12)" in odd and "(1)" in odd
    assert "0-2, 4-7 (7)" in st
    assert "3 outer frames" in st


def test_collectives_show_the_rank_behind(html):
    co = section(html, "collectives")
    hot = re.search(r'<tr class="is-hot">.*?</tr>', co).group(0)
    assert 'data-label="Last seq">811</td>' in hot and '<span class="pm-rk">3</span> <span' in hot
    assert '<span class="pm-rk">0-2, 4-7 (7)</span>' in co


def test_nccl_summary(html):
    nc = section(html, "nccl")
    assert "2.21.5" in nc and "P2P/IPC (8)" in nc and "Got completion from peer with error 12" in nc


def test_findings_mark_cascades(html):
    f = section(html, "findings")
    assert "a consequence of the verdict" in f and "A collective timed out" in f
    assert "cascade of" not in f                           # no rule id where a reader wants words


def test_gaps_are_copy_pastable(html):
    g = section(html, "gaps")
    assert '<pre class="pm-cmd pm-rt">py-spy dump --pid $PID</pre>' in g
    assert "# py-spy dumps\npy-spy dump --pid $PID\n# NCCL debug output\nexport NCCL_DEBUG=INFO" in g


def test_sources_list_every_file_and_its_problem(html):
    s = section(html, "sources")
    assert s.count("<tr id=\"src-") == 10
    assert "10 files, 1 with problems" in s


def test_sources_table_is_capped_but_keeps_problems():
    job = synthetic(world=30)
    view = build_view(job, generated_at="x", figures=False, max_sources=5)
    assert len(view.sources) == 6 and view.sources[-1].problem
    assert "26 more files" in view.sources_more


def test_gpu_table_is_capped_but_keeps_faulty_gpus():
    from postmortem.reports.sections import MAX_GPU_ROWS
    job = synthetic()
    n = MAX_GPU_ROWS + 40
    job.tables.frames["gpu"] = schema.frame_from_rows("gpu", [
        {"source": f"node{i // 8}/smi.csv", "line": 2, "host": f"node{i // 8:03d}", "gpu_index": i % 8,
         "mem_used_mib": 1000.0 + i, "mem_total_mib": 81920.0, "snapshot": 0, "lost": i == n - 1,
         "ecc_uncorrected": 3.0 if i == n - 2 else None} for i in range(n)])
    gpu = section(render_html(job, generated_at="x"), "gpu")
    rows = re.findall(r'<tr( class="is-hot")?><td data-label="Host">(node\d+)</td><td data-label="GPU">(\d)</td>', gpu)
    assert len(rows) == MAX_GPU_ROWS + 2                       # the first ones, then the two faulty GPUs
    assert rows[-2:] == [(' class="is-hot"', f"node{(n - 2) // 8:03d}", str((n - 2) % 8)),
                         (' class="is-hot"', f"node{(n - 1) // 8:03d}", str((n - 1) % 8))]
    assert "38 more GPUs are not listed; none of them was lost" in gpu
    small = section(render_html(synthetic(), generated_at="x"), "gpu")
    assert "more GPUs" not in small


# ---------------------------------------------------------------- language, notebook, figures

def test_chinese_report_uses_the_catalogue():
    html = render_html(synthetic(), lang="zh", generated_at="x")
    zh = i18n.catalogue("zh")
    assert '<html lang="zh-CN">' in html
    assert f'<h1 class="pm-headline">{zh["cat_gpu_oom"]}</h1>' in html
    for sid in SECTION_IDS[1:]:
        assert f"<h2>{zh['sec_' + sid]}</h2>" in section(html, sid)
    assert "Other findings" not in html and "What to change" not in html
    assert zh["rule_text_note"] in html   # rule texts stay English, and say so


def test_catalogues_have_the_same_keys_and_templates_use_only_known_keys():
    en, zh = i18n.catalogue("en"), i18n.catalogue("zh")
    assert set(en) == set(zh)
    used = set()
    for name in os.listdir(TEMPLATES):
        with open(os.path.join(TEMPLATES, name), encoding="utf-8") as fh:
            used |= set(re.findall(r"\bt\.([a-z_]+)", fh.read()))
    assert used and used <= set(en), used - set(en)
    for key, text in en.items():
        assert set(re.findall(r"{(\w+)}", text)) == set(re.findall(r"{(\w+)}", zh[key])), key


def test_language_files_hold_every_kind_of_words():
    """reports/lang/*.json: the value words of every language name the same values; translated rule titles name
    registered rules; translated gaps are pairs (missing, why)."""
    from postmortem.rules import all_rules
    assert set(i18n.VALUE_WORDS["zh"]) == set(i18n.VALUE_WORDS["en"])
    rule_ids = {r.id for r in all_rules()}
    assert i18n.RULE_TITLES["zh"] and set(i18n.RULE_TITLES["zh"]) <= rule_ids, set(i18n.RULE_TITLES["zh"]) - rule_ids
    assert i18n.GAPS["zh"] and all(isinstance(v, tuple) and len(v) == 2 for v in i18n.GAPS["zh"].values())


def test_templates_hold_no_english_prose():
    for name in os.listdir(TEMPLATES):
        if not name.endswith(".html.j2"):
            continue
        with open(os.path.join(TEMPLATES, name), encoding="utf-8") as fh:
            text = re.sub(r"{[{%#].*?[}%#]}|<[^>]+>", " ", fh.read(), flags=re.S)
        words = [w for w in re.findall(r"[A-Za-z]{3,}", text) if w not in ("NCCL", "WARN")]
        assert not words, (name, words)


def test_notebook_fragment_uses_the_same_templates(job):
    frag = job._repr_html_()
    assert frag.startswith('<div class="pm pm-fragment"') and "<html" not in frag and "<script" not in frag
    assert re.findall(r'<section id="([a-z]+)"', frag) == ["verdict", "evidence", "findings", "gaps"]
    full = render_html(job, generated_at="x")
    assert section(frag, "verdict") == section(full, "verdict")
    assert 'href="#src-' not in frag   # no sources table in the fragment to link to


def test_make_figures_returns_matplotlib_figures(job):
    from matplotlib.figure import Figure
    figs = make_figures(job)
    assert set(figs) == {"timeline", "steps", "gpu_memory"}
    assert all(isinstance(f, Figure) for f in figs.values())
    uri = to_data_uri(figs["timeline"])
    assert uri.startswith("data:image/png;base64,") and uri == to_data_uri(figs["timeline"])


def _many_gpus(n: int, lost: int | None = None, hosts: bool = True) -> Analysis:
    """synthetic() with `n` GPUs, 8 per node, over 5 snapshots; GPU `lost` is lost in the last one."""
    job = synthetic()
    job.tables.frames["gpu"] = schema.frame_from_rows("gpu", [
        {"source": f"node{i // 8}/smi.csv", "line": snap * 10 + i % 8 + 1,
         "host": f"node{i // 8:03d}" if hosts else None, "gpu_index": i % 8, "bus_id": f"00000000:{0x18 + i % 8:02X}:00.0", "snapshot": snap,
         "mem_used_mib": None if (i == lost and snap == 4) else 20000.0 + 100 * i + 500 * snap,
         "mem_total_mib": 81920.0 if i % 2 else 40960.0, "lost": i == lost and snap == 4}
        for snap in range(5) for i in range(n)])
    return job


def _legend(fig) -> list[str]:
    legend = fig.axes[0].get_legend()
    return [x.get_text() for x in legend.get_texts()] if legend else []


def test_gpu_chart_of_a_big_job_shows_the_faulty_gpu_and_greys_the_rest():
    from matplotlib.collections import LineCollection
    fig = make_figures(_many_gpus(40, lost=21))["gpu_memory"]
    ax = fig.axes[0]
    labels = _legend(fig)
    assert len(labels) <= 9, labels
    assert "node002 GPU 5 (lost)" in labels and "39 other GPUs" in labels
    greys = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert len(greys) == 1 and len(greys[0].get_segments()) == 39
    assert len(ax.lines) < 10                                   # not one artist per GPU
    capacity = sorted(ln.get_ydata()[0] for ln in ax.lines if ln.get_linestyle() == "--")
    assert capacity == [40960.0, 81920.0]                      # once per distinct capacity


def test_gpu_chart_of_a_big_job_colours_the_culprit_gpu_or_the_fullest():
    job = _many_gpus(40)                                       # the verdict's culprit is rank 3
    job.tables.frames["nccl"] = schema.frame_from_rows("nccl", [
        {"source": "nccl.log", "line": r + 1, "rank": r, "host": f"node{r // 8:03d}", "level": "INFO",
         "bus_id": f"{0x18 + r % 8:x}000", "cuda_dev": r % 8, "message": "Init COMPLETE"} for r in range(40)])
    assert _legend(make_figures(job)["gpu_memory"]) == ["node000 GPU 3 (rank 3)", "39 other GPUs"]
    fullest = _legend(make_figures(_many_gpus(40, hosts=False))["gpu_memory"])
    assert fullest == ["node4/smi.csv GPU 6 (peak 63%)", "node4/smi.csv GPU 4 (peak 62%)",   # of 40,960 MiB
                       "node4/smi.csv GPU 2 (peak 62%)", "37 other GPUs"], fullest
    zh = _legend(make_figures(_many_gpus(40, lost=21), lang="zh")["gpu_memory"])
    assert zh[-1] == "其他 39 块 GPU" or zh[-1] == "39 other GPUs"   # English without a CJK font


def test_gpu_chart_of_a_small_job_labels_every_gpu():
    fig = make_figures(_many_gpus(16, lost=3))["gpu_memory"]
    assert _legend(fig) == [f"node{i // 8:03d} GPU {i % 8}" for i in range(16)]
    assert not fig.axes[0].collections


def test_steps_chart_of_many_ranks_draws_each_kind_of_mark_once():
    from types import SimpleNamespace

    from postmortem.reports.figures import steps_figure
    from postmortem.reports.ranks import Axis
    # 300 ranks: half stopped one report early, at one of two steps; the ranks behind share one colour and one
    # legend entry (a name per identical line would not say which line is whose).
    series = {r: ([1, 2, 3], [10, 20, 30]) if r % 2 else ([1, 2], [10, 20 + r % 4]) for r in range(300)}
    last = [{"rank": r, "last_step": ys[-1]} for r, (_, ys) in series.items()]
    fig = steps_figure(SimpleNamespace(step_series=series, step_last=last, step_unit="step",
                                       step_axis=Axis("time", pd.Timestamp("2026-01-01", tz="UTC"))))
    ax = fig.axes[0]
    assert len(ax.collections) == 2                 # the front in grey, the ranks behind in red
    assert sorted(x.get_text() for x in ax.texts) == ["stopped at 20", "stopped at 22"]
    assert _legend(fig) == ["ranks behind the front (150)", "other ranks"]


def test_steps_chart_labels_where_ranks_stopped_without_overlapping_labels():
    """Many ranks that stopped at nearby points get one 'stopped at' label per spot, the furthest behind first, a
    label left out where it would cover one already placed, and at most MAX_STOP_LABELS."""
    from types import SimpleNamespace

    from postmortem.reports import figures
    from postmortem.reports.ranks import Axis
    # 40 ranks reach step 1000 at report 10; 30 stop earlier: 10 at each of steps 500 (report 5), 510 (report 5,
    # the same spot as 500 on this scale) and 900 (report 9).
    series = {r: (list(range(1, 11)), [100 * i for i in range(1, 11)]) for r in range(40)}
    for r, (n, top) in enumerate([(5, 500)] * 10 + [(5, 510)] * 10 + [(9, 900)] * 10, start=40):
        series[r] = (list(range(1, n + 1)), [100 * i for i in range(1, n)] + [top])
    last = [{"rank": r, "last_step": ys[-1]} for r, (_, ys) in series.items()]
    fig = figures.steps_figure(SimpleNamespace(step_series=series, step_last=last, step_unit="step",
                                               step_axis=Axis("time", pd.Timestamp("2026-01-01", tz="UTC"))))
    assert [x.get_text() for x in fig.axes[0].texts] == ["stopped at 500", "stopped at 900"]
    assert _legend(fig) == ["ranks behind the front (30)", "other ranks"]
    # Spots far apart each get a label, the furthest behind first, up to MAX_STOP_LABELS.
    ends = [(i, 100 * i) for i in range(10, 0, -1)]
    assert figures._apart(ends, ends) == ends[::-1][:figures.MAX_STOP_LABELS]
    assert figures._apart([(5, 500), (5, 500)], [(0, 0), (10, 1000)]) == [(5, 500)]


def test_rank_ranges():
    assert rank_ranges([7, 0, 1, 2, 3, 5]) == "0-3, 5, 7"
    assert rank_ranges([]) == ""


# ---------------------------------------------------------------- through the real pipeline

def _write_tree(root, world: int, culprit: int, steps: int = 20) -> None:
    for r in range(world):
        d = root / f"rank_{r}"
        d.mkdir()
        lines = [f"[rank{r}]: step {s} loss {2.0 - s * 0.01:.3f}" for s in range(steps if r != culprit else 12)]
        if r == culprit:
            lines += ["[rank%d]: Traceback (most recent call last):" % r,
                      '[rank%d]:   File "train.py", line 40, in <module>' % r,
                      "[rank%d]:     batch = next(it)" % r,
                      f"[rank{r}]: ValueError: corrupt sample {XSS}"]
        else:
            lines.append(f"[rank{r}]:[E ProcessGroupNCCL.cpp:475] [Rank {r}] Watchdog caught collective operation "
                         "timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
                         "ran for 600123 milliseconds before timing out.")
        (d / "train.log").write_text("\n".join(lines) + "\n")


def test_cli_writes_one_html_file_in_chinese(tmp_path):
    from postmortem.cli import main
    logs = tmp_path / "logs"
    logs.mkdir()
    _write_tree(logs, 4, 2)
    out = tmp_path / "report.html"
    assert main(["analyze", str(logs), "-o", str(out), "--lang", "zh", "--quiet"]) == 0
    html = out.read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in html and XSS not in html


def test_512_rank_tree_report_stays_small(tmp_path):
    _write_tree(tmp_path, 512, 77)
    job = postmortem.analyze(str(tmp_path))
    html = job.to_html(generated_at="x")
    size = len(html.encode("utf-8"))
    assert size < 5 * 1024 * 1024, size
    assert section(html, "sources").count('<tr id="src-') == 512
    assert section(html, "timeline").count('<tr class="role-') <= 41
    assert XSS not in html


def test_a_faulty_gpu_beyond_the_series_cap_is_still_drawn():
    from postmortem.reports import sections
    n = sections.MAX_GPU_SERIES + 16
    labels = _legend(make_figures(_many_gpus(n, lost=n - 2))["gpu_memory"])
    assert f"node{(n - 2) // 8:03d} GPU {(n - 2) % 8} (lost)" in labels, labels
    assert f"{sections.MAX_GPU_SERIES - 1} other GPUs" in labels


def test_big_job_timeline_is_drawn_beside_with_the_same_bytes(monkeypatch):
    """At 64+ ranks the timeline is drawn in a forked process while this one draws the steps chart: the same
    PNGs as drawing both here; never with another thread alive (a fork copies only the calling thread)."""
    import threading

    from postmortem.ingest import beside
    from postmortem.reports import figures as figs_mod
    from postmortem.reports import ranks as ranks_mod
    if not beside.can_fork() or (os.cpu_count() or 1) < 2 or threading.active_count() > 1:
        pytest.skip("needs fork, two CPUs and no other thread in the test process")
    model = ranks_mod.build(synthetic(world=80, culprit=37))
    assert len(model.summaries) >= figs_mod.BESIDE_MIN_SUMMARIES
    calls = []
    real = beside.call_beside
    monkeypatch.setattr(beside, "call_beside", lambda fn, arg, work: calls.append(1) or real(fn, arg, work))
    both = figs_mod.timeline_and_steps(model)
    assert calls == [1] and both[0] and both[1]
    monkeypatch.setattr(figs_mod, "BESIDE_MIN_SUMMARIES", 10 ** 9)
    assert figs_mod.timeline_and_steps(model) == both and calls == [1]
    monkeypatch.setattr(figs_mod, "BESIDE_MIN_SUMMARIES", 1)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not figs_mod._draw_beside(model)
    finally:
        stop.set()
        other.join()
    assert figs_mod._draw_beside(model)


# --- issue 26, item 7: the decisive line of each citation, once

SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples")


def _sample_view(name, lang="en"):
    a = postmortem.analyze(os.path.join(SAMPLES, name, "logs"), quiet=True)
    return a, build_view(a, lang=lang, generated_at="x", figures=False)


def test_a_cited_traceback_shows_its_frame_in_user_code_and_its_exception():
    from postmortem.reports.decisive import decisive_lines
    a = postmortem.analyze(os.path.join(SAMPLES, "uneven_batches_barrier", "logs"), quiet=True)
    paths = {s.source: s.path for s in a.sources}
    tb = a.tables.tracebacks
    row = tb[tb["source"].str.endswith("attempt_0/0/stderr.log")].iloc[0]
    lines = decisive_lines(a, row["source"], int(row["line"]), paths[row["source"]])
    hits = [ln.text for ln in lines if ln.hit]
    assert "Traceback (most recent call last)" in hits[0]
    assert any('train.py", line 56' in h for h in hits)            # the frame that differs from the others' :65
    assert "Timed out waiting" in hits[-1]                            # the exception
    assert any(ln.gap for ln in lines)                                # lines in between left out, and marked


def test_a_cited_error_json_is_decoded_into_lines():
    from postmortem.reports.decisive import decisive_lines
    a = postmortem.analyze(os.path.join(SAMPLES, "rank_raises_mid_epoch", "logs"), quiet=True)
    paths = {s.source: s.path for s in a.sources}
    src = next(s for s in paths if s.endswith("attempt_0/2/error.json"))
    lines = decisive_lines(a, src, 1, paths[src])
    texts = [ln.text for ln in lines]
    assert not any("\\n" in t for t in texts) and all(ln.no is None for ln in lines)
    assert any("train.py" in t for t in texts) and any(t.startswith("ValueError") for t in texts)


def test_a_stuck_thread_is_shown_with_the_thread_it_waits_on():
    a, view = _sample_view("wandb_log_blocked")
    block = view.evidence[0]
    labels = [c.label for c in block.context if c.label]
    assert labels and "wandb" in labels[0]                             # the wandb thread the main thread waits on
    assert any("wandb-AsyncioManager-main" in c.text for c in block.context)
    assert any(c.hit and "log_step (train.py:35)" in c.text for c in block.context)


def test_the_same_lines_on_several_ranks_are_shown_once():
    a, view = _sample_view("hung_rank_pyspy")   # rank 3 stuck in encoder_forward; ranks 0-2 in all_reduce
    stacks = [e for e in view.evidence + view.evidence_folded if e.source.startswith("pyspy/")]
    assert stacks[0].rank_label == "rank 3" and not stacks[0].also    # the rank that differs, on its own
    grouped = [e for e in stacks if e.also]
    assert len(grouped) == 1 and grouped[0].rank_label.startswith("ranks 0-")
    assert all(x.where.startswith("pyspy/rank") for x in grouped[0].also)


def test_charts_are_drawn_for_a_phone_too():
    html = render_html(synthetic(), generated_at="x")
    for sec in ("timeline", "steps", "gpu"):
        assert '<source media="(max-width: 600px)" srcset="data:image/png;base64,' in section(html, sec), sec


def test_timeline_arrows_stay_inside_the_plot():
    from postmortem.reports import ranks as ranks_mod
    from postmortem.reports.figures import NARROW_IN, timeline_figure
    job = synthetic()
    model = ranks_mod.build(job)
    for width in (10.0, NARROW_IN):
        ax = timeline_figure(model, width=width).axes[0]
        lo, hi = ax.get_xlim()
        arrows = [t for t in ax.texts if getattr(t, "arrow_patch", None) is not None]
        assert arrows
        for ann in arrows:
            assert lo <= ann.xy[0] <= hi and lo <= ann.xyann[0] <= hi
            assert ann.arrow_patch.get_clip_on()


def test_table_values_are_in_the_reports_language():
    html = render_html(synthetic(), generated_at="x", lang="zh")
    assert ">日志<" in section(html, "sources") and "rank_log" not in section(html, "sources")
    coll = section(html, "collectives")
    assert "已超时" in coll and ">timeout<" not in coll
    assert "结论的连锁反应" in section(html, "findings")


def test_end_rows_of_16384_ranks_group_those_that_ended_alike_culprit_first():
    """A job of 16,384 ranks: each rank names itself, its pid and its own last step in how it ended; the report's
    end rows still fit (ranks that ended alike share a row, steps shown as a range) and the culprit comes first."""
    from postmortem.reports.viewmodel import MAX_END_ROWS, end_rows
    n = 16384
    rows = []
    for r in range(n):
        if r == 6918:
            err = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
            step = 2000
        elif r in (6917, 6919):
            err = f"[Rank {r}] NCCL error: remote process exited (pid {4000 + r})"
            step = 2000
        else:
            err = (f"[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={r % 7 + 90}, "
                   f"OpType=ALLGATHER) ran for {600000 + r % 13} milliseconds before timing out.")
            step = 1990 + r % 11
        rows.append({"rank": r, "last_step": step, "first_error": err, "exit": None})
    ranks = pd.DataFrame(rows)
    got, more = end_rows(ranks, culprits=[6918])
    assert more == 0 and len(got) <= 5
    assert got[0].culprit and got[0].ranks == "6918"
    timed_out = max(got, key=lambda row: row.count)
    assert timed_out.count == n - 3
    assert timed_out.last_step == "1990–2000"
    assert sum(row.count for row in got) == n

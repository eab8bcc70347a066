"""The terminal summary: the verdict sentence, whole cited lines with file:line, once each, and honest gaps."""
from __future__ import annotations

import os

import postmortem
from postmortem.reports import ranks as ranks_mod

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _sample(name):
    return postmortem.analyze(os.path.join(ROOT, "samples", name, "logs"), quiet=True)


def _evidence_block(text: str) -> list[str]:
    return text.split("EVIDENCE\n", 1)[1].split("\n\n", 1)[0].splitlines()


def test_evidence_lines_are_whole_wrapped_and_shown_once():
    a = _sample("sampling_oom_step2000")
    text = a.to_text()
    block = _evidence_block(text)
    heads = [ln.strip() for ln in block if not ln.startswith("      ")]
    assert len(heads) == len(set(heads)), heads                      # the OOM line and the config line once each
    assert all(":" in h.split()[0] for h in heads)                    # file:line first
    joined = " ".join(ln.strip() for ln in block)
    assert "expandable_segments:True to avoid fragmentation" in joined   # the end of the 500-character OOM line
    assert "report_to=wandb" in joined                                 # the end of the config echo
    assert max(len(ln) for ln in text.splitlines() if not ln.startswith("  - ")) <= 100


def test_blank_citations_are_filled_from_their_file():
    block = _evidence_block(_sample("uneven_batches_barrier").to_text())
    # every citation head (`file:line  [rank N]`) is followed by its text; the closing `... N more` line is no head
    heads = [i for i, ln in enumerate(block) if not ln.startswith("      ") and not ln.strip().startswith("...")]
    for i in heads:
        assert i + 1 < len(block) and block[i + 1].startswith("      ") and block[i + 1].strip(), block


def test_no_gap_asks_for_what_the_lines_already_have():
    a = _sample("sampling_oom_step2000")          # its lines carry `06/12/2025 09:12:05`
    assert not any(g["missing"].startswith("timestamps") for g in a.evidence_gaps)
    html = a.to_html()
    assert "carry no timestamps" not in html


def test_flight_recorder_json_dumps_are_read_and_not_asked_for():
    a = _sample("uneven_batches_barrier")         # node0/flight_recorder/nccl_trace_rank_N.json
    fr = a.tables.sources[a.tables.sources["source"].str.contains("/flight_recorder/")]
    assert len(fr) == 4 and set(fr["kind"]) == {"flight_recorder"}
    assert not any(g["missing"].startswith("flight-recorder") for g in a.evidence_gaps)


def test_untimed_steps_are_charted_per_rank_in_their_own_order():
    model = ranks_mod.build(_sample("uneven_batches_barrier"))
    assert model.step_axis.mode in ("time", "order")
    for xs, _ in model.step_series.values():
        assert xs == sorted(xs)                   # no zig-zag back and forth
    ys = {r: ys for r, (_, ys) in model.step_series.items()}
    assert all(y == sorted(y) for y in ys.values())

"""parsers/loss_scale.py: every loss-scale wording the sources print (from the saved catalog extract) is read, real
DeepSpeed/apex output from the corpus is judged, and trajectories built from the source templates collapse into a
numeric failure or calibration."""
from __future__ import annotations

import gzip
import json
import re
from functools import lru_cache
from pathlib import Path

import pytest

from postmortem.parsers.loss_scale import ScaleEvent, collapse, read
from postmortem.catalog.extract import PLACEHOLDER_RE

ROOT = Path(__file__).resolve().parent.parent
EXTRACT = ROOT / "tests" / "catalog_data" / "extract.jsonl.gz"
CORPUS = Path("/work/shared/corpus")
LOSS_SCALE_FAMILIES = {"loss-scale-at-minimum", "loss-scale-overflow-skip", "loss-scale-overflow-note",
                       "loss-scale-change"}


@lru_cache(maxsize=1)
def source_strings() -> list[dict]:
    """The extract's strings of the loss-scale families (DeepSpeed, apex, fairseq, Megatron)."""
    out = []
    with gzip.open(EXTRACT, "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            if not r.get("class") and LOSS_SCALE_FAMILIES & set(r.get("family") or []):
                out.append(r)
    return out


def fill(template: str, values: list[str]) -> str:
    """Placeholders filled in order with the given values (the last repeats)."""
    it = iter(values)
    last = [values[-1]]

    def one(_m):
        v = next(it, None)
        if v is None:
            return last[0]
        last[0] = v
        return v
    return PLACEHOLDER_RE.sub(one, template)


def test_the_extract_has_the_wordings():
    libs = {r["lib"] for r in source_strings()}
    assert {"deepspeed", "apex", "fairseq"} <= libs
    assert len(source_strings()) >= 20


def test_every_source_wording_is_read():
    """Each string the loss-scale families came from, filled with a scale and a halved scale, reads as an event
    that says what the string says."""
    for r in source_strings():
        t = r["text"]
        if "number of skipped iterations" in t and "loss scale" not in t:
            continue  # Megatron's line is built in pieces; the piece without the scale is read with the others
        line = fill(t, ["0", "1024", "512"]) if re.match(r"\[deep\w+\] OVERFLOW! Rank", t) else \
            fill(t, ["1024", "512"])
        if "ignoring gradient, ⟪str(e)⟫" in t:  # fairseq prints the OverflowError it caught: its own template
            line = fill(t, [fill(_template("fairseq", "setting loss scale to: "), ["512"])])
        e = read(line)
        assert e is not None, (r["lib"], t)
        low = t.lower()
        if "minimum" in low:
            assert e.at_minimum, t
        elif "increasing" in low:
            assert e.kind == "grow" and e.grown_to == 512, (t, e)
        elif "reducing dynamic" in low:
            assert e.kind == "reduce" and e.reduced_to == 512, (t, e)
        elif "hysteresis" in low:
            assert e.skipped and e.scale == 1024 and e.reduced_to is None, (t, e)
        elif "overflow" in low and "no grad overflow" not in low:
            assert e.skipped, (t, e)
            if "reducing to" in low:
                assert (e.scale, e.reduced_to) == (1024, 512), (t, e)
            if "ignoring gradient" in low:
                assert e.reduced_to == 512, (t, e)


def test_negative_lines_are_not_events():
    for line in ["", "loss: 0.4213", "{'loss': 0.51, 'learning_rate': 1e-05}", "Epoch 3: 100%|#####| 50/50",
                 "gradient norm 1.2", "scale factor for images: 2", "Skipping step 5 of evaluation",
                 "overflowing tokens are not returned"]:
        assert read(line) is None, line


def test_reads_real_corpus_lines():
    lines = (CORPUS / "nan_inf__llamafactory-baichuan13b-fp16-overflow-cascade-loss-scale-min" /
             "console.log").read_text().splitlines() if CORPUS.is_dir() else []
    if not lines:
        pytest.skip("needs /work/shared/corpus")
    evs = [read(x) for x in lines]
    evs = [e for e in evs if e]
    assert [(e.scale, e.reduced_to) for e in evs] == [(128, 64), (64, 32), (32, 16), (16, 8)]


def _case_events(case: str) -> list[ScaleEvent]:
    out = []
    for p in sorted((CORPUS / case).glob("*")):
        if p.suffix in (".log", ".txt"):
            for i, line in enumerate(p.read_text(errors="replace").splitlines()):
                e = read(line)
                if e:
                    out.append(e)
    return out


@pytest.mark.skipif(not CORPUS.is_dir(), reason="needs /work/shared/corpus")
@pytest.mark.parametrize("case,verdict", [
    ("nan_inf__llamafactory-baichuan13b-fp16-overflow-cascade-loss-scale-min", "numeric_failure"),
    ("nan_inf__firefly-ziya13b-8gpu-fp16-loss-scale-minimum", "numeric_failure"),
    ("nan_inf__chinese-llama2-pt-deepspeed-fp16-loss-scale-reaches-zero", "numeric_failure"),  # `Attempted ... 0`
    ("no_failure__cogvideox-deepspeed-fp16-loss-scale-calibration-overflow", "calibration"),
    ("nan_inf__swin-benign-dynamic-loss-scale-overflow", "calibration"),
])
def test_corpus_trajectories(case, verdict):
    assert collapse(_case_events(case)).verdict == verdict


def _template(lib: str, needle: str, also: str = "") -> str:
    for r in source_strings():
        if r["lib"] == lib and needle in r["text"] and also in r["text"]:
            return r["text"]
    raise AssertionError(needle)


def test_halving_to_the_floor_at_the_end_is_a_numeric_failure():
    t = _template("deepspeed", "OVERFLOW! Rank", "reducing to")
    scales = [2 ** k for k in range(16, 0, -1)]          # 65536 ... 2: halves every step to the end
    traj = [read(fill(t, ["0", str(s), str(s // 2)])) for s in scales]
    c = collapse(traj)
    assert c.verdict == "numeric_failure" and c.final_scale == 1 and c.trailing_skips == 16


def test_start_skips_then_growth_is_calibration():
    skip = _template("deepspeed", "fp16 dynamic loss scale overflow!")
    grow = _template("deepspeed", "Increasing dynamic loss scale from")
    traj = [read(fill(skip, [str(2 ** k), str(2 ** (k - 1))])) for k in range(32, 16, -1)]
    traj.append(read(fill(grow, ["65536", "131072"])))
    c = collapse(traj)
    assert c.verdict == "calibration", c


def test_long_halving_run_with_a_high_scale_but_recovery_after():
    t = _template("deepspeed", "OVERFLOW! Rank", "reducing to")
    traj = [read(fill(t, ["0", str(2 ** k), str(2 ** (k - 1))])) for k in range(32, 20, -1)]
    assert collapse(traj).verdict == "numeric_failure"          # 12 halvings in a row ending the log
    assert collapse(traj, steps_after=500).verdict == "calibration"   # ... but training went on after them


def test_one_message_per_step_is_counted_once():
    """DeepSpeed's fused optimizer prints three lines for one overflow; the step counts once."""
    note = _template("deepspeed", "Grad overflow on iteration")
    red = _template("deepspeed", "Reducing dynamic loss scale from")
    skip = _template("deepspeed", "fp16 dynamic loss scale overflow!")
    traj = []
    for it, k in enumerate(range(6, 3, -1)):
        traj += [read(fill(note, [str(it)])), read(fill(red, [str(2 ** k), str(2 ** (k - 1))])),
                 read(fill(skip, [str(2 ** k), str(2 ** (k - 1))]))]
    c = collapse(traj)
    assert c.trailing_skips == 3 and c.verdict == "numeric_failure" and c.final_scale == 8


def test_apex_and_fairseq_wordings_collapse():
    apex = _template("apex", "Skipping step, loss scaler")
    traj = [read(fill(apex, ["0", str(2.0 ** k)])) for k in range(7, 1, -1)]
    assert collapse(traj).verdict == "numeric_failure"
    fair = _template("fairseq", "Minimum loss scale reached")
    assert collapse([read(fill(fair, ["0.0001"]))]).verdict == "numeric_failure"


def test_sporadic_mid_run_skips_are_not_a_failure():
    t = _template("deepspeed", "OVERFLOW! Rank", "reducing to")
    grow = _template("deepspeed", "Increasing dynamic loss scale from")
    traj = [read(fill(grow, ["32768", "65536"])) for _ in range(5)]
    traj.insert(3, read(fill(t, ["0", "65536", "32768"])))
    traj.append(read(fill(t, ["0", "65536", "32768"])))
    assert collapse(traj).verdict in ("sporadic", "calibration")
    assert collapse([]).verdict == "none"


def test_overflow_at_a_unit_scale_is_a_failure_unless_the_scale_grows_back():
    t = _template("deepspeed", "OVERFLOW! Rank", "reducing to")
    grow = _template("deepspeed", "Increasing dynamic loss scale from")
    zero = read(fill(t, ["0", "0", "0"]))                 # DeepSpeed prints int(scale): below 1 reads 0
    assert zero.scale == 0 and collapse([zero]).verdict == "numeric_failure"
    assert collapse([read(fill(t, ["0", "1", "1"]))]).verdict == "numeric_failure"
    assert collapse([read(fill(t, ["0", "65536", "32768"]))]).verdict != "numeric_failure"
    assert collapse([read(fill(t, ["0", "1", "1"])), read(fill(grow, ["1", "2"]))]).verdict != "numeric_failure"
    assert collapse([zero], steps_after=500).verdict != "numeric_failure"   # training went on after it

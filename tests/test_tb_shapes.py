"""Tracebacks in the shapes other printers give them (parsers/tb_shapes.py), on real output: IPython 7.34 / 8.4 / 9.18
(interactive cells and a script), a Jupyter notebook run by nbconvert, rich 12.6 / 15.0 (long paths wrapped by the
box), loguru 0.7.3's diagnose style (tests/fixtures/tracebacks, recorded by the scripts there), and corpus posts
quoted verbatim (a traceback glued to a progress bar and cut before its exception line)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import postmortem
from postmortem.parsers.tb_shapes import TracebackShapes

FIX = Path(__file__).parent / "fixtures" / "tracebacks"
CORPUS = Path("/work/shared/corpus")

# innermost first, as the tracebacks table keeps them: the KeyError raised in collate's list comprehension
KEYERROR_TAIL = [("trainlib.py", 7, "<listcomp>"), ("trainlib.py", 7, "collate"), ("trainlib.py", 13, "train")]


def _tracebacks(tmp_path, name: str):
    shutil.copy(FIX / name, tmp_path / "console.log")
    tb = postmortem.analyze(str(tmp_path)).tables.tracebacks
    return [(r.exc_type, r.exc_message, [(f["file"].rsplit("/", 1)[-1], f["line"], f["func"]) for f in r.frames],
             r.chained_from) for r in tb.itertuples()]


@pytest.mark.parametrize("name,outer", [
    ("ipython9_cells.txt", [("Cell In[4]", 2, "run"), ("Cell In[5]", 1, "<module>")]),
    ("ipython8_cells.txt", [("Input In [4]", 2, "run"), ("Input In [5]", 0, "<module>")]),
    ("ipython7_cells.txt", [("<ipython-input-4-6ae4f9cd9c2c>", 2, "run"),
                            ("<ipython-input-5-8d7bfd05c368>", 1, "<module>")]),
    ("ipython9_script.txt", [("nb_cells.py", 6, "run"), ("nb_cells.py", 7, "<module>")]),
    ("rich15_plain.txt", [("rich_train.py", 10, "run"), ("rich_train.py", 14, "<module>")]),
    ("rich12_plain.txt", [("rich_train.py", 10, "run"), ("rich_train.py", 14, "<module>")]),
    ("loguru0.7_catch.txt", [("loguru_train.py", 12, "run"), ("loguru_train.py", 17, "<module>")]),
    ("loguru0.7_exception.txt", [("loguru_exc.py", 11, "<module>")]),
])
def test_every_frame_of_each_shape(tmp_path, name, outer):
    (exc, msg, frames, chained), = _tracebacks(tmp_path, name)
    assert (exc, msg) == ("KeyError", "'labels'")
    assert frames == KEYERROR_TAIL + outer


def test_ipython_chained_exceptions(tmp_path):
    first, second = _tracebacks(tmp_path, "ipython9_chain.txt")
    assert first[:2] == ("KeyError", "'labels'") and first[2][-1] == ("Cell In[4]", 3, "run")
    assert second[:2] == ("RuntimeError", "batch is missing field 'labels'")
    assert second[2] == [("Cell In[4]", 5, "run"), ("Cell In[5]", 1, "<module>")] and second[3] == 0


def test_rich_paths_wrapped_by_the_box_are_joined(tmp_path):
    first, second = _tracebacks(tmp_path, "rich15_chain_long_paths.txt")
    assert first[2][:3] == [("training_loop_module.py", 7, "<listcomp>"), ("training_loop_module.py", 7, "collate"),
                            ("training_loop_module.py", 13, "train")]
    assert second[:2] == ("RuntimeError", "batch is missing field 'labels'") and second[3] == 0


def test_notebook_traceback_and_the_child_traceback_in_its_message(tmp_path):
    outer, inner = _tracebacks(tmp_path, "jupyter_nbconvert_spawn_error.txt")
    assert outer[0] == "ProcessRaisedException"
    assert outer[2] == [("spawn.py", 211, "ProcessContext.join"), ("spawn.py", 296, "start_processes"),
                        ("Cell In[3]", 1, "<module>")]
    assert inner[:2] == ("IndexError", "Target 5 is out of bounds.") and inner[2][1] == ("train.py", 27, "main")


def test_the_frames_code_is_the_failing_line(tmp_path):
    shutil.copy(FIX / "ipython9_cells.txt", tmp_path / "console.log")
    tb = postmortem.analyze(str(tmp_path)).tables.tracebacks.iloc[0]
    assert tb.frames[0]["code"] == "out[k] = [sample[k] for sample in batch]"   # the arrow's line, not context
    shutil.copy(FIX / "rich15_plain.txt", tmp_path / "console.log")
    tb = postmortem.analyze(str(tmp_path)).tables.tracebacks.iloc[0]
    assert tb.frames[2]["code"] == "b = collate(batches[step])"                # the ❱ line


@pytest.mark.skipif(not CORPUS.is_dir(), reason="needs /work/shared/corpus")
def test_corpus_traceback_glued_to_a_bar_and_cut_before_its_exception():
    a = postmortem.analyze(str(CORPUS / "nan_inf__chinese-llama2-pt-deepspeed-fp16-loss-scale-reaches-zero"))
    tb = a.tables.tracebacks
    assert len(tb) == 1 and tb.iloc[0].exc_type == "<truncated>"
    assert tb.iloc[0].frames[-1]["file"].endswith("run_clm_pt_with_peft.py")


@pytest.mark.parametrize("line", [
    "File /etc/hosts not found, using defaults",          # IPython's frame word without its `:LINE`
    "Cell In the middle of the grid: 3",
    "/data/train.py in the queue (2 waiting)",           # IPython 7's frame shape, outside a traceback
    "│ 0 │ l    │ Linear │      9 │ train │     0 │",     # rich table rows (Lightning's model summary)
    "> File \"x\" was not found",
])
def test_ordinary_lines_are_left_alone(line):
    shapes = TracebackShapes()
    out = shapes.translate(0, line)
    assert out is None or not any(t.startswith("  File ") for t in out), out


def test_a_frame_excerpt_without_its_header_still_opens_a_traceback():
    shapes = TracebackShapes()
    assert shapes.translate(0, "File /opt/app/train.py:42, in step(batch)") == [
        "Traceback (most recent call last):", '  File "/opt/app/train.py", line 42, in step']
    assert shapes.translate(0, "ValueError: bad") is None          # the exception line is the plain shape's
    assert shapes.translate(0, "next line") is None                # and the IPython traceback is over

"""Where a rank really is (postmortem.stacks.classify): wrapper frames (tqdm's iteration over a DataLoader, rich's
track, decorators, context managers) decide nothing; a network client blocked under a metrics push is logging.
Stacks from real runs: the lab's metrics-push hang (py-spy text) and a user's posted traceback from the corpus."""
from __future__ import annotations

import os

import pytest

import postmortem
from postmortem.stacks.classify import classify_frames, classify_thread, is_wrapper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUSH = os.path.join(ROOT, "benchmarks", "lab", "cases", "logging_blocking__metrics-push-hang-torchrun-tee-3r-1")

# the innermost frames of a user's posted traceback (accelerate issue 223, shared corpus): the waiting rank was
# iterating its DataLoader through tqdm when the broadcast its iteration issues timed out
TQDM_ITER = [{"file": "/anaconda/envs/x/lib/python3.8/site-packages/tqdm/std.py", "line": 1168, "func": "__iter__"},
             {"file": "/home/azureuser/mytrainer.py", "line": 182, "func": "train_pipeline"},
             {"file": "scripts/training_test.py", "line": 148, "func": "train"}]
# tqdm's own work (a refresh that waits on its lock) still classifies
TQDM_LOCK = [{"file": "/usr/lib/python3.10/threading.py", "line": 168, "func": "acquire"},
             {"file": "/venv/lib/python3.10/site-packages/tqdm/std.py", "line": 1346, "func": "refresh"},
             {"file": "/venv/lib/python3.10/site-packages/tqdm/std.py", "line": 1195, "func": "__iter__"},
             {"file": "train.py", "line": 40, "func": "main"}]


def test_tqdm_iterating_its_wrapped_object_is_no_logging():
    assert is_wrapper(TQDM_ITER[0]) and not is_wrapper(TQDM_LOCK[1])
    assert classify_frames(TQDM_ITER) == "unknown"
    assert classify_frames(TQDM_LOCK) == "logging"


def test_a_socket_read_under_a_metrics_push_is_logging():
    if not os.path.isdir(PUSH):
        pytest.skip("lab case not present")
    a = postmortem.analyze(PUSH, jobs=1, quiet=True)
    st = a.tables.stacks
    main = st[(st["rank"] == 1) & (st["thread_name"] == "MainThread")].iloc[0]
    assert classify_frames(main["frames"]) == "unknown"  # socket.py alone says nothing
    assert classify_thread(main["frames"], main["active"]) == "logging"
    assert (a.verdict.category, a.verdict.culprit_ranks) == ("logging_blocking", [1])
    assert "MetricsPusher.push" in a.verdict.why and "timeout" in a.verdict.fix


def test_a_socket_read_under_a_checkpoint_upload_is_checkpoint_io():
    frames = [{"file": "/usr/lib/python3.11/socket.py", "line": 706, "func": "SocketIO.readinto"},
              {"file": "/usr/lib/python3.11/http/client.py", "line": 286, "func": "HTTPResponse._read_status"},
              {"file": "train.py", "line": 88, "func": "upload_checkpoint"}]
    assert classify_thread(frames, False) == "checkpoint_io"


PIPE_FULL = [os.path.join(ROOT, "benchmarks", "lab", "cases", f"logging_blocking__stdout-pipe-full-{shape}")
             for shape in ("k8s-pods-2r-1", "srun-label-8r-1")]


@pytest.mark.parametrize("case", PIPE_FULL, ids=os.path.basename)
def test_print_into_a_full_pipe_is_logging(case):
    """Real runs (k8s pods, srun --label): rank 0's stdout goes into a log shipper's pipe that stopped draining; py-spy
    --native shows libc's write straight under the user's print line, so the rank is blocked logging, not busy."""
    if not os.path.isdir(case):
        pytest.skip("lab case not present")
    a = postmortem.analyze(case, jobs=1, quiet=True)
    st = a.tables.stacks
    main = st[(st["rank"] == 0) & (st["thread_name"] == "MainThread")].iloc[0]
    assert classify_frames(main["frames"]) == "unknown"  # `main (train.py:50)` names nothing by itself
    assert classify_thread(main["frames"], main["active"]) == "logging"
    assert (a.verdict.category, a.verdict.culprit_ranks) == ("logging_blocking", [0])


def test_write_under_a_library_or_a_save_is_not_logging():
    write = {"file": "libc.so.6", "line": 0, "func": "write", "native": True}
    saving = [write, {"file": "train.py", "line": 12, "func": "save_checkpoint"}]
    assert classify_thread(saving, False) == "checkpoint_io"
    torch_save = [write, {"file": "/venv/lib/python3.11/site-packages/torch/serialization.py", "line": 9,
                          "func": "_save"}, {"file": "train.py", "line": 12, "func": "main"}]
    assert classify_thread(torch_save, False) == "checkpoint_io"
    # without --native the write is not seen: a bare user line that is idle says nothing
    assert classify_thread([{"file": "train.py", "line": 50, "func": "main"}], False) == "unknown"


def test_a_logger_thread_resting_beside_a_busy_main_thread_blocks_nothing():
    """Real HF Trainer run: rank 0's callback computes a slow metric (main thread active in on_step_end) while tqdm's
    monitor thread rests in Event.wait, as it always does. The rank is busy, not blocked in a logger."""
    case = os.path.join(ROOT, "benchmarks", "lab", "cases", "straggler__hf-long-step-metric-hf-trainer-2r-1")
    if not os.path.isdir(case):
        pytest.skip("lab case not present")
    a = postmortem.analyze(case, jobs=1, quiet=True)
    st = a.tables.stacks
    monitor = st[(st["rank"] == 0) & (st["thread_name"] == "tqdm_monitor")]
    assert len(monitor) and classify_frames(monitor.iloc[0]["frames"]) == "logging"  # the thread alone says logging
    assert (a.verdict.category, a.verdict.culprit_ranks) == ("straggler", [0])
    assert "logger-blocks-loop" not in set(a.findings["rule"])

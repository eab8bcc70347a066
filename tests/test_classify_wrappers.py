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

"""postmortem.stacks: frame normalisation, classification, blocking frame, STAT-style merge across ranks."""
from __future__ import annotations

import os

import pandas as pd
import pytest

from postmortem.parsers.pyspy import parse_pyspy_json, parse_pyspy_text
from postmortem.parsers.stackdump import parse_rank_log_faulthandler, parse_stack_dump
from postmortem.tables import schema
from postmortem import stacks as st
from postmortem.ingest.discover import discover

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "stacks")
PARSERS = {"pyspy": parse_pyspy_text, "pyspy_json": parse_pyspy_json, "stack_dump": parse_stack_dump,
           "rank_log": parse_rank_log_faulthandler}


def _rows(*names: str) -> list[dict]:
    out = []
    for name in names:
        src = discover(os.path.join(FIX, name))[0]
        out += PARSERS[src.kind](src).rows.get("stacks", [])
    return out


def _df(rows: list[dict]) -> pd.DataFrame:
    return schema.frame_from_rows("stacks", rows)


def _main(name: str) -> list[dict]:
    rows = _rows(name)
    return rows[st.main_thread_rows(rows)[0]]["frames"]


def _f(func: str, file: str, line: int | None = 1, **kw) -> dict:
    return {"func": func, "file": file, "line": line, **kw}


@pytest.mark.parametrize("path,short", [
    ("/usr/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", "torch/distributed/distributed_c10d.py"),
    ("/usr/local/lib/python3.8/dist-packages/wandb/sdk/wandb_run.py", "wandb/sdk/wandb_run.py"),
    ("/usr/lib/python3.11/threading.py", "threading.py"),
    ("/av/lib/third_party/python2.7/multiprocessing/queues.py", "multiprocessing/queues.py"),
    (r"C:\Program Files (x86)\Python36-32\lib\threading.py", "threading.py"),
    (r"C:\Program Files (x86)\Python36-32\lib\site-packages\tqdm\_tqdm.py", "tqdm/_tqdm.py"),
    ("/home/me/job/train.py", "train.py"),
    ("torch/distributed/distributed_c10d.py", "torch/distributed/distributed_c10d.py"),
    ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap>"), ("", ""), (None, ""),
])
def test_short_file(path, short):
    assert st.short_file(path) == short


@pytest.mark.parametrize("func,bare", [
    ("Run.log", "log"), ("_run_decorator._attach.<locals>.wrapper", "wrapper"), ("<module>", "<module>"),
    ("prof.<locals>.wrap.<locals>.wrapper", "wrapper"), ("wait", "wait"), ("<lambda>", "<lambda>"), (None, ""),
])
def test_bare_name(func, bare):
    assert st.bare_name(func) == bare


def test_signature_ignores_lines_natives_and_qualification():
    a = [_f("Condition.wait", "threading.py", 327), _f("clock_nanosleep", "libc.so.6", None, native=True),
         _f("main", "/home/u/train.py", 3)]
    b = [_f("wait", "/usr/lib/python3.11/threading.py", 320), _f("main", "train.py", 9)]
    assert st.signature(a) == st.signature(b) == "main (train.py);wait (threading.py)"
    assert st.signature([_f("??", "libcuda.so", None, native=True), _f("0x7f00", "libc.so.6", None, native=True)]) == ""
    assert st.signature([]) == ""


@pytest.mark.parametrize("name,cls,blocking", [
    ("pyspy_wandb_0.31.0_blocked_log.txt", "logging", "AsyncioManager.run"),
    ("pyspy_wandb_0.13.11_blocked_log.txt", "logging", "SockClient._sendall_with_error_handle"),
    ("pyspy_wandb_0.12.21_blocked_log.txt", "logging", "InterfaceBase.publish_partial_history"),
    ("wandb_gql_retry_pyspy_main.txt", "logging", "_sleep_check_cancelled"),
    ("tqdm_monitor_lock_hanging_threads.txt", "logging", "acquire"),
    ("pin_memory_deadlock_gdb_pybt.txt", "data_loading", "get"),
    ("gpu_lost_gdb_bt_hung_worker.txt", "compute", "cudaLaunchKernel"),
    ("pyspy_dump_native.txt", "sleep_lock", "clock_nanosleep"),
    ("pyspy_dump.txt", "unknown", "leaf_sleep"),   # time.sleep without --native: nothing names the activity
    ("pyspy_launcher_4ranks_subprocesses.txt", "sleep_lock", "Popen._try_wait"),
    # DDP's gradient all-reduce waits inside backward's C++: only the native frames say it is a collective
    ("pyspy_native_ddp_backward_allreduce_wait.txt", "collective_wait", "c10d::Reducer::finalize_backward"),
    ("pyspy_native_ddp_rank_stalled_in_load_batch.txt", "sleep_lock", "clock_nanosleep"),
])
def test_classify_real_stacks(name, cls, blocking):
    frames = _main(name)
    assert st.classify_frames(frames) == cls
    assert st.blocking_frame(frames)["func"] == blocking


def test_classify_torchrun_dump():
    rows = _rows("pyspy_dump_torchrun_subprocesses.txt")
    assert [st.classify_frames(r["frames"]) for r in rows] == ["idle", "sleep_lock", "collective_wait", "unknown"]
    assert st.blocking_frame(rows[2]["frames"])["func"] == "all_reduce"
    assert st.last_user_frame(rows[2]["frames"])["func"] == "train_step"
    assert [st.is_launcher(r["frames"]) for r in rows] == [True, False, False, False]


@pytest.mark.parametrize("frames,cls", [
    ([_f("barrier", "torch/distributed/distributed_c10d.py"), _f("main", "train.py")], "collective_wait"),
    ([_f("c10d::ProcessGroupNCCL::WorkNCCL::wait", "libtorch_cuda.so", None, native=True),
      _f("step", "train.py")], "collective_wait"),
    ([_f("get", "torch/distributed/elastic/utils/store.py"), _f("main", "train.py")], "collective_wait"),
    # native collective frames under backward (no c10d:: namespace in the name): still a collective wait
    ([_f("gloo::AllreduceOptions::wait", "libgloo.so", None, native=True), _f("backward", "torch/_tensor.py")],
     "collective_wait"),
    ([_f("ncclAllReduce", "libnccl.so.2", None, native=True), _f("backward", "torch/_tensor.py")], "collective_wait"),
    ([_f("at::native::allreduce_sparse", "libtorch_cpu.so", None, native=True), _f("step", "train.py")],
     "collective_wait"),
    ([_f("WorkGloo::wait", "libtorch_cpu.so", None, native=True), _f("step", "train.py")], "collective_wait"),
    ([_f("wait", "threading.py"), _f("get", "queue.py"), _f("_try_get_data", "torch/utils/data/dataloader.py"),
      _f("__next__", "torch/utils/data/dataloader.py"), _f("train", "train.py")], "data_loading"),
    ([_f("_pin_memory_loop", "torch/utils/data/_utils/pin_memory.py")], "data_loading"),
    ([_f("flush", "logging/__init__.py"), _f("emit", "logging/__init__.py"), _f("train", "train.py")], "logging"),
    ([_f("add_scalar", "torch/utils/tensorboard/writer.py"), _f("train", "train.py")], "logging"),
    ([_f("_save", "torch/serialization.py"), _f("save", "torch/serialization.py"), _f("train", "train.py")],
     "checkpoint_io"),
    ([_f("save_file", "safetensors/torch.py"), _f("save_pretrained", "transformers/modeling_utils.py")],
     "checkpoint_io"),
    ([_f("copyfileobj", "shutil.py"), _f("train", "train.py")], "checkpoint_io"),
    ([_f("backward", "torch/_tensor.py"), _f("train", "train.py")], "compute"),
    ([_f("cudaStreamSynchronize", "libcudart.so.12", None, native=True), _f("train", "train.py")], "compute"),
    ([_f("_call_impl", "torch/nn/modules/module.py"), _f("train", "train.py")], "compute"),
    ([_f("acquire", "filelock/_api.py"), _f("main", "train.py")], "sleep_lock"),
    ([_f("select", "selectors.py"), _f("_run_once", "asyncio/base_events.py")], "idle"),
    ([_f("train", "train.py")], "unknown"),
    ([], "unknown"),
    # a progress bar's iteration wrapper hands on the wrapped iterable's items: not the bar blocking (a cut
    # traceback's innermost frame; the DataLoader below it was lost); the bar's own drawing and locks are
    ([_f("__iter__", "tqdm/std.py", 1168), _f("train_pipeline", "/home/u/mytrainer.py", 182)], "unknown"),
    ([_f("track", "rich/progress.py"), _f("train", "train.py")], "unknown"),
    ([_f("__next__", "torch/utils/data/dataloader.py"), _f("__iter__", "tqdm/std.py"), _f("train", "train.py")],
     "data_loading"),
    ([_f("refresh", "tqdm/std.py"), _f("__iter__", "tqdm/std.py"), _f("train", "train.py")], "logging"),
    # a specific library beats generic plumbing: wandb's router thread reads an mp queue, it is not data loading
    ([_f("get", "multiprocessing/queues.py"), _f("_read_message", "wandb/sdk/interface/router_queue.py")], "logging"),
    # the innermost activity wins: a barrier inside checkpoint saving is a collective wait
    ([_f("barrier", "torch/distributed/distributed_c10d.py"), _f("save_checkpoint", "deepspeed/runtime/engine.py")],
     "collective_wait"),
])
def test_classify_frames(frames, cls):
    assert st.classify_frames(frames) == cls


def test_main_thread_rows():
    rows = _rows("pyspy_dump_subprocesses.txt", "faulthandler_py311_dump_later.txt")
    assert st.main_thread_rows(rows) == [0, 2, 4]  # two py-spy processes + the unnamed faulthandler one
    assert st.main_thread_rows(_df(rows)) == [0, 2, 4]


def test_merge_real_four_ranks_one_still_saving():
    rows = _rows("pyspy_launcher_4ranks_subprocesses.txt")
    m = st.merge_stacks(_df(rows))
    assert m.members == [0, 1, 2, 3]
    assert m.unranked == ["pyspy_launcher_4ranks_subprocesses.txt:29843@1"]  # the launcher has no rank
    assert [(c.members, c.category, c.odd) for c in m.classes] == [
        ([0, 1, 3], "collective_wait", False), ([2], "checkpoint_io", True)]
    assert m.majority is m.classes[0]
    assert m.odd_ones == [2] and m.least_progressed == [2]
    assert "checkpoint_io" in m.least_progressed_why
    assert m.classes[1].blocking["func"] == "save_checkpoint"
    assert m.render_text().splitlines() == [
        "[0-3] <module> (worker.py:33)", "  [0-3] train (worker.py:20)",
        "    [0-1,3] barrier (worker.py:8)", "    [2] save_checkpoint (worker.py:12)"]
    d = m.to_dict()
    assert d["classes"][1]["ranks"] == "2" and d["tree"]["children"][0]["count"] == 4
    assert st.merge_stacks(_df(rows), unranked="keep").members[-1] == "pyspy_launcher_4ranks_subprocesses.txt:29843@1"


def test_merge_all_threads_profiles():
    m = st.merge_stacks(_df(_rows("pyspy_4ranks_concat_locals.txt")), threads="all")
    assert m.odd_ones == [2]
    by_cat = {c.category: (c.members, c.odd) for c in m.classes}
    assert by_cat["unknown"] == ([0, 1, 2, 3], False)  # the heartbeat thread of every rank
    assert by_cat["checkpoint_io"] == ([2], True)
    assert m.least_progressed == []


def test_merge_torchrun_without_ranks_uses_dump_ids_and_drops_the_agent():
    m = st.merge_stacks(_df(_rows("pyspy_dump_torchrun_subprocesses.txt")))
    assert m.launchers == ["pyspy_dump_torchrun_subprocesses.txt:9590@1"]
    assert m.members == ["pyspy_dump_torchrun_subprocesses.txt:9614@23", "pyspy_dump_torchrun_subprocesses.txt:9615@35"]
    assert m.majority is None and m.odd_ones == []  # one against one: nobody is the odd one out
    assert m.least_progressed == ["pyspy_dump_torchrun_subprocesses.txt:9615@35"]


def _synthetic(ranks: int, odd: dict[int, list[dict]]) -> list[dict]:
    wait = [_f("all_reduce", "torch/distributed/distributed_c10d.py", 3252), _f("step", "train.py", 40),
            _f("<module>", "train.py", 90)]
    rows = []
    for r in range(ranks):
        frames = odd.get(r, wait)
        rows.append({"source": f"rank{r}.txt", "line": 4, "rank": r, "host": None, "ts": None, "pid": 100 + r,
                     "thread": str(100 + r), "thread_name": "MainThread", "active": False, "owns_gil": False,
                     "frames": frames, "signature": st.signature(frames), "dump": f"rank{r}.txt:{100 + r}@1"})
    return rows


def test_merge_many_ranks_finds_the_laggards():
    wb = [_f("_sendall_with_error_handle", "wandb/sdk/lib/sock_client.py", 130), _f("log", "wandb/sdk/wandb_run.py"),
          _f("step", "train.py", 52), _f("<module>", "train.py", 90)]
    dl = [_f("__next__", "torch/utils/data/dataloader.py", 733), _f("<module>", "train.py", 88)]
    m = st.merge_stacks(_df(_synthetic(512, {7: wb, 300: dl})))
    assert m.classes[0].size == 510 and m.classes[0].category == "collective_wait"
    assert m.odd_ones == [7, 300] and m.least_progressed == [7, 300]
    assert st.rank_ranges(m.classes[0].members) == "0-6,8-299,301-511"


def test_merge_prefers_the_ranks_own_process_and_latest_dump():
    rows = _synthetic(2, {})
    worker = [_f("_worker_loop", "torch/utils/data/_utils/worker.py", 300), _f("_bootstrap", "multiprocessing/process.py"),
              _f("<module>", "<string>", 1)]
    rows.append({**rows[0], "source": "rank0.txt", "line": 90, "pid": 555, "thread": "555", "frames": worker,
                 "signature": st.signature(worker), "dump": "rank0.txt:555@80"})
    later = [_f("save", "torch/serialization.py"), _f("<module>", "train.py", 95)]
    rows.append({**rows[1], "source": "rank1_later.txt", "frames": later, "signature": "", "dump": "rank1_later.txt:101@1"})
    m = st.merge_stacks(_df(rows))
    assert m.class_of(0).category == "collective_wait"  # not its DataLoader worker
    assert m.class_of(1).category == "checkpoint_io"    # the later dump; its missing signature is computed


def test_merge_edge_cases():
    empty = st.merge_stacks(schema.empty_frame("stacks"))
    assert empty.classes == [] and empty.members == [] and empty.majority is None
    rows = _synthetic(3, {1: []})
    m = st.merge_stacks(_df(rows))
    assert m.empty == [1] and m.members == [0, 1, 2]
    with pytest.raises(ValueError):
        st.merge_stacks(_df(rows), threads="some")


def test_join_ranks_from_nccl_map():
    rows = _rows("pyspy_dump_subprocesses.txt")
    df = st.join_ranks(_df(rows), {"node1:6044": 3, "node1:6044#n": 8, "node2:9999": 1})
    assert df["rank"].tolist()[:2] == [3, 3] and pd.isna(df["rank"].tolist()[2])


def test_rank_ranges():
    assert st.rank_ranges([5, 0, 1, 2, 7, "x.txt:1@1"]) == "0-2,5,7,x.txt:1@1"
    assert st.rank_ranges([]) == ""


def test_tables_join_dumped_pids_to_nccl_ranks(tmp_path):
    from postmortem.parsers.base import parse_source
    from postmortem.tables import build as tables
    (tmp_path / "nccl.log").write_text(
        "node1:6044:6050 [0] NCCL INFO comm 0x55d0a rank 3 nranks 4 cudaDev 0 busId 3b000 commId 0x1234 - Init COMPLETE\n"
        "node1:6044:6050 [0] NCCL INFO comm 0x55d0a rank 3 nranks 4 cudaDev 0 busId 3b000 commId 0x1234 - Init COMPLETE\n")
    (tmp_path / "pyspy.txt").write_bytes(open(os.path.join(FIX, "pyspy_dump_subprocesses.txt"), "rb").read())
    sources = discover(str(tmp_path))
    t = tables.build(sources, [parse_source(s) for s in sources])
    assert t.stacks["rank"].tolist()[:2] == [3, 3] and pd.isna(t.stacks["rank"].tolist()[2])


def test_spawn_parent_is_a_launcher_and_its_children_are_ranks():
    parent = [_f("wait", "multiprocessing/connection.py"), _f("join", "torch/multiprocessing/spawn.py"),
              _f("start_processes", "torch/multiprocessing/spawn.py"), _f("spawn", "torch/multiprocessing/spawn.py"),
              _f("<module>", "train.py")]
    child = [_f("all_reduce", "torch/distributed/distributed_c10d.py"), _f("worker", "train.py"),
             _f("_wrap", "torch/multiprocessing/spawn.py"), _f("run", "multiprocessing/process.py"),
             _f("_bootstrap", "multiprocessing/process.py"), _f("_main", "multiprocessing/spawn.py"),
             _f("spawn_main", "multiprocessing/spawn.py"), _f("<module>", "<string>")]
    assert st.is_launcher(parent) and not st.is_launcher(child)
    rows = _synthetic(2, {0: child, 1: child})
    rows.append({**rows[0], "rank": None, "pid": 99, "thread": "99", "frames": parent,
                 "signature": st.signature(parent), "dump": "parent.txt:99@1"})
    m = st.merge_stacks(_df(rows), unranked="keep")
    assert m.launchers == ["parent.txt:99@1"] and m.members == [0, 1]

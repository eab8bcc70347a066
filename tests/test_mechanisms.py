"""Failure mechanisms, each in at least three wordings / log shapes of our own, plus near misses that must stay
quiet (issue: diagnose any job's logs, not the corpus). Every fixture is written here, in the shapes real launchers
and libraries print; none is a corpus file."""
from __future__ import annotations

import pytest

import postmortem
from postmortem.parsers.steps import parse_step


def _run(tmp_path, files: dict[str, str]):
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return postmortem.analyze(str(tmp_path), quiet=True)


# ---- 1. failure signals: a job that died without a recognised cause is `unknown`, never `no_failure`

DIED = {
    "abort": "step 10 loss 0.5\nstep 11 loss 0.4\nterminate called after throwing an instance of 'std::runtime_error'\n"
             "  what():  boom\nAborted (core dumped)\n",
    "srun_segv": "0: epoch 1 step 5\n1: epoch 1 step 5\nsrun: error: node7: task 1: Segmentation fault (core dumped)\n",
    "bus_error": "[2024-01-01 10:00:00] iter 100\n/bin/bash: line 1: 4242 Bus error               (core dumped) "
                 "python train.py --cfg a.yaml\n",
    "fatal_python": "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):\n"
                    "  File \"/w/model.py\", line 12 in forward\n",
}


@pytest.mark.parametrize("name", sorted(DIED))
def test_a_job_that_died_is_never_no_failure(tmp_path, name):
    a = _run(tmp_path, {"job.log": DIED[name]})
    assert a.verdict.category != "no_failure", a.verdict
    if a.verdict.category == "unknown":
        assert a.evidence_gaps, "an unexplained failure must say what to collect"


ENDED = {
    "hf": "{'loss': 0.5, 'learning_rate': 1e-05, 'epoch': 0.99}\n{'train_runtime': 601.9, 'train_samples_per_second': 7.0,"
          " 'train_loss': 1.47, 'epoch': 1.0}\n",
    "lightning": "Epoch 9: 100%|██████████| 50/50 [00:05<00:00, 9.5it/s, loss=0.1]\n`Trainer.fit` stopped: `max_epochs=10` reached.\n",
    "plain": "step 100 loss 0.1\nTraining completed in 3h12m\n",
}


@pytest.mark.parametrize("name", sorted(ENDED))
def test_an_end_marker_makes_no_failure_confident(tmp_path, name):
    a = _run(tmp_path, {"job.log": ENDED[name]})
    assert a.verdict.category == "no_failure" and a.verdict.confidence >= 0.8, a.verdict


def test_no_end_marker_and_a_bar_stopped_short_is_hedged(tmp_path):
    a = _run(tmp_path, {"job.log": "Steps:   2%|▏         | 2000/100000 [5:37:42<274:44:15,  9.96s/it, loss=0.005]\n"})
    assert a.verdict.category == "no_failure" and a.verdict.confidence < 0.6
    assert a.evidence_gaps


def test_lowercase_abort_words_in_prose_are_not_signals(tmp_path):
    a = _run(tmp_path, {"job.log": "step 1 loss 0.3\nuser note: the previous run was aborted by hand\n"
                                   "Training completed.\n"})
    assert a.verdict.category == "no_failure"


# ---- 2. a traceback printed when a hung job was killed shows where the rank was

def _tb(prefix: str, frames: list[tuple[str, str]], last: str) -> str:
    out = [f"{prefix}Traceback (most recent call last):"]
    for f, fn in frames:
        out.append(f'{prefix}  File "{f}", line 10, in {fn}')
        out.append(f"{prefix}    x()")
    out.append(prefix + last)
    return "\n".join(out) + "\n"


SP = "/usr/lib/python3.10/site-packages/"
HUNG_IN_LOGGER = {
    "ctrl_c_wandb": _tb("", [("/w/train.py", "<module>"), (SP + "wandb/sdk/wandb_run.py", "log"),
                             (SP + "wandb/sdk/interface/interface_sock.py", "_publish"),
                             ("/usr/lib/python3.10/socket.py", "sendall")], "KeyboardInterrupt"),
    "sigterm_tensorboard": _tb("[rank0]: ", [("/w/train.py", "<module>"), (SP + "torch/utils/tensorboard/writer.py",
                                                                          "add_scalar"),
                                            (SP + "tensorboard/summary/writer/event_file_writer.py", "flush")],
                               "torch.distributed.elastic.multiprocessing.api.SignalException: Process 42 got signal: 15"),
    "cut_off_in_wandb": _tb("", [("/w/train.py", "<module>"), ("/w/train.py", "train"),
                                 (SP + "wandb/sdk/wandb_run.py", "log")], "").rstrip("\n") + "\n",
}


@pytest.mark.parametrize("name", sorted(HUNG_IN_LOGGER))
def test_kill_traceback_in_a_logger_is_a_logging_stack(tmp_path, name):
    a = _run(tmp_path, {"job.log": HUNG_IN_LOGGER[name]})
    assert len(a.tables.stacks) >= 1
    assert a.verdict.category == "logging_blocking", a.verdict


def test_an_ordinary_exception_is_not_a_stack(tmp_path):
    a = _run(tmp_path, {"job.log": _tb("", [("/w/train.py", "<module>"), (SP + "wandb/sdk/wandb_run.py", "log")],
                                       "ValueError: bad key")})
    assert a.tables.stacks.empty
    assert a.verdict.category != "logging_blocking"


# ---- 3. the straggler's work is the work announced when the timed-out collective began

WD = ("[rank{r}]:[E ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation timeout: "
      "WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600031 "
      "milliseconds before timing out.")
STRAGGLER = {
    "save": ["2024-05-01T10:00:00Z rank 0 step 99 loss 0.1", "2024-05-01T10:00:01Z Saving model checkpoint to /ckpt/step-100",
             "2024-05-01T10:10:01Z " + WD.format(r=1), "2024-05-01T10:10:01Z " + WD.format(r=2)],
    "eval": ["[2024-05-01 10:00:00,100] step 99 loss 0.1", "[2024-05-01 10:00:02,000] ***** Running Evaluation *****",
             "[2024-05-01 10:10:02,500] " + WD.format(r=3)],
    "prep": ["2024-05-01 10:00:00 | INFO | Running tokenizer on dataset", "2024-05-01 10:10:00 | ERROR | " + WD.format(r=1)],
}


@pytest.mark.parametrize("name", sorted(STRAGGLER))
def test_work_announced_when_the_wait_began_is_the_straggler(tmp_path, name):
    a = _run(tmp_path, {"console.log": "\n".join(STRAGGLER[name]) + "\n"})
    assert a.verdict.category == "straggler", a.verdict


def test_a_timeout_long_after_a_save_is_not_the_save(tmp_path):
    lines = ["2024-05-01T09:00:00Z Saving model checkpoint to /ckpt/step-50", "2024-05-01T09:00:30Z step 51 loss 0.2",
             "2024-05-01T10:10:01Z " + WD.format(r=1)]
    a = _run(tmp_path, {"console.log": "\n".join(lines) + "\n"})
    assert not any(f.rule == "straggler-busy-rank" and "began" in f.explanation for f in a.finding_list)


# ---- 4. a collective entered after training ended: skew

AFTER_END = {
    "lightning": ["`Trainer.fit` stopped: `max_epochs=3` reached.", WD.format(r=0), "Aborted (core dumped)"],
    "hf": ["{'train_runtime': 100.0, 'train_loss': 0.5, 'epoch': 3.0}",
           "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
           "1800000ms for recv operation to complete"],
    "plain": ["[Rank 0] Training finished after 3 epochs", WD.format(r=0)],
}


@pytest.mark.parametrize("name", sorted(AFTER_END))
def test_collective_after_training_end_is_skew(tmp_path, name):
    a = _run(tmp_path, {"console.log": "\n".join(AFTER_END[name]) + "\n"})
    assert a.verdict.category == "barrier_skew", a.verdict
    assert a.verdict.rule == "collective-after-training-end"


def test_timeout_before_the_end_marker_is_not_post_training(tmp_path):
    a = _run(tmp_path, {"console.log": WD.format(r=0) + "\nTraining finished after 3 epochs\n"})
    assert not any(f.rule == "collective-after-training-end" for f in a.finding_list)


# ---- 5. the first collective of a communicator never completed on any rank: the transport

def _first(seq: int, op: str, ranks) -> str:
    return "\n".join(f"[rank{r}]:[E ProcessGroupNCCL.cpp:828] [Rank {r}] Watchdog caught collective operation timeout: "
                     f"WorkNCCL(SeqNum={seq}, OpType={op}, Timeout(ms)=1800000) ran for 1800100 milliseconds before "
                     "timing out." for r in ranks) + "\n"


@pytest.mark.parametrize("op,ranks", [("ALLGATHER", [0, 1]), ("ALLREDUCE", [0, 1, 2, 3]), ("BROADCAST", [1, 2, 3])])
def test_first_collective_never_completing_is_the_transport(tmp_path, op, ranks):
    a = _run(tmp_path, {"console.log": _first(1, op, ranks)})
    assert a.verdict.category == "nccl_error", a.verdict


def test_a_later_collective_is_not_the_transport(tmp_path):
    a = _run(tmp_path, {"console.log": "step 5 loss 0.1\n" + _first(1812, "ALLREDUCE", [0, 1])})
    assert a.verdict.category != "nccl_error"


# ---- 6. OOM phase from the message and the end of training

OOM = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 270.00 MiB (GPU 1; 79.35 GiB total capacity)"
OOM_PHASE = {
    "fsdp_clone": ("checkpoint", f"UserWarning: Failed to clone() tensor with name w. This may mean that this "
                                 f"state_dict entry could point to invalid memory. Error: {OOM}\n"),
    "after_end": ("checkpoint", "{'train_runtime': 601.9, 'epoch': 1.0}\n" + OOM + "\n"),
    "from_pretrained": ("init", "Loading checkpoint shards:  50%|█████     | 1/2 [00:05<00:05]\n"
                                f"RuntimeError while calling from_pretrained: {OOM}\n"),
}


@pytest.mark.parametrize("name", sorted(OOM_PHASE))
def test_oom_phase_comes_from_the_message_and_the_end_marker(tmp_path, name):
    phase, text = OOM_PHASE[name]
    a = _run(tmp_path, {"job.log": text})
    assert (a.verdict.category, a.verdict.phase) == ("gpu_oom", phase), a.verdict


@pytest.mark.parametrize("line", [OOM, "RuntimeError: cuda runtime error (2) : out of memory at /x/THCStorage.cu:58",
                                  "Tried to allocate 216.00 MiB (GPU 0; 7.92 GiB total capacity; 69.17 MiB already "
                                  "allocated; 24.56 MiB free; 86.00 MiB reserved in total by PyTorch)"])
def test_a_lone_oom_line_is_oom_of_unknown_phase(tmp_path, line):
    a = _run(tmp_path, {"job.log": line + "\n"})
    assert a.verdict.category == "gpu_oom" and a.verdict.phase in ("unknown", None)  # nothing shows a phase
    assert a.verdict.confidence <= 0.6


# ---- 7. progress lines of other libraries

@pytest.mark.parametrize("line,step,total,phase", [
    ("Epoch(train) [1][ 50/500]  lr: 1.0e-02  eta: 0:10:00  loss: 1.23", 50, 500, "train"),
    ("Epoch(val) [1][ 20/100]    eta: 0:00:10", 20, 100, "eval"),
    ("  50/500 [==>...........] - ETA: 1:00 - loss: 0.5", 50, 500, "train"),
    ("Validating ━━━━━━━━━━━━━ 45/100 0:00:10", 45, 100, "eval"),
    ("Epoch 9, Rank 7, world_size 8: 35batch [00:03, 10.54batch/s]", 35, None, "train"),
])
def test_other_libraries_progress_lines(line, step, total, phase):
    row = parse_step(line)
    assert row is not None and row["step"] == step and row.get("total") == total and row["phase"] == phase


@pytest.mark.parametrize("line", ["see https://x.org/a [1][2]", "2024/01/01 [info] ok", "ratio 3/4 [approx]"])
def test_progress_near_misses(line):
    row = parse_step(line)
    assert row is None or row.get("desc") not in ("keras", "Epoch(train)")


# ---- 8. a lone rank's stack waits in a collective outside the training step: the paths diverged (hedged)

C10D = SP + "torch/distributed/distributed_c10d.py"
LONE = {
    "truncated_save_barrier": _tb("", [("/w/train.py", "<module>"), (SP + "lightning/pytorch/trainer/trainer.py",
                                                                     "save_checkpoint"),
                                       (SP + "lightning/pytorch/strategies/ddp.py", "barrier"), (C10D, "barrier")],
                                  "").rstrip("\n") + "\n",
    "ctrl_c_metric_gather": _tb("[rank2]: ", [("/w/train.py", "<module>"), ("/w/train.py", "log_metrics"),
                                              (C10D, "all_gather_object")], "KeyboardInterrupt"),
    "sigterm_broadcast_in_save": _tb("", [("/w/train.py", "<module>"), ("/w/train.py", "save_model"),
                                          (C10D, "broadcast_object_list")],
                                     "torch.distributed.elastic.multiprocessing.api.SignalException: Process 7 got "
                                     "signal: 15"),
}


@pytest.mark.parametrize("name", sorted(LONE))
def test_lone_rank_waiting_outside_the_step_is_hedged_skew(tmp_path, name):
    a = _run(tmp_path, {"job.log": LONE[name]})
    assert a.verdict.category == "barrier_skew", a.verdict
    assert a.verdict.confidence < 0.6


def test_lone_rank_waiting_in_the_step_is_not_skew(tmp_path):
    text = _tb("", [("/w/train.py", "<module>"), ("/w/train.py", "train_step"), (SP + "torch/_tensor.py", "backward"),
                    (C10D, "all_reduce")], "KeyboardInterrupt")
    a = _run(tmp_path, {"job.log": text})
    assert a.verdict.category != "barrier_skew"


@pytest.mark.parametrize("line,step,total", [("[Rank 2] 处理批次 (5/32) loss=0.2949", 5, 32),
                                             ("Schritt [7/40] Verlust loss=0.12", 7, 40),
                                             ("バッチ (3/10) loss: 1.5", 3, 10)])
def test_any_language_bracketed_fraction_with_a_loss_is_a_step(line, step, total):
    row = parse_step(line)
    assert row and (row["step"], row["total"]) == (step, total)


@pytest.mark.parametrize("line", ["Epoch [1/10] loss=0.5", "see (1/2) of the docs", "ratio (3/4) of the loss budget"])
def test_fraction_near_misses(line):
    row = parse_step(line)
    assert row is None or row.get("total") is None or row["desc"] != "custom" or "loss budget" in line


# ---- 9. GPU memory held by something other than the job

SMI_ORPHAN = """+-----------------------------------------------------------------------------+
| NVIDIA-SMI 535.54       Driver Version: 535.54       CUDA Version: 12.2     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  NVIDIA A10G         On   | 00000000:00:1E.0 Off |                    0 |
|  0%   30C    P0    58W / 300W |  20013MiB / 23028MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
+-----------------------------------------------------------------------------+
| Processes:                                                                  |
|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |
|=============================================================================|
|  No running processes found                                                 |
+-----------------------------------------------------------------------------+
"""
HELD = {
    "smi_no_process": {"nvidia-smi.txt": SMI_ORPHAN},
    "oom_old_detail": {"train.log": "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 10.76 GiB "
                                    "total capacity; 120.00 MiB already allocated; 8.56 MiB free; 130.00 MiB reserved "
                                    "in total by PyTorch)\n"},
    "oom_new_detail": {"train.log": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has "
                                    "a total capacity of 79.15 GiB of which 12.31 MiB is free. Including non-PyTorch "
                                    "memory, this process has 1.02 GiB memory in use. Of the allocated memory 512.00 "
                                    "MiB is allocated by PyTorch\n"},
}


@pytest.mark.parametrize("name", sorted(HELD))
def test_gpu_memory_held_by_another_process(tmp_path, name):
    a = _run(tmp_path, HELD[name])
    assert a.verdict.category == "gpu_oom"
    assert any(f.rule == "gpu-memory-held-elsewhere" for f in a.finding_list)


def test_a_busy_gpu_or_a_full_job_is_not_held_elsewhere(tmp_path):
    busy = SMI_ORPHAN.replace("|      0%      Default |", "|     97%      Default |")
    full = ("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 10.76 GiB total capacity; 9.10 GiB "
            "already allocated; 80.00 MiB free; 9.40 GiB reserved in total by PyTorch)\n")
    a = _run(tmp_path, {"nvidia-smi.txt": busy, "train.log": full})
    assert not any(f.rule == "gpu-memory-held-elsewhere" for f in a.finding_list)


# ---- 10. a rank that exits without an exception while its peers lose it

EXITED = {
    "torchrun_summary": ("[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed "
                         "by peer [127.0.0.1]:28873\n"
                         "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
                         "============================================================\n"
                         "train.py FAILED\n------------------------------------------------------------\n"
                         "Failures:\n  <NO_OTHER_FAILURES>\n------------------------------------------------------------\n"
                         "Root Cause (first observed failure):\n[0]:\n  time      : 2024-01-01_10:00:00\n"
                         "  host      : node1\n  rank      : 1 (local_rank: 1)\n  exitcode  : 3 (pid: 4242)\n"
                         "  error_file: <N/A>\n============================================================\n", 1),
    "srun": ("0: [E ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, "
             "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600100 milliseconds before timing out.\n"
             "1: step 9 loss 0.3\n0: step 9 loss 0.3\n"
             "srun: error: node12: task 1: Exited with exit code 2\n", 1),
    "segfault_summary": ("[rank1]: RuntimeError: Connection reset by peer\n"
                         "Root Cause (first observed failure):\n[0]:\n  rank      : 2 (local_rank: 2)\n"
                         "  exitcode  : -11 (pid: 77)\n", 2),
}


@pytest.mark.parametrize("name", sorted(EXITED))
def test_a_rank_that_exits_silently_is_the_culprit(tmp_path, name):
    text, culprit = EXITED[name]
    a = _run(tmp_path, {"console.log": text})
    assert a.verdict.culprit_ranks == [culprit], a.verdict
    assert a.verdict.confidence < 0.8


def test_a_rank_that_raised_is_not_silent(tmp_path):
    text = EXITED["torchrun_summary"][0].replace("Failures:", "[rank1]: ValueError: bad sample\nFailures:")
    a = _run(tmp_path, {"console.log": text})
    assert not any(f.rule == "rank-exited-silently" for f in a.finding_list)


# ---- 11. dumps inside logs: read wherever they sit, in small and big files

NOISE = "".join(f"node1:42:43 [0] NCCL INFO Channel {i:02d}/0 : 0[0] -> 1[1] via P2P/IPC\n" for i in range(40))
PYSPY = ('Process 4242: python train.py\nPython v3.11.7 (/usr/bin/python3)\n\nThread 4242 (idle): "MainThread"\n'
         "    _publish (wandb/sdk/interface/interface_sock.py:45)\n    log (wandb/sdk/wandb_run.py:1800)\n"
         "    main (train.py:40)\n    <module> (train.py:50)\n")
GDB = ("(gdb) py-bt\nTraceback (most recent call first):\n  File \"/usr/lib/python3.10/threading.py\", line 320, in wait\n"
       "  File \"/usr/lib/python3.10/site-packages/torch/utils/data/_utils/pin_memory.py\", line 52, in _pin_memory_loop\n")


@pytest.mark.parametrize("where", ["small", "big"])
def test_pyspy_dump_inside_a_log_is_read(tmp_path, where):
    pad = NOISE * (1 if where == "small" else 1800)  # the big one is past postmortem.parsers.embedded.SMALL
    a = _run(tmp_path, {"rank0.log": pad + PYSPY + "step 5 loss 0.1\n"})
    assert len(a.tables.stacks) >= 1
    assert a.verdict.category == "logging_blocking"


def test_smi_table_after_startup_output_is_read(tmp_path):
    a = _run(tmp_path, {"gpu.txt": NOISE + SMI_ORPHAN})
    assert len(a.tables.gpu) == 1


def test_gdb_session_inside_a_log_is_read(tmp_path):
    a = _run(tmp_path, {"hang.log": NOISE + GDB})
    assert len(a.tables.stacks) >= 1


def test_words_of_a_dump_in_prose_are_no_dump(tmp_path):
    a = _run(tmp_path, {"job.log": "Thread 5 started for prefetching\nMem: plenty\n(see NVIDIA-SMI docs)\nstep 1 loss 0.3\n"})
    assert a.tables.stacks.empty and a.tables.gpu.empty


# ---- 12. a C++ allocation failure is host memory running out (hedged below the kernel's own OOM line)

@pytest.mark.parametrize("text", [
    "step 10 loss 0.2\nterminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc\n"
    "Aborted (core dumped)\n",
    "[rank3]: RuntimeError: std::bad_alloc\n",
    "0: what():  std::bad_alloc\nsrun: error: node3: task 0: Aborted (core dumped)\n",
])
def test_bad_alloc_is_host_memory(tmp_path, text):
    a = _run(tmp_path, {"job.log": text})
    assert a.verdict.category == "host_oom" and a.verdict.confidence < 0.8


def test_bad_alloc_named_in_prose_is_not_an_oom(tmp_path):
    a = _run(tmp_path, {"job.log": "INFO catching bad_alloc in the allocator test suite passed\nTraining completed.\n"})
    assert a.verdict.category == "no_failure"

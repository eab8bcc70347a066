"""Writes logs/train.log for the CONSTRUCTED sample sampling_oom_step2000 (seed 001). No GPU was available, so
nothing here ran: the text is generated from the seed's facts and the line shapes in shared/FORMATS.md
(§3.1 OOM, §2.3 NCCL watchdog, §2.8 [rankN]: excepthook prefix, §4.1/4.2 torchrun agent lines and summary,
§9.1 tqdm). Deterministic: re-running writes the same bytes."""
from __future__ import annotations

import os
import random
from datetime import datetime, timedelta

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = "/share_data/zhukefei/checkpoints/libero_finetune_single_task_full"
ENV = "/home/zhukefei/miniconda3/envs/rdt/lib/python3.10/site-packages"
REPO = "/home/zhukefei/RoboticsDiffusionTransformer"
HOST = "gpu-a800-node07"
WORLD = 8
OOM_RANK = 3
T0 = datetime(2025, 6, 12, 9, 12, 3)
SEC_PER_IT = 2.5
MAX_STEPS = 100000
PIDS = [1857217 + r for r in range(WORLD)]
AGENT_PID = 1857104
SEQ = 321937                       # the collective the other ranks wait in (sample-metrics all_reduce)


def acc(ts: datetime, name: str, msg: str) -> str:
    """accelerate.logging / python logging line as the diffusers-style trainers print it."""
    return f"{ts:%m/%d/%Y %H:%M:%S} - INFO - {name} - {msg}\n"


def hms(seconds: float) -> str:
    """tqdm's format_interval: MM:SS, or H:MM:SS once there are hours."""
    s = int(seconds)
    h, m, sec = s // 3600, s % 3600 // 60, s % 60
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


def bar(step: int, loss: float) -> str:
    """One tqdm update as written to a non-TTY stderr (10-char bar, leading \\r, no newline)."""
    pct = step * 100 // MAX_STEPS
    frac = step / MAX_STEPS * 10
    full = int(frac)
    parts = " ▏▎▍▌▋▊▉"
    partial = parts[int((frac - full) * 8)] if full < 10 else ""
    body = ("█" * full + partial).ljust(10)
    el, rem = hms(step * SEC_PER_IT), hms((MAX_STEPS - step) * SEC_PER_IT)
    return f"\rSteps: {pct:3d}%|{body}| {step}/{MAX_STEPS} [{el}<{rem}, {SEC_PER_IT:5.2f}s/it, loss={loss:.4g}, lr=0.0001]"


def c10(ts: datetime, rank: int, lvl: str, line: int, msg: str) -> str:
    ns = 412312571 + rank * 1117
    return f"[rank{rank}]:[{lvl}{ts:%m%d %H:%M:%S}.{ns:09d} ProcessGroupNCCL.cpp:{line}] {msg}\n"


def main() -> None:
    rnd = random.Random(1)
    out: list[str] = []
    w = out.append
    w("The following values were not passed to `accelerate launch` and had defaults used instead:\n")
    w("\t`--num_machines` was set to a value of `1`\n")
    w("\t`--dynamo_backend` was set to a value of `'no'`\n")
    w("To avoid this warning pass in values for each of the problematic parameters or run `accelerate config`.\n")
    for r in range(WORLD):
        w(acc(T0, "__main__", "Distributed environment: MULTI_GPU  Backend: nccl"))
        w(f"Num processes: {WORLD}\nProcess index: {r}\nLocal process index: {r}\nDevice: cuda:{r}\n\n"
          "Mixed precision type: bf16\n\n")
    t = T0 + timedelta(seconds=2)
    w(acc(t, "__main__", "Training config: pretrained_model_name_or_path=checkpoints/rdt-1b, "
          f"output_dir={OUT_DIR}, train_batch_size=16, sample_batch_size=64, gradient_accumulation_steps=2, "
          "max_train_steps=100000, checkpointing_period=2000, checkpoints_total_limit=30, sample_period=500, "
          "num_sample_batches=2, lr_scheduler=constant, learning_rate=0.0001, lr_warmup_steps=5000, "
          "mixed_precision=bf16, dataloader_num_workers=8, dataset_type=finetune, state_noise_snr=40, "
          "load_from_hdf5=True, report_to=wandb"))
    w(acc(t, "__main__", "***** Running training *****"))
    for k, v in [("Num examples", 15420), ("Num batches each epoch", 121), ("Num Epochs", 1653),
                 ("Instantaneous batch size per device", 16),
                 ("Total train batch size (w. parallel, distributed & accumulation)", 256),
                 ("Gradient Accumulation steps", 2), ("Total optimization steps", MAX_STEPS)]:
        w(acc(t, "__main__", f"  {k} = {v}"))
    line = ""
    loss = 0.19
    for step in range(25, 2001, 25):
        loss = max(0.004, loss * 0.965 + rnd.uniform(-0.004, 0.004))
        line += bar(step, loss)
        ts = T0 + timedelta(seconds=8 + step * SEC_PER_IT)
        if step % 500 == 0 and step != 2000:
            # a logger line lands on the same physical line as the last bar update
            w(line + acc(ts, "__main__", f"Generating samples at step {step} (sample_batch_size=64, "
                                         "num_sample_batches=2)"))
            line = ""
            w(acc(ts + timedelta(seconds=41), "__main__",
                  f"{{'overall_avg_sample_mse': {rnd.uniform(0.002, 0.02):.6f}, "
                  f"'overall_avg_sample_l2err': {rnd.uniform(0.05, 0.2):.6f}}}"))
    ts = T0 + timedelta(seconds=8 + 2000 * SEC_PER_IT)
    w(line + acc(ts, "accelerate.accelerator", f"Saving current state to {OUT_DIR}/checkpoint-2000"))
    w(acc(ts + timedelta(seconds=38), "accelerate.checkpointing",
          f"Model weights saved in {OUT_DIR}/checkpoint-2000/model.safetensors"))
    w(acc(ts + timedelta(seconds=61), "__main__", f"Saved state to {OUT_DIR}/checkpoint-2000"))
    t_sample = ts + timedelta(seconds=62)
    w(acc(t_sample, "__main__", "Generating samples at step 2000 (sample_batch_size=64, num_sample_batches=2)"))
    # rank 3 runs out of memory in the sampling forward pass
    frames = [
        (f"{REPO}/main.py", 340, "<module>", "train(args, logger)"),
        (f"{REPO}/train/train.py", 489, "train", "sample_loss_for_log = log_sample_res("),
        (f"{ENV}/torch/utils/_contextlib.py", 116, "decorate_context", "return func(*args, **kwargs)"),
        (f"{REPO}/train/sample.py", 63, "log_sample_res", "pred_actions = rdt.predict_action("),
        (f"{REPO}/models/rdt_runner.py", 219, "predict_action", "action_pred = self.conditional_sample("),
        (f"{REPO}/models/rdt_runner.py", 160, "conditional_sample",
         "model_output = self.model(state_action_traj, ctx,"),
        (f"{ENV}/torch/nn/modules/module.py", 1736, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
        (f"{ENV}/torch/nn/modules/module.py", 1747, "_call_impl", "return forward_call(*args, **kwargs)"),
        (f"{REPO}/models/rdt/model.py", 231, "forward", "x = block(x, c, mask)"),
        (f"{ENV}/torch/nn/modules/module.py", 1736, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
        (f"{ENV}/torch/nn/modules/module.py", 1747, "_call_impl", "return forward_call(*args, **kwargs)"),
        (f"{REPO}/models/rdt/blocks.py", 244, "forward", "x = x + self.cross_attn(self.norm2(x), c, mask)"),
        (f"{ENV}/torch/nn/modules/module.py", 1736, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
        (f"{ENV}/torch/nn/modules/module.py", 1747, "_call_impl", "return forward_call(*args, **kwargs)"),
        (f"{REPO}/models/rdt/blocks.py", 120, "forward", "attn = q @ k.transpose(-2, -1)"),
    ]
    p = f"[rank{OOM_RANK}]: "
    tb = [p + "Traceback (most recent call last):\n"]
    for f, ln, fn, src in frames:
        tb.append(f'{p}  File "{f}", line {ln}, in {fn}\n{p}    {src}\n')
    tb.append(p + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.50 GiB. GPU 3 has a total "
              "capacity of 79.15 GiB of which 2.81 GiB is free. Including non-PyTorch memory, this process has "
              "76.33 GiB memory in use. Of the allocated memory 71.92 GiB is allocated by PyTorch, and 3.95 GiB is "
              "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
              "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
              "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)\n")
    w("".join(tb))
    # rank 3's process does not exit (stuck tearing down its 8 DataLoader workers / NCCL communicator), so
    # torchrun does not notice; the other seven ranks wait in the sample-metrics all_reduce until the
    # 10-minute NCCL watchdog fires.
    t_to = t_sample + timedelta(seconds=14 + 600)
    order = [6, 0, 5, 2, 7, 1, 4]
    for i, r in enumerate(order):
        ts = t_to + timedelta(milliseconds=37 * i)
        work = (f"WorkNCCL(SeqNum={SEQ}, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for "
                f"{600043 + 7 * i} milliseconds before timing out.")
        pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {r}]"
        w(c10(ts, r, "E", 616, f"[Rank {r}] Watchdog caught collective operation timeout: {work}"))
        w(c10(ts, r, "E", 1785, f"{pg} Exception (either an error or timeout) detected by watchdog at work: {SEQ}, "
                                f"last enqueued NCCL work: {SEQ}, last completed NCCL work: {SEQ - 1}."))
        w(c10(ts, r, "E", 1834, f"{pg} Timeout at NCCL work: {SEQ}, last enqueued NCCL work: {SEQ}, "
                                f"last completed NCCL work: {SEQ - 1}."))
        w(c10(ts, r, "E", 630, f"[Rank {r}] Some NCCL operations have failed or timed out. Due to the asynchronous "
                               "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete "
                               "data."))
        w(c10(ts, r, "E", 636, f"[Rank {r}] To avoid data inconsistency, we are taking the entire process down."))
        w(c10(ts, r, "E", 1595, f"{pg} Process group watchdog thread terminated with exception: [Rank {r}] "
                                f"Watchdog caught collective operation timeout: {work}"))
        w("Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:618 "
          "(most recent call first):\n")
        w(f"frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f3a5e96c446 in "
          f"{ENV}/torch/lib/libc10.so)\n")
        w("terminate called after throwing an instance of 'c10::DistBackendError'\n")
        w(f"  what():  {pg} Process group watchdog thread terminated with exception: [Rank {r}] Watchdog caught "
          f"collective operation timeout: {work}\n")
    t_end = t_to + timedelta(seconds=2)
    agent = f"{AGENT_PID} torch/distributed/elastic/multiprocessing/api.py"
    w(f"W{t_end:%m%d %H:%M:%S}.512000 {agent}:897] Sending process {PIDS[OOM_RANK]} closing signal SIGTERM\n")
    w(f"E{t_end:%m%d %H:%M:%S}.871000 {agent}:869] failed (exitcode: -6) local_rank: 6 (pid: {PIDS[6]}) of "
      f"binary: /home/zhukefei/miniconda3/envs/rdt/bin/python\n")
    w("Traceback (most recent call last):\n")
    for f, ln, fn, src in [
        ("/home/zhukefei/miniconda3/envs/rdt/bin/accelerate", 8, "<module>", "sys.exit(main())"),
        (f"{ENV}/accelerate/commands/accelerate_cli.py", 48, "main", "args.func(args)"),
        (f"{ENV}/accelerate/commands/launch.py", 1159, "launch_command", "multi_gpu_launcher(args)"),
        (f"{ENV}/accelerate/commands/launch.py", 793, "multi_gpu_launcher", "distrib_run.run(args)"),
        (f"{ENV}/torch/distributed/run.py", 910, "run", "elastic_launch("),
        (f"{ENV}/torch/distributed/launcher/api.py", 138, "__call__",
         "return launch_agent(self._config, self._entrypoint, list(args))"),
        (f"{ENV}/torch/distributed/launcher/api.py", 269, "launch_agent", "raise ChildFailedError("),
    ]:
        w(f'  File "{f}", line {ln}, in {fn}\n    {src}\n')
    w("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n")
    w("=" * 60 + "\nmain.py FAILED\n" + "-" * 60 + "\nFailures:\n")
    tstr = f"{t_end:%Y-%m-%d_%H:%M:%S}"
    idx = 1
    for r in [0, 1, 2, 3, 4, 5, 7]:
        w(f"[{idx}]:\n  time      : {tstr}\n  host      : {HOST}\n  rank      : {r} (local_rank: {r})\n")
        if r == OOM_RANK:
            w(f"  exitcode  : -15 (pid: {PIDS[r]})  (SIGTERM)\n  error_file: <N/A>\n"
              f"  traceback : Signal 15 (SIGTERM) received by PID {PIDS[r]}\n")
        else:
            w(f"  exitcode  : -6 (pid: {PIDS[r]})  (SIGABRT)\n  error_file: <N/A>\n"
              f"  traceback : Signal 6 (SIGABRT) received by PID {PIDS[r]}\n")
        idx += 1
    w("-" * 60 + "\nRoot Cause (first observed failure):\n[0]:\n")
    w(f"  time      : {tstr}\n  host      : {HOST}\n  rank      : 6 (local_rank: 6)\n"
      f"  exitcode  : -6 (pid: {PIDS[6]})  (SIGABRT)\n  error_file: <N/A>\n"
      f"  traceback : Signal 6 (SIGABRT) received by PID {PIDS[6]}\n" + "=" * 60 + "\n")
    os.makedirs(os.path.join(HERE, "logs"), exist_ok=True)
    with open(os.path.join(HERE, "logs", "train.log"), "w", encoding="utf-8", newline="") as f:
        f.write("".join(out))


if __name__ == "__main__":
    main()

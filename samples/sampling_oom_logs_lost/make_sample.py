"""Writes logs/ for the CONSTRUCTED sample sampling_oom_logs_lost (seed 001 as it really was: the workers'
logs were lost). Only what the seed says survived: rank 0's file logger in the output dir (config echo,
"Saved state to .../checkpoint-2000") and the launcher console with torchrun's summary (rank 3 exit code 1,
no traceback). Deterministic: re-running writes the same bytes."""
from __future__ import annotations

import os
from datetime import datetime, timedelta

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = "/share_data/zhukefei/checkpoints/libero_finetune_single_task_full"
ENV = "/home/zhukefei/miniconda3/envs/rdt/lib/python3.10/site-packages"
HOST = "gpu-a800-node07"
T0 = datetime(2025, 6, 12, 9, 12, 3)
PIDS = [1857217 + r for r in range(8)]
AGENT_PID = 1857104
FAILED = 3


def info(ts: datetime, name: str, msg: str) -> str:
    return f"{ts:%m/%d/%Y %H:%M:%S} - INFO - {name} - {msg}\n"


def rank0_log() -> str:
    """output_dir/log.txt: a logging.FileHandler on the main process only."""
    t = T0 + timedelta(seconds=2)
    lines = [info(T0, "__main__", "Distributed environment: MULTI_GPU  Backend: nccl"),
             "Num processes: 8\nProcess index: 0\nLocal process index: 0\nDevice: cuda:0\n\n"
             "Mixed precision type: bf16\n\n",
             info(t, "__main__", "Training config: pretrained_model_name_or_path=checkpoints/rdt-1b, "
                  f"output_dir={OUT_DIR}, train_batch_size=16, sample_batch_size=64, gradient_accumulation_steps=2, "
                  "max_train_steps=100000, checkpointing_period=2000, checkpoints_total_limit=30, sample_period=500, "
                  "num_sample_batches=2, lr_scheduler=constant, learning_rate=0.0001, lr_warmup_steps=5000, "
                  "mixed_precision=bf16, dataloader_num_workers=8, dataset_type=finetune, state_noise_snr=40, "
                  "load_from_hdf5=True, report_to=wandb"),
             info(t, "__main__", "***** Running training *****")]
    for k, v in [("Num examples", 15420), ("Num batches each epoch", 121), ("Num Epochs", 1653),
                 ("Instantaneous batch size per device", 16),
                 ("Total train batch size (w. parallel, distributed & accumulation)", 256),
                 ("Gradient Accumulation steps", 2), ("Total optimization steps", 100000)]:
        lines.append(info(t, "__main__", f"  {k} = {v}"))
    ts = T0 + timedelta(seconds=8 + 2000 * 2.5)
    lines.append(info(ts, "accelerate.accelerator", f"Saving current state to {OUT_DIR}/checkpoint-2000"))
    lines.append(info(ts + timedelta(seconds=38), "accelerate.checkpointing",
                      f"Model weights saved in {OUT_DIR}/checkpoint-2000/model.safetensors"))
    lines.append(info(ts + timedelta(seconds=61), "__main__", f"Saved state to {OUT_DIR}/checkpoint-2000"))
    return "".join(lines)


def launcher_console() -> str:
    """The accelerate launch console: worker output went to per-rank files on node-local disk (lost)."""
    t_fail = T0 + timedelta(seconds=8 + 2000 * 2.5 + 64)
    t_end = t_fail + timedelta(seconds=1)
    agent = f"{AGENT_PID} torch/distributed/elastic/multiprocessing/api.py"
    out = ["The following values were not passed to `accelerate launch` and had defaults used instead:\n",
           "\t`--num_machines` was set to a value of `1`\n",
           "\t`--dynamo_backend` was set to a value of `'no'`\n",
           "To avoid this warning pass in values for each of the problematic parameters or run "
           "`accelerate config`.\n"]
    for r in range(8):
        if r != FAILED:
            out.append(f"W{t_fail:%m%d %H:%M:%S}.{214000 + r * 1000:06d} {agent}:897] Sending process {PIDS[r]} "
                       "closing signal SIGTERM\n")
    out.append(f"E{t_end:%m%d %H:%M:%S}.027000 {agent}:869] failed (exitcode: 1) local_rank: {FAILED} "
               f"(pid: {PIDS[FAILED]}) of binary: /home/zhukefei/miniconda3/envs/rdt/bin/python\n")
    out.append("Traceback (most recent call last):\n")
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
        out.append(f'  File "{f}", line {ln}, in {fn}\n    {src}\n')
    out.append("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n")
    out.append("=" * 60 + "\nmain.py FAILED\n" + "-" * 60 + "\nFailures:\n")
    idx = 1
    for r in range(8):
        if r == FAILED:
            continue
        out.append(f"[{idx}]:\n  time      : {t_end:%Y-%m-%d_%H:%M:%S}\n  host      : {HOST}\n"
                   f"  rank      : {r} (local_rank: {r})\n  exitcode  : -15 (pid: {PIDS[r]})  (SIGTERM)\n"
                   f"  error_file: <N/A>\n  traceback : Signal 15 (SIGTERM) received by PID {PIDS[r]}\n")
        idx += 1
    out.append("-" * 60 + "\nRoot Cause (first observed failure):\n[0]:\n")
    out.append(f"  time      : {t_fail:%Y-%m-%d_%H:%M:%S}\n  host      : {HOST}\n"
               f"  rank      : {FAILED} (local_rank: {FAILED})\n  exitcode  : 1 (pid: {PIDS[FAILED]}) \n"
               "  error_file: <N/A>\n"
               "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
               + "=" * 60 + "\n")
    return "".join(out)


def main() -> None:
    os.makedirs(os.path.join(HERE, "logs"), exist_ok=True)
    for name, text in [("log.txt", rank0_log()), ("launch_console.txt", launcher_console())]:
        with open(os.path.join(HERE, "logs", name), "w", encoding="utf-8", newline="") as f:
            f.write(text)


if __name__ == "__main__":
    main()

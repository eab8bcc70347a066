"""Every mechanism the lab runs, with its launchers (rotated so each launcher meets every category)."""
from __future__ import annotations

from mechs import GENERIC, Mech

HANG = {"pg_timeouts": [20, 25, 30, 40]}


def rot(k: int, n: int = 4) -> list[str]:
    """n launchers for the k-th mechanism, rotating through the generic launchers."""
    return [GENERIC[(k * n + j) % len(GENERIC)] for j in range(n)]


_M = [
    # ---- rank_crash ----
    dict(name="keyerror-bad-record", script="keyerror_bad_record.py", cls="rank_crash", categories=("rank_crash",),
         check="exception", exc="KeyError",
         root="One record in rank {c}'s shard lacks the 'label' key; the collate function indexes it at step {step} "
              "and rank {c} dies of KeyError; ranks {others} wait in DDP's gradient all_reduce and fail on the closed "
              "connection or are terminated by the launcher."),
    dict(name="target-out-of-bounds", script="target_out_of_bounds.py", cls="rank_crash", categories=("rank_crash",),
         check="exception", exc="IndexError",
         root="Rank {c}'s shard was labelled with a newer label map: at step {step} a class id of 5 reaches "
              "cross_entropy over 4 classes and rank {c} raises IndexError (Target 5 is out of bounds); ranks "
              "{others} are left in the gradient all_reduce."),
    dict(name="valueerror-rank-branch", script="valueerror_rank_branch.py", cls="rank_crash",
         categories=("rank_crash",), check="exception", exc="ValueError",
         root="Only rank {c} keeps per-class metric stats (a rank-conditional branch); at step {step} the batch's "
              "stats are one column wider and np.concatenate raises ValueError on rank {c}; ranks {others} wait in "
              "the next all_reduce."),
    dict(name="os-exit", script="os_exit.py", cls="rank_crash", categories=("rank_crash",), check="silent",
         steps=(4, 12),
         root="Rank {c}'s shard fetcher fails three times at step {step} (it logs the retries) and calls os._exit(1): "
              "exit code 1 and no traceback; ranks {others} fail in all_reduce or are terminated."),
    dict(name="segfault-ctypes", script="segfault_ctypes.py", cls="rank_crash", categories=("rank_crash",),
         check="silent",
         extra=lambda rng, ws, l: {"faulthandler": rng.random() < 0.5},
         root="Rank {c}'s native tokenizer path reads through a dangling pointer (ctypes.string_at(16)) at step {step}: "
              "SIGSEGV (faulthandler on: {p[faulthandler]}); ranks {others} fail in all_reduce or are terminated."),
    dict(name="abort", script="abort_native.py", cls="rank_crash", categories=("rank_crash",), check="silent",
         extra=lambda rng, ws, l: {"faulthandler": rng.random() < 0.5},
         root="An invariant check in rank {c}'s sequence packing fails at step {step} and calls os.abort(): SIGABRT, "
              "no Python traceback (faulthandler on: {p[faulthandler]}); ranks {others} fail in all_reduce or are "
              "terminated."),
    # ---- host_oom ----
    dict(name="watchdog-sigkill", script="leaky_buffer.py", cls="host_oom", categories=("host_oom", "rank_crash"),
         check="oomkill", steps=(3, 6), params={"watchdog_mb": 900},
         root="From step {step} rank {c} keeps 64 MB of augmented views per step in a replay buffer; a memory "
              "watchdog (standing in for the kernel OOM killer / a k8s memory limit) SIGKILLs it at 900 MB RSS: exit "
              "-9, no traceback; ranks {others} fail in all_reduce or are terminated."),
    dict(name="numpy-memoryerror", script="numpy_memoryerror.py", cls="host_oom",
         categories=("host_oom", "rank_crash"), check="exception", exc="MemoryError", steps=(4, 12),  # type(e).__name__ of _ArrayMemoryError
         extra=lambda rng, ws, l: {"step": rng.choice([4, 6, 8, 10, 12])},
         root="At step {step} rank {c}'s eval labels hold an unset value (the sentinel 0xFFFFF); its confusion matrix is sized "
              "from the data and numpy raises _ArrayMemoryError (Unable to allocate ... for an array with shape "
              "(1048576, 1048576) ...); ranks {others} wait in the next all_reduce."),
    dict(name="torch-alloc-fail", script="torch_alloc_fail.py", cls="host_oom", categories=("host_oom", "rank_crash"),
         check="exception", exc="RuntimeError", extra=lambda rng, ws, l: {"rlimit": rng.random() < 0.5},
         root="At step {step} rank {c} allocates an attention cache sized from a corrupt document length (RLIMIT_AS "
              "cap on that rank: {p[rlimit]}) and torch raises RuntimeError: DefaultCPUAllocator: can't allocate "
              "memory; ranks {others} wait in the gradient all_reduce."),
    # ---- dataloader_failure ----
    dict(name="dl-worker-raises", script="dl_worker_raises.py", cls="dataloader_failure",
         categories=("dataloader_failure", "rank_crash"), check="exception", exc="FileNotFoundError",
         root="A DataLoader worker of rank {c} opens a missing shard file for a sample of step {step} "
              "(FileNotFoundError in __getitem__); rank {c}'s main process re-raises it ('Caught FileNotFoundError in "
              "DataLoader worker process N'); ranks {others} wait in all_reduce."),
    dict(name="dl-worker-oomkill", script="dl_worker_oomkill.py", cls="dataloader_failure",
         categories=("dataloader_failure", "host_oom"), check="workerkill", steps=(3, 6), params={"watchdog_mb": 600},
         root="A DataLoader worker of rank {c} caches 8 MB of decoded frames per sample from step {step}; the memory "
              "watchdog SIGKILLs the worker at 600 MB RSS and rank {c} raises 'DataLoader worker (pid N) is killed by "
              "signal: Killed.'; ranks {others} wait in all_reduce."),
    dict(name="dl-worker-segfault", script="dl_worker_segfault.py", cls="dataloader_failure",
         categories=("dataloader_failure",), check="exception", exc="RuntimeError", needs_fault=True,
         root="A DataLoader worker of rank {c} segfaults in a native decoder (dangling pointer, ctypes.string_at) on a sample of "
              "step {step}; rank {c} raises 'DataLoader worker (pid(s) N) exited unexpectedly' after 'killed by "
              "signal: Segmentation fault.'; ranks {others} wait in all_reduce."),
    dict(name="dl-worker-timeout", script="dl_worker_timeout.py", cls="dataloader_failure",
         categories=("dataloader_failure",), check="exception", exc="RuntimeError", needs_fault=True,
         extra=lambda rng, ws, l: {"dl_timeout": rng.choice([5, 8])},
         root="From step {step} the DataLoader worker of rank {c} blocks opening a named pipe that nobody writes; "
              "DataLoader(timeout={p[dl_timeout]}) raises 'DataLoader timed out after {p[dl_timeout]} seconds' on "
              "rank {c}; ranks {others} wait in all_reduce."),
    # ---- barrier_skew ----
    dict(name="uneven-shards", script="uneven_shards.py", cls="barrier_skew", categories=("barrier_skew",),
         check="hang", steps=(5, 10), params=HANG,
         root="Rank {c}'s contiguous shard holds {step} batches, the others {p[steps]}: rank {c} finishes the epoch "
              "and enters the final dist.barrier() while ranks {others} are in the next step's DDP gradient "
              "all_reduce; nothing pairs and every rank times out after {p[pg_timeout]} s."),
    dict(name="rank0-only-barrier", script="rank0_only_barrier.py", cls="barrier_skew", categories=("barrier_skew",),
         check="failed", culprit="zero",
         root="After training only rank 0 calls save_checkpoint(), which ends in dist.barrier(); it pairs with the "
              "final barrier of ranks {others}, which exit, and rank 0 is left alone in its own final barrier "
              "(closed connection or timeout)."),
    dict(name="skip-empty-batch", script="skip_empty_batch.py", cls="barrier_skew", categories=("barrier_skew",),
         check="hang", params=HANG,
         root="At step {step} every sample of rank {c}'s batch is longer than MAX_LEN, the filter empties it and rank "
              "{c} continues past the gradient all_reduce; its all_reduces are one behind from then on, and at the end "
              "it waits in the final barrier while ranks {others} wait in their last all_reduce until the timeout."),
    dict(name="early-stop-unsynced", script="early_stop_unsynced.py", cls="barrier_skew",
         categories=("barrier_skew",), check="failed", steps=(3, 6), params=HANG,
         root="Early stopping is decided on each rank's own validation loss; rank {c}'s stops improving after epoch "
              "{step}, it stops alone and enters the final barrier while ranks {others} train on in DDP all_reduce."),
    dict(name="rank0-only-allgather", script="rank0_only_allgather.py", cls="barrier_skew",
         categories=("barrier_skew",), check="failed", culprit="zero", params=HANG,
         root="At step {step} rank 0 alone runs evaluate(), which all_gathers predictions from every rank; ranks "
              "{others} are in the next step's gradient all_reduce, the collectives do not pair."),
    # at least 3 ranks: with two, each rank sits in the other's branch and no log says which one took it (the
    # product hedges there: tests/fixtures/mirror holds such a run); the lab measures culprits that can be named
    dict(name="broadcast-vs-allreduce", script="broadcast_vs_allreduce.py", cls="barrier_skew",
         categories=("barrier_skew",), check="failed", params=HANG, ws=(3, 3, 4, 4, 5, 6, 8),
         root="At step {step} rank {c} takes the 'I hold the EMA weights' branch and broadcasts them while ranks "
              "{others} all_reduce their metrics; the collectives do not match."),
    # ---- straggler ----
    dict(name="slow-data-prep", script="slow_data_prep.py", cls="straggler", categories=("straggler",), check="hang",
         params={**HANG, "fr_before_steps": True},
         root="main_process_first-style preprocessing: rank {c} tokenizes the corpus (pure CPU, no collective) for "
              "about 1.6 x the {p[pg_timeout]} s timeout while ranks {others} wait in dist.barrier() and time out."),
    dict(name="long-eval", script="long_eval.py", cls="straggler", categories=("straggler",), check="hang",
         params=HANG,
         root="At step {step} rank {c} evaluates its large local validation shard (no collective) for about 1.6 x "
              "the {p[pg_timeout]} s timeout; ranks {others} are in the next step's gradient all_reduce and time "
              "out."),
    dict(name="slow-ckpt-write", script="slow_ckpt_write.py", cls="straggler", categories=("straggler",),
         check="hang", culprit="zero", params=HANG,
         root="At step {step} rank 0 saves a ~1.1 MB checkpoint through a throttled stream (~40 KB/s) with no barrier "
              "around it; ranks {others} go on to the next step's gradient all_reduce and time out."),
    dict(name="queue-dead-producer", script="queue_dead_producer.py", cls="straggler",
         categories=("straggler", "dataloader_failure"), check="hang", params=HANG,
         root="Rank {c}'s prefetch thread dies on an undecodable line (UnicodeDecodeError, printed by "
              "threading.excepthook as 'Exception in thread prefetch') around step {step}; rank {c}'s main thread "
              "waits in queue.get() with no timeout and ranks {others} time out in all_reduce."),
    dict(name="fifo-block", script="fifo_block.py", cls="straggler", categories=("straggler",), check="hang",
         params=HANG,
         root="At step {step} rank {c} polls its control pipe; opening the FIFO for reading blocks because no "
              "writer ever opens it; ranks {others} time out in the next all_reduce."),
    # ---- logging_blocking ----
    dict(name="stdout-pipe-full", script="stdout_pipe_full.py", cls="logging_blocking",
         categories=("logging_blocking",), check="hang", steps=(2, 5), params=HANG,
         extra=lambda rng, ws, l: {"culprit": rng.choice([0, 0, rng.randrange(ws)])},
         root="Rank {c} dup2()s its stdout onto the stdin pipe of a log shipper and prints a per-layer report every "
              "step; the shipper stalls retrying an upload endpoint that is down, the 64 KB pipe fills and rank {c} "
              "blocks in print() (write to a full pipe); ranks {others} time out in all_reduce."),
    dict(name="blocking-log-handler", script="blocking_log_handler.py", cls="logging_blocking",
         categories=("logging_blocking",), check="hang", params=HANG,
         extra=lambda rng, ws, l: {"culprit": rng.choice([0, rng.randrange(ws)])},
         root="At step {step} rank {c}'s metrics-uploader thread takes its logging handler's lock and waits for an "
              "acknowledgement that never comes (socket recv, no timeout); rank {c}'s next log call blocks on the "
              "handler lock and ranks {others} time out in all_reduce."),
    # ---- checkpoint_corruption ----
    dict(name="ckpt-read-while-write", script="ckpt_read_while_write.py", cls="checkpoint_corruption",
         categories=("checkpoint_corruption",), check="exception", exc="RuntimeError", culprit="nonzero",
         needs_fault=True,
         root="At step {step} rank 0 rewrites shared.pt in chunks (slow mount, no barrier) while rank {c} refreshes "
              "its EMA copy from it; torch.load on rank {c} fails (PytorchStreamReader failed reading zip archive); "
              "the other ranks wait in all_reduce."),
    dict(name="truncated-resume", script="truncated_resume.py", cls="checkpoint_corruption",
         categories=("checkpoint_corruption",), check="alike", exc="RuntimeError", culprit="none",
         prepare="prep_truncated_ckpt.py",
         root="The previous run's writer was SIGKILLed while torch.save() streamed ckpt/last.pt; this run resumes and "
              "torch.load of the truncated file raises on every rank alike (PytorchStreamReader ... central "
              "directory)."),
    dict(name="truncated-resume-rank0", script="truncated_resume.py", cls="checkpoint_corruption",
         categories=("checkpoint_corruption",), check="exception", exc="RuntimeError", culprit="zero",
         prepare="prep_truncated_ckpt.py", params={"rank0_loads": True}, needs_fault=True,
         root="The previous run's writer was SIGKILLed mid torch.save(); this run's rank 0 loads ckpt/last.pt to "
              "broadcast the start step and raises (PytorchStreamReader); ranks {others} wait in the broadcast."),
    dict(name="incomplete-ckpt-dir", script="incomplete_ckpt_dir.py", cls="checkpoint_corruption",
         categories=("checkpoint_corruption", "rank_crash"), check="exception", exc="FileNotFoundError",
         prepare="prep_incomplete_ckpt.py", needs_fault=True,
         root="The newest checkpoint directory (step_300) is incomplete: rank {c}'s process died before writing its "
              "optimizer shard. On resume rank {c} raises FileNotFoundError for optim_rank{c}.pt; ranks {others} "
              "wait in DDP's construction broadcast or all_reduce."),
    # ---- nan_inf ----
    dict(name="nan-check-raises", script="nan_check_raises.py", cls="nan_inf", categories=("nan_inf",),
         check="exception", exc="FloatingPointError",
         root="At step {step} rank {c}'s batch is normalized by a zero std (inf features), the loss is NaN and the "
              "loop's finite check raises FloatingPointError on rank {c}; ranks {others} wait in all_reduce."),
    dict(name="nan-skip-desync", script="nan_skip_desync.py", cls="nan_inf", categories=("nan_inf", "barrier_skew"),
         check="hang", params=HANG,
         root="At step {step} rank {c}'s batch holds a NaN, the loss is NaN and rank {c} skips the step (no gradient "
              "all_reduce, it logs a warning); its collectives are one behind, and at the end it waits in the final "
              "barrier while ranks {others} wait in all_reduce until the timeout."),
    dict(name="anomaly-detect", script="anomaly_detect.py", cls="nan_inf", categories=("nan_inf",),
         check="exception", exc="RuntimeError",
         root="Autograd anomaly detection is on; at step {step} rank {c}'s variance estimate goes negative, sqrt "
              "makes NaN and backward raises RuntimeError: Function 'SqrtBackward0' returned nan values in its 0th "
              "output; ranks {others} wait in all_reduce."),
    dict(name="loss-scale-collapse", script="loss_scale_collapse.py", cls="nan_inf", categories=("nan_inf",),
         check="alike", exc="FloatingPointError", culprit="none",
         root="From step {step} one rank's inputs carry a 3e38 outlier; the all_reduced gradients overflow on every "
              "rank at every step, the dynamic loss scaler halves down to its minimum and every rank raises "
              "FloatingPointError (Minimum loss scale reached) at the same step."),
    # ---- ddp_usage_error ----
    dict(name="ddp-unused-params", script="ddp_unused_params.py", cls="ddp_usage_error",
         categories=("ddp_usage_error",), check="alike", exc="RuntimeError", culprit="none",
         root="An auxiliary head is unused in forward() (aux_weight=0) and DDP runs with find_unused_parameters="
              "False: every rank raises 'Expected to have finished reduction in the prior iteration' at step 2."),
    dict(name="ddp-param-mismatch", script="ddp_param_mismatch.py", cls="ddp_usage_error",
         categories=("ddp_usage_error",), check="failed", ws=(3, 4),
         root="Rank {c} reads a regenerated tokenizer with one extra token, so its embedding has 1001 rows and the "
              "others 1000; DDP's parameter-shape check at construction fails."),
    dict(name="ddp-mark-ready-twice", script="ddp_mark_ready_twice.py", cls="ddp_usage_error",
         categories=("ddp_usage_error",), check="alike", exc="RuntimeError", culprit="none",
         root="Reentrant activation checkpointing runs one shared block twice under DDP(find_unused_parameters="
              "True): every rank raises 'Expected to mark a variable ready only once' in its first backward."),
    # ---- no_failure (near misses) ----
    dict(name="max-steps", script="max_steps_clean.py", cls="no_failure", categories=("no_failure",),
         check="clean", steps=(8, 14), min_nearmiss=1, nearmiss_kind="near-miss",
         root="Clean run that stops mid-epoch on purpose at max_steps={step}; every rank prints a FutureWarning and "
              "rank {c} logs a handled traceback for one corrupt sample that it skips."),
    dict(name="early-stopping", script="early_stopping_clean.py", cls="no_failure", categories=("no_failure",),
         check="clean", steps=(3, 6), min_nearmiss=1, nearmiss_kind="near-miss",
         root="The run ends on purpose: the all_reduced val_loss stops improving after epoch {step} and every rank "
              "stops together; benign lr_scheduler UserWarning on every rank."),
    dict(name="oom-probe-recover", script="oom_probe_recover.py", cls="no_failure", categories=("no_failure",),
         check="clean", min_nearmiss=2, nearmiss_kind="near-miss",
         root="A batch-size finder on every rank tries huge batches first, catches numpy's MemoryError and torch's "
              "'DefaultCPUAllocator: can't allocate memory', logs the tracebacks and halves; then it trains to the "
              "end normally."),
    dict(name="loss-scale-recovers", script="loss_scale_recovers.py", cls="no_failure", categories=("no_failure",),
         check="clean", min_nearmiss=2, nearmiss_kind="near-miss",
         root="The dynamic loss scale starts too high: the first steps overflow and are skipped ('gradient overflow "
              "detected, ignoring gradient, setting loss scale to'), then it settles and the run ends normally."),
    dict(name="store-retry-clean", script="store_retry_clean.py", cls="no_failure", categories=("no_failure",),
         check="clean", min_nearmiss=1, nearmiss_kind="near-miss",
         launchers=["slurm", "spawn", "torchrun-tee", "accelerate"],
         root="Rank 0 (the TCP store's host when the launcher does not run one) comes up 4-6 s late, so the other "
              "ranks may log failed store connections; rank {c} logs a handled FileNotFoundError traceback (no "
              "resume state); then a normal end."),
]

_FW = dict(ws=(2, 3, 3, 4), per_launcher=2)
# Lightning starts ranks 1.. as children that import lightning again: under load they reach the store 20-30 s after
# rank 0, and DDPStrategy(timeout) also bounds that wait
PL_T = {"pg_timeouts": [45, 60]}
_M += [
    dict(name="pl-keyerror-bad-record", script="pl_train.py", cls="rank_crash", categories=("rank_crash",),
         check="exception", exc="KeyError", launchers=["lightning"], params={"pl_mech": "keyerror", "extra_limit": 60, **PL_T},
         root="Lightning DDP on CPU: one record served to rank {c} at step {step} lacks 'label'; the dataset raises "
              "KeyError on rank {c}; ranks {others} wait in DDP's gradient all_reduce.", **_FW),
    dict(name="pl-watchdog-sigkill", script="pl_train.py", cls="host_oom", categories=("host_oom", "rank_crash"),
         check="oomkill", steps=(3, 6), launchers=["lightning"],
         params={"pl_mech": "watchdog", "watchdog_mb": 900, "extra_limit": 60, **PL_T},
         root="Lightning DDP on CPU: from step {step} rank {c}'s training_step keeps 64 MB per step in a buffer; the "
              "memory watchdog SIGKILLs it at 900 MB RSS (exit -9, no traceback); ranks {others} fail in all_reduce "
              "or are ended by Lightning.", **_FW),
    dict(name="pl-rank0-only-barrier", script="pl_train.py", cls="barrier_skew", categories=("barrier_skew",),
         check="failed", culprit="zero", launchers=["lightning"],
         params={"pl_mech": "rank0-barrier", "extra_limit": 60, **PL_T},
         root="Lightning DDP on CPU: in on_train_end only rank 0 saves and calls trainer.strategy.barrier(); ranks "
              "{others} have left fit() and exit, rank 0 waits alone in the barrier.", **_FW),
    dict(name="pl-long-step-metric", script="pl_train.py", cls="straggler", categories=("straggler",),
         check="hang", launchers=["lightning"], params={"pl_mech": "long-eval", "extra_limit": 60, **PL_T},
         root="Lightning DDP on CPU: at step {step} rank {c}'s training_step computes an exact metric over its "
              "history in pure Python for ~1.6 x the {p[pg_timeout]} s timeout; ranks {others} wait in the gradient "
              "all_reduce and time out.", **_FW),
    dict(name="pl-max-steps", script="pl_train.py", cls="no_failure", categories=("no_failure",), check="clean",
         steps=(6, 12), launchers=["lightning"], params={"pl_mech": "max-steps", "extra_limit": 60, **PL_T},
         nearmiss_kind="near-miss",
         root="Lightning DDP on CPU: a clean run that stops at max_steps={step} ('`Trainer.fit` stopped: "
              "`max_steps={step}` reached.').", **_FW),
    dict(name="pl-dl-worker-raises", script="pl_train.py", cls="dataloader_failure",
         categories=("dataloader_failure", "rank_crash"), check="exception", exc="FileNotFoundError",
         launchers=["lightning"], params={"pl_mech": "dl-raises", "extra_limit": 60, **PL_T},
         root="Lightning DDP on CPU: the DataLoader worker of rank {c} opens a feature file that was never written "
              "for a record of step {step} (FileNotFoundError in __getitem__); rank {c}'s main process re-raises it; "
              "ranks {others} wait in DDP's gradient all_reduce.", **_FW),
    dict(name="hf-keyerror-bad-record", script="hf_train.py", cls="rank_crash", categories=("rank_crash",),
         check="exception", exc="KeyError", launchers=["hf-trainer"],
         params={"hf_mech": "keyerror", "extra_limit": 60},
         root="HF Trainer (tiny GPT-2 from a config) under torchrun: a record served to rank {c} at step {step} has "
              "no input_ids (empty document) and __getitem__ raises KeyError on rank {c}; ranks {others} wait in "
              "all_reduce.", **_FW),
    dict(name="hf-long-step-metric", script="hf_train.py", cls="straggler", categories=("straggler",),
         check="hang", launchers=["hf-trainer"], params={"hf_mech": "long-eval", "extra_limit": 60, **HANG},
         root="HF Trainer (tiny GPT-2) under torchrun: at step {step} a callback on rank {c} computes a slow metric in "
              "pure Python for ~1.6 x the {p[pg_timeout]} s timeout; ranks {others} time out in the gradient "
              "all_reduce.", **_FW),
    dict(name="hf-dl-worker-raises", script="hf_train.py", cls="dataloader_failure",
         categories=("dataloader_failure", "rank_crash"), check="exception", exc="FileNotFoundError",
         launchers=["hf-trainer"], params={"hf_mech": "dl-raises", "extra_limit": 60},
         root="HF Trainer (tiny GPT-2) under torchrun, dataloader_num_workers=1: the DataLoader worker of rank {c} "
              "opens a pre-tokenized document file that is missing for a record of step {step} (FileNotFoundError); "
              "rank {c}'s main process re-raises it; ranks {others} wait in all_reduce.", **_FW),
    dict(name="hf-watchdog-sigkill", script="hf_train.py", cls="host_oom", categories=("host_oom", "rank_crash"),
         check="oomkill", steps=(3, 6), launchers=["hf-trainer"],
         params={"hf_mech": "watchdog", "watchdog_mb": 1300, "extra_limit": 60},
         root="HF Trainer (tiny GPT-2) under torchrun: from step {step} a callback on rank {c} keeps 64 MB of "
              "activation snapshots per step; the memory watchdog SIGKILLs it at 1300 MB RSS (exit -9, no "
              "traceback); ranks {others} fail in all_reduce or are terminated by torchrun.", **_FW),
    dict(name="hf-rank0-only-barrier", script="hf_train.py", cls="barrier_skew", categories=("barrier_skew",),
         check="failed", culprit="zero", launchers=["hf-trainer"],
         params={"hf_mech": "rank0-barrier", "extra_limit": 60, **HANG},
         root="HF Trainer (tiny GPT-2) under torchrun: a callback's on_train_end on rank 0 alone saves the model and "
              "calls dist.barrier(); ranks {others} return from train() and exit, rank 0 waits alone in the barrier.",
         **_FW),
    dict(name="hf-max-steps", script="hf_train.py", cls="no_failure", categories=("no_failure",), check="clean",
         steps=(6, 12), launchers=["hf-trainer"], params={"hf_mech": "max-steps", "extra_limit": 60},
         nearmiss_kind="near-miss",
         root="HF Trainer (tiny GPT-2) under torchrun: a clean run to max_steps={step}.", **_FW),
]

# ---- issue 31: the culprit's own evidence (who diverged first, what it said before it went); explicit launchers,
# four each, so a change to the rotation leaves them where they are
_M += [
    dict(name="log-then-exit", script="log_then_exit.py", cls="rank_crash", categories=("rank_crash",),
         check="exception", exc="SystemExit", needs_fault=True,
         launchers=["torchrun-tee", "spawn", "slurm", "jsonl"],
         root="At step {step} rank {c}'s data check finds an empty batch (a truncated shard file); it logs "
              "'ERROR ... data check failed: empty batch at step {step} (shard {c}); exiting' and calls sys.exit(1) "
              "(no traceback of its own); ranks {others} lose it in the next all_reduce or are terminated."),
    dict(name="collate-keyerror", script="collate_keyerror.py", cls="rank_crash",
         categories=("rank_crash", "dataloader_failure"), check="exception", exc="KeyError", needs_fault=True,
         launchers=["torchrun-console", "slurm", "accelerate", "jsonl"],
         root="One record of rank {c}'s shard has no 'label' (exported before the label join); the custom collate_fn, "
              "run in a DataLoader worker, raises KeyError for the batch of step {step} and rank {c}'s main process "
              "re-raises it ('Caught KeyError in DataLoader worker process N'); ranks {others} wait in all_reduce."),
    dict(name="getitem-keyerror", script="getitem_keyerror.py", cls="rank_crash",
         categories=("rank_crash", "dataloader_failure"), check="exception", exc="KeyError", needs_fault=True,
         launchers=["torchrun-tee", "spawn", "torchrun-redirects", "collect"],
         root="Rank {c}'s shard holds a token its vocabulary lacks (a newer tokenizer); Dataset.__getitem__ raises "
              "KeyError in a DataLoader worker for the batch of step {step} and rank {c} re-raises it ('Caught "
              "KeyError in DataLoader worker process N'); ranks {others} wait in all_reduce."),
    dict(name="monitored-barrier-slow", script="monitored_barrier_slow.py", cls="straggler",
         categories=("straggler",), check="hang", culprit="nonzero", params=HANG,
         extra=lambda rng, ws, l: {"epochs": 3, "epoch": rng.choice([1, 2])},
         launchers=["torchrun-tee", "slurm", "spawn", "torchrun-console"],
         root="Every epoch each rank cleans its own text shard, then dist.monitored_barrier(wait_all_ranks=True, "
              "timeout={p[pg_timeout]} s); in epoch {p[epoch]} rank {c}'s cleaning runs ~2.5 x the timeout, rank 0 "
              "raises 'Ranks {c} failed to pass monitoredBarrier' and ranks {others} fail after it."),
    dict(name="tqdm-eval-past-timeout", script="tqdm_eval_past_timeout.py", cls="straggler",
         categories=("straggler",), check="hang", params=HANG,
         launchers=["torchrun-tee", "slurm", "torchrun-redirects", "collect"],
         root="At step {step} rank {c} evaluates behind a tqdm bar ('Evaluating: ...% [elapsed<remaining]') for "
              "~2.5 x the {p[pg_timeout]} s timeout (no collective); ranks {others} time out in the gradient "
              "all_reduce while the bar's elapsed time passes the timeout."),
    dict(name="metrics-push-hang", script="metrics_push_hang.py", cls="logging_blocking",
         categories=("logging_blocking",), check="hang", params=HANG,
         launchers=["torchrun-tee", "slurm", "spawn", "jsonl"],
         root="Rank {c} pushes metrics every 2 steps with urllib.request.urlopen and no timeout; from step {step} the "
              "gateway accepts and never answers, rank {c} blocks in SocketIO.readinto under MetricsPusher.push and "
              "ranks {others} time out in all_reduce."),
    dict(name="nan-spreads-allreduce", script="nan_spreads_allreduce.py", cls="nan_inf", categories=("nan_inf",),
         check="failed", ws=(3, 3, 4, 4, 5), launchers=["jsonl", "torchrun-tee", "slurm", "spawn"],
         root="From step {step} rank {c}'s rows carry a feature in the wrong unit, its sigmoid saturates and its "
              "hand-written BCE is NaN at step {step}; DDP spreads the NaN gradients (the others log a NaN grad norm "
              "at {step}, NaN losses from the next step). At the end rank 0's np.histogram of the scores raises "
              "ValueError on the NaN range; the origin is rank {c}'s first non-finite loss."),
    dict(name="allgather-size-mismatch", script="allgather_size_mismatch.py", cls="barrier_skew",
         categories=("barrier_skew", "ddp_usage_error"), check="failed", ws=(3, 4, 4, 5),
         launchers=["torchrun-tee", "slurm", "torchrun-redirects", "spawn"],
         root="Rank {c} loads one more validation example than the others (it logs the count); at step {step} "
              "all_gather of per-example scores sized from each rank's own shard receives a longer tensor than a "
              "peer expects and that peer aborts in gloo ('op.preamble.length <= op.nbytes'); the rest fail after."),
    dict(name="subgroup-skip", script="subgroup_skip.py", cls="barrier_skew", categories=("barrier_skew",),
         check="hang", ws=(4, 4, 6), params=HANG, launchers=["torchrun-tee", "slurm", "spawn", "collect"],
         root="Ranks are paired in sub-groups for a head's gradients; at step {step} rank {c} logs that it skips the "
              "head loss and skips its pair's all_reduce: its partner waits in the pair's all_reduce, everyone else "
              "in the world all_reduce, until the {p[pg_timeout]} s timeout."),
]

# launchers some mechanisms ran under before the rotation took its present form: kept in the plan (--redo finds them)
EXTRA = {"uneven-shards": ["accelerate", "jsonl"], "watchdog-sigkill": ["jsonl"], "keyerror-bad-record": ["slurm"],
         "max-steps": ["spawn", "torchrun-restarts"]}

MECHS: list[Mech] = []
for _k, _d in enumerate(_M):
    _d.setdefault("launchers", rot(_k))
    _d["launchers"] = _d["launchers"] + [x for x in EXTRA.get(_d["name"], []) if x not in _d["launchers"]]
    MECHS.append(Mech(**_d))

# ---- issue 30: new launcher and log shapes (launchers/cluster.py) ----
# each new shape runs one mechanism of every class, rotating through each class's mechanisms so the shapes together
# cover most of them; stdout-pipe-full where the shape's stdout is a pipe a launcher reads
NEW_SHAPES = ["srun-label", "sbatch-pertask", "mpirun-tagged", "mpirun-plain", "torchrun-multinode", "k8s-pods",
              "loguru", "structlog-json", "structlog-console", "absl"]
_BY_CLASS = [
    ["keyerror-bad-record", "os-exit", "segfault-ctypes", "abort", "target-out-of-bounds", "valueerror-rank-branch"],
    ["watchdog-sigkill", "torch-alloc-fail", "numpy-memoryerror"],
    ["dl-worker-raises", "dl-worker-oomkill", "dl-worker-timeout", "dl-worker-segfault"],
    ["uneven-shards", "rank0-only-allgather", "skip-empty-batch", "early-stop-unsynced", "rank0-only-barrier",
     "broadcast-vs-allreduce"],
    ["long-eval", "slow-data-prep", "fifo-block", "slow-ckpt-write", "queue-dead-producer"],
    ["truncated-resume-rank0", "ckpt-read-while-write", "incomplete-ckpt-dir", "truncated-resume"],
    ["nan-check-raises", "anomaly-detect", "nan-skip-desync", "loss-scale-collapse"],
    ["ddp-unused-params", "ddp-param-mismatch", "ddp-mark-ready-twice"],
    ["max-steps", "oom-probe-recover", "early-stopping", "loss-scale-recovers", "store-retry-clean"],
]
_PIPE = ["srun-label", "mpirun-tagged", "k8s-pods"]
_by_name = {m.name: m for m in MECHS}
for _k, _shape in enumerate(NEW_SHAPES):
    _names = [cls[_k % len(cls)] for cls in _BY_CLASS] + (["stdout-pipe-full"] if _shape in _PIPE else [])
    for _n in _names:
        if _shape not in _by_name[_n].launchers:
            _by_name[_n].launchers.append(_shape)

# issue 31 follow-up: more shapes users run (TorchX's local scheduler, submitit, TorchTitan's filtered console, one
# log file shared by every rank, a Hydra app, the deprecated torch.distributed.launch), one mechanism of every class each, rotating on from where NEW_SHAPES ended
MORE_SHAPES = ["torchx", "submitit", "ranks-filter", "shared-logfile", "hydra", "distributed-launch",
               "notebook-shell", "deepspeed-rank-logs", "wandb", "mpirun-files", "pty-script"]
for _k, _shape in enumerate(MORE_SHAPES, start=len(NEW_SHAPES)):
    for _n in [cls[_k % len(cls)] for cls in _BY_CLASS]:
        if _shape not in _by_name[_n].launchers:
            _by_name[_n].launchers.append(_shape)

# Ray Train and the notebook: one mechanism of most classes each (the memory-watchdog ones stay off Ray, whose
# own processes the watchdog would also watch)
for _shape, _names in {
    "ray-train": ["keyerror-bad-record", "os-exit", "torch-alloc-fail", "dl-worker-raises", "uneven-shards",
                  "long-eval", "nan-check-raises", "ddp-unused-params", "max-steps"],
    "deepspeed": ["valueerror-rank-branch", "watchdog-sigkill", "dl-worker-segfault", "skip-empty-batch",
                  "fifo-block", "ckpt-read-while-write", "loss-scale-collapse", "ddp-param-mismatch",
                  "oom-probe-recover"],
    "notebook": ["target-out-of-bounds", "segfault-ctypes", "numpy-memoryerror", "dl-worker-timeout",
                 "rank0-only-allgather", "slow-ckpt-write", "anomaly-detect", "ddp-mark-ready-twice",
                 "early-stopping"],
}.items():
    for _n in _names:
        if _shape not in _by_name[_n].launchers:
            _by_name[_n].launchers.append(_shape)

# job_stopped (Slurm ends a job): a healthy run cut by its --time limit or by scancel; and hangs that Slurm's time
# limit ends before the process group's timeout does (the hang is the cause: a long pg timeout, no gloo error)
_SL = ["srun-label", "sbatch-pertask"]
_STOP = dict(script="long_healthy.py", cls="job_stopped", categories=("job_stopped",), check="stopped",
             culprit="none", launchers=list(_SL), per_launcher=2, steps=(1, 1), total=100000, ws=(2, 3, 4))
_LATE = {"pg_timeouts": [300], "slurm_time": 1, "stop_state": "TIMEOUT", "min_hang": 20, "limit": 210}
for _d in [
    dict(name="slurm-time-limit", params={"slurm_time": 1, "stop_state": "TIMEOUT", "limit": 210},
         extra=lambda rng, ws, l: {"sleep": round(rng.uniform(0.3, 0.5), 2)},
         root="A healthy run planned for {p[steps]} steps under a 1-minute Slurm --time limit: every rank trains "
              "normally until slurmstepd cancels the job DUE TO TIME LIMIT (SIGTERM, then SIGKILL).", **_STOP),
    dict(name="slurm-scancel", params={"slurm_time": 10, "stop_state": "CANCELLED", "limit": 150},
         extra=lambda rng, ws, l: {"sleep": round(rng.uniform(0.3, 0.5), 2), "scancel_after": rng.randint(8, 25)},
         root="A healthy run that a user cancels with scancel {p[scancel_after]} s after every rank started: every rank "
              "trains normally until Slurm signals the job.", **_STOP),
    dict(name="long-eval-time-limit", script="long_eval.py", cls="straggler", categories=("straggler",),
         check="hang", params=_LATE, launchers=list(_SL), steps=(3, 8), ws=(2, 3, 4),
         root="At step {step} rank {c} evaluates its large local validation shard (no collective); ranks {others} "
              "wait in the next gradient all_reduce under a 300 s process-group timeout, so nothing errors before "
              "Slurm's 1-minute --time limit cancels the hung job."),
    dict(name="uneven-shards-time-limit", script="uneven_shards.py", cls="barrier_skew",
         categories=("barrier_skew",), check="hang", params=_LATE, launchers=list(_SL), steps=(3, 8), ws=(2, 3, 4),
         root="Rank {c}'s contiguous shard holds {step} batches, the others {p[steps]}: rank {c} enters the final "
              "dist.barrier() while ranks {others} are in the next gradient all_reduce; with a 300 s process-group "
              "timeout nothing errors before Slurm's 1-minute --time limit cancels the hung job."),
]:
    MECHS.append(Mech(**_d))
BY_NAME = {m.name: m for m in MECHS}

"""Line formats declared as data (lnav-style): event kind, regex with named groups, and sample lines with the
values they must produce. `load_formats` refuses a format whose samples do not parse."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import regex

from postmortem.parsers.prefixes import sample_match

# level: "error" (a failure signal), "warning", "info" (progress/context). `triggers` are cheap substrings, one of
# which must occur in a line before the regex runs (the prefilter that keeps boring lines cheap; the bytes prefilter
# hands a big file's lines over by them too, so they stay as they are).
# `requires_nocase` (optional) narrows that for loose triggers: groups of lowercase literals, every group having one
# in the lowercased line (lower_for_literals), which any match of the (case-insensitive) pattern contains, so a line
# without them cannot match and its regex is not run.
FORMAT_DEFS: list[dict] = [
    # ---- collectives: watchdog, desync, mismatch (FORMATS.md §2.3-2.5b)
    {"name": "watchdog-timeout", "kind": "watchdog_timeout", "level": "error",
     "triggers": ["Watchdog caught"],
     "pattern": r"Watchdog caught collective operation timeout(?::\s*Work\w*\((?P<work>(?:[^()]|\([^()]*\))*)\) ran for (?P<elapsed_ms>\d+) milliseconds)?",
     "samples": [("[E ProcessGroupNCCL.cpp:475] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800328 milliseconds before timing out.",
                  {"elapsed_ms": "1800328"})]},
    {"name": "watchdog-status-old", "kind": "watchdog_status", "level": "error",
     "triggers": ["last completed NCCL work"],
     "pattern": r"(?:detected by watchdog at work|Timeout at NCCL work): (?P<seq>\d+), last enqueued NCCL work: (?P<last_enqueued>-?\d+), last completed NCCL work: (?P<last_completed>-?\d+)",
     "samples": [("[PG 3 Rank 4] Timeout at NCCL work: 9141, last enqueued NCCL work: 9141, last completed NCCL work: 9140.",
                  {"seq": "9141", "last_completed": "9140"})]},
    {"name": "watchdog-status", "kind": "watchdog_status", "level": "error",
     "triggers": ["failure detected by watchdog"],
     "pattern": r"failure detected by watchdog at work sequence id: (?P<seq>\d+) PG status: last enqueued work: (?P<last_enqueued>-?\d+), last completed work: (?P<last_completed>-?\d+)",
     "samples": [("[PG ID 0 PG GUID 0(default_pg) Rank 118]  failure detected by watchdog at work sequence id: 2398459 PG status: last enqueued work: 2398578, last completed work: 2398458",
                  {"seq": "2398459", "last_completed": "2398458"})]},
    {"name": "fr-dump-signal", "kind": "watchdog_status", "level": "error",
     "triggers": ["dump signal due to a collective timeout"],
     "pattern": r"dump signal due to a collective timeout from\s+rank (?P<from_rank>\d+)(?:.*?Last enqueued NCCL work: (?P<last_enqueued>-?\d+), last completed NCCL work: (?P<last_completed>-?\d+))?",
     "samples": [("[PG ID 0 PG GUID 0(default_pg) Rank 5] Received a dump signal due to a collective timeout from  rank 34 and we will try our best to dump the debug info. Last enqueued NCCL work: 460631, last completed NCCL work: 460630.This is",
                  {"from_rank": "34", "last_completed": "460630"})]},
    {"name": "heartbeat-timeout", "kind": "watchdog_timeout", "level": "error",
     "triggers": ["Heartbeat monitor timed out", "watchdog got stuck"],
     "pattern": r"(?:Heartbeat monitor timed out|watchdog got stuck for (?P<stuck_s>\d+) seconds)",
     "samples": [("[PG 0 Rank 1] ProcessGroupNCCL's watchdog got stuck for 600 seconds without making progress", {"stuck_s": "600"})]},
    {"name": "desync-culprit", "kind": "desync_report", "level": "error",
     "triggers": ["but didn't join collective"],
     "pattern": r"\[(?P<culprit>\d+)\] finished collective #(?P<seq>\d+), but didn't join collective #(?P<next>\d+)",
     "samples": [("    [7] finished collective #182, but didn't join collective #183 (count from 1)", {"culprit": "7", "seq": "182"})]},
    {"name": "collective-mismatch", "kind": "collective_mismatch", "level": "error",
     "triggers": ["mismatch between collectives", "inconsistent collective"],
     "pattern": r"Rank (?P<rank_a>\d+) is running (?:inconsistent )?collective: (?P<fp_a>.*?)(?:, but Rank (?P<rank_b>\d+) is running collective: (?P<fp_b>.*?))?(?:\.Collectives differ in the following aspects:\s*(?P<aspects>.*))?$",
     "samples": [("[rank1]: RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=3104, OpType=ALLREDUCE, TensorShape=[195812480], TensorDtypes=BFloat16), but Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=3104, OpType=ALLREDUCE, TensorShape=[51123456], TensorDtypes=BFloat16).Collectives differ in the following aspects:   Tensor Tensor shapes: 195812480vs 51123456",
                  {"rank_a": "1", "rank_b": "0", "aspects": "Tensor Tensor shapes: 195812480vs 51123456"})]},
    # ---- gloo / store / socket (FORMATS.md §2.4, §2.7)
    {"name": "gloo-timeout", "kind": "collective_timeout", "level": "error",
     "triggers": ["Timed out waiting", "Read timeout"],
     "pattern": r"(?:Timed out waiting (?P<timeout_ms>\d+)ms for (?P<op>recv|send) operation to complete|Read timeout \[(?P<peer>[^\]]{1,256})\]:?(?P<port>\d*))",
     "samples": [("[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 10000ms for recv operation to complete",
                  {"timeout_ms": "10000", "op": "recv"}),
                 ("RuntimeError: [/opt/gloo/transport/tcp/buffer.cc:76] Read timeout [127.0.0.1]:32444", {"peer": "127.0.0.1"})]},
    {"name": "peer-closed", "kind": "collective_error", "level": "error",
     "triggers": ["Connection closed by", "Connection reset by peer", "caused pair closure", "Broken pipe"],
     "pattern": r"(?:Connection closed by (?:remote )?peer\s*\[?(?P<peer>[^\]\s<]+)|Connection reset by peer|Application timeout caused pair closure|(?P<pipe>Broken pipe))",
     "samples": [("RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:28873. This is typically caused by a remote worker crashing.", {"peer": "127.0.0.1"})]},
    {"name": "store-timeout", "kind": "store_error", "level": "error",
     "triggers": ["key-value store", "Socket Timeout", "store->get", "TCPStore", "wait timeout after", "recvValue failed", "sendBytes failed"],
     "pattern": r"(?:\[(?P<waiter>\d+)\] is setting up NCCL communicator and retrieving ncclUniqueId from \[(?P<src>\d+)\] via c10d key-value store|Socket Timeout|store->get\('?(?P<key>[^')]*)'?\) got error|wait timeout after (?P<timeout_ms>\d+)ms|(?P<teardown>Failed to check the \"should dump\" flag on TCPStore|recvValue failed|sendBytes failed))",
     "samples": [("RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error",
                  {"waiter": "1", "src": "0"})]},
    # torch.distributed's store-based barrier at process-group creation (torch <= 2.0 default, later opt-in): each
    # waiting rank reports how many of the world have arrived; printed while healthy starts wait a moment too
    {"name": "store-barrier-wait", "kind": "store_wait", "level": "info",
     "triggers": ["store based barrier", "store-based barrier"],
     "pattern": r"(?:Waiting in store based barrier to initialize process group for (?:[\d.]+ seconds ?)?rank: (?P<wait_rank>\d+), key: (?P<key>\S+?),? \(world_size=(?P<world>\d+), (?:worker_count|num_workers_joined)=(?P<count>\d+)|Rank (?P<done_rank>\d+): Completed store-based barrier for key:? ?(?P<done_key>\S+) with (?P<done_n>\d+) nodes)",
     "samples": [("I0510 07:28:04.417845 139863945226048 distributed_c10d.py:337] Waiting in store based barrier to initialize process group for rank: 2, key: store_based_barrier_key:2 (world_size=8, worker_count=7, timeout=0:30:00)",
                  {"wait_rank": "2", "world": "8", "count": "7"}),
                 # torch >= 2.1 (a debug line; the seconds run into `rank:` in torch's own format string)
                 ("Waiting in store based barrier to initialize process group for 10.01 secondsrank: 1, key: store_based_barrier_key:1 (world_size=2, num_workers_joined=1, timeout=0:30:00 error=Socket Timeout)",
                  {"wait_rank": "1", "world": "2", "count": "1"}),
                 ("Rank 3: Completed store-based barrier for key:store_based_barrier_key:1 with 8 nodes.",
                  {"done_rank": "3", "done_n": "8"})]},
    # ---- NCCL errors raised to Python (§2.6) and NCCL WARN lines anywhere (§1.4)
    {"name": "nccl-error", "kind": "nccl_error", "level": "error",
     "triggers": ["NCCL error", "ncclSystemError", "ncclUnhandledCudaError", "ncclRemoteError", "ncclInternalError", "ncclInvalidUsage"],
     "pattern": r"(?:NCCL error(?: in: (?P<where>\S+),)?:?\s*(?P<nccl_err>unhandled system error|unhandled cuda error|internal error|invalid usage|remote process exited or there was a network error|invalid argument)?(?:[^,]*, NCCL version (?P<version>[\d.]+))?|(?P<code>nccl(?:SystemError|UnhandledCudaError|RemoteError|InternalError|InvalidUsage)))",
     "samples": [("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL version 2.10.3",
                  {"nccl_err": "unhandled system error", "version": "2.10.3"})]},
    {"name": "nccl-warn", "kind": "nccl_warn", "level": "error",
     "triggers": ["NCCL WARN"],
     "pattern": r"(?:(?P<host>[^:\s]+):(?P<pid>\d+):(?P<tid>\d+) (?:\[(?P<dev>\d+)\] )?)?(?:(?P<file>[\w./-]+):(?P<srcline>\d+) (?:\((?P<func>[^)]*)\) )?)?NCCL WARN (?P<msg>.*)$",
     "samples": [("ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
                  {"host": "ng30903", "dev": "3", "msg": "Cuda failure 'out of memory'"})]},
    # ---- memory (§3)
    {"name": "cuda-oom", "kind": "oom", "level": "error",
     "triggers": ["out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "Failed to CUDA calloc", "Failed to CUDA malloc", "Tried to allocate"],
     "pattern": r"(?:(?P<dev>CUDA|HIP|NPU) out of memory\.?(?: Tried to allocate (?P<req>[\d.]+ ?[KMGTPE]?i?B))?|(?P<kernel>CUDA error: out of memory)|THCudaCheck FAIL.*?(?P<thc>out of memory)|cuda runtime error \(2\) ?: (?P<thc2>out of memory)|^\W{0,4}Tried to allocate (?P<req2>[\d.]+ ?[KMGTPE]?i?B) \(GPU \d+;|(?P<cublas>CUBLAS_STATUS_ALLOC_FAILED)|Cuda failure (?:\d+ )?'(?P<nccl>out of memory)'|Failed to CUDA (?:calloc|malloc) (?P<nccl_bytes>\d+) bytes)",
     "samples": [("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 32.00 MiB. GPU 0 has a total capacity of 4.00 GiB", {"dev": "CUDA", "req": "32.00 MiB"}),
                 ("RuntimeError: CUDA error: out of memory", {"kernel": "CUDA error: out of memory"}),
                 ("THCudaCheck FAIL file=/pytorch/aten/src/THC/generic/THCStorage.cu line=58 error=2 : out of memory", {"thc": "out of memory"}),
                 ("RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/generic/THCStorage.cu:58", {"thc2": "out of memory"}),
                 ("Tried to allocate 216.00 MiB (GPU 0; 7.92 GiB total capacity; 69.17 MiB already allocated; 24.56 MiB free)", {"req2": "216.00 MiB"})]},
    {"name": "cuda-oom-detail-new", "kind": "oom_detail", "level": "info",
     "triggers": ["has a total capac"],
     "pattern": r"GPU (?P<gpu>\d+) has a total capac(?:i)?ty of (?P<total>[\d.]+ \w+) of which (?P<free>[\d.]+ \w+|0 bytes) is free(?:.{0,200}?this process has (?P<proc>[\d.]+ \w+) memory in use)?",
     "samples": [("GPU 0 has a total capacty of 4.00 GiB of which 41.56 MiB is free. Including", {"gpu": "0", "total": "4.00 GiB"})]},
    {"name": "cuda-oom-detail-old", "kind": "oom_detail", "level": "info",
     "triggers": ["total capacity;"],
     "pattern": r"\(GPU (?P<gpu>\d+); (?P<total>[\d.]+ \w+) total capacity; (?P<alloc>[\d.]+ \w+) already allocated; (?P<free>[\d.]+ \w+) free",
     "samples": [("RuntimeError: CUDA out of memory. Tried to allocate 4.18 GiB (GPU 0; 10.92 GiB total capacity; 4.68 GiB already allocated; 2.44 GiB free; 7.85 GiB reserved in total by PyTorch)",
                  {"gpu": "0", "total": "10.92 GiB", "free": "2.44 GiB"})]},
    {"name": "host-oom-killer", "kind": "host_oom", "level": "error",
     "triggers": ["Kill process", "Killed process", "oom-kill", "oom_kill", "invoked oom-killer", "Out Of Memory", "can't allocate memory", "Cannot allocate memory", "MemoryError", "std::bad_alloc"],
     "pattern": r"(?:(?P<scope>Memory cgroup out of memory|Out of memory): Kill(?:ed)? process (?P<pid>\d+) \((?P<comm>[^)]{0,256})\)(?:.{0,512}?anon-rss:\s*(?P<anon_rss_kb>\d+)\s*kB)?|oom-kill:constraint=(?P<constraint>\w+).{0,2048}?task=(?P<task>[^,]{1,256}),pid=(?P<kpid>\d+)|(?<!\S)(?P<invoker>\S+) invoked oom-killer|Detected (?P<events>\d+) oom[_-]kill event|task (?P<task_id>\d+): Out Of Memory|(?P<cpu_alloc>DefaultCPUAllocator: can't allocate memory)|(?P<memerr>^MemoryError\b)|(?P<bad_alloc>std::bad_alloc))",
     "samples": [("[2059991.491542] Out of memory: Killed process 25315 (python3) total-vm:53312244 kB, anon-rss:31451456kB, file-rss:74816kB", {"pid": "25315", "comm": "python3", "anon_rss_kb": "31451456"}),
                 ("slurmstepd: error: Detected 1 oom_kill event in StepId=8538204.0. Some of the step tasks have been OOM Killed.", {"events": "1"}),
                 ("terminate called after throwing an instance of 'std::bad_alloc'", {"bad_alloc": "std::bad_alloc"})]},
    {"name": "killed-by-shell", "kind": "killed", "level": "error",
     "triggers": ["Killed", "已杀死", "已終止", "Getötet", "Processus arrêté", "強制終了"],
     "pattern": r"^(?:(?:\S+: line \d+: +\d+ )?(?:Killed|已杀死|已終止|Getötet|強制終了)(?:\s+\S.*)?|.*\bKilled\s+(?:python\S*|torchrun|deepspeed|accelerate)\b.*)$",
     "samples": [("已杀死", {}), ("Killed", {}), ("./run.sh: line 5: 12345 Killed                  python train.py", {})]},
    # ---- DataLoader (§3.4)
    {"name": "dataloader-worker", "kind": "dataloader", "level": "error",
     "triggers": ["DataLoader worker", "encountered in worker", "DataLoader timed out", "shared memory", "in DataLoader worker process"],
     "pattern": r"(?:DataLoader worker \(pid\(?s?\)? ?(?P<pids>[\d, ]+)\) (?:is killed by signal: (?P<signal>[\w -]+)\.|exited unexpectedly)|Unexpected (?P<what>bus error|segmentation fault|floating-point exception) encountered in worker|DataLoader timed out after (?P<timeout_s>\d+) seconds|(?P<shm>unable to open shared memory object|insufficient shared memory|out of shared memory)|Caught (?P<exc>\w+) in DataLoader worker process (?P<worker>\d+))",
     "samples": [("RuntimeError: DataLoader worker (pid 572) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory.", {"pids": "572", "signal": "Bus error"}),
                 ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).", {"what": "bus error"})]},
    # ---- checkpoints (§3.5)
    {"name": "checkpoint-corrupt", "kind": "checkpoint_error", "level": "error",
     "triggers": ["PytorchStreamReader", "PytorchStreamWriter", "storage has wrong size", "more bytes. The file might be corrupted", "SafetensorError", "Ran out of input", "invalid load key", "UnpicklingError", "central directory"],
     "pattern": r"(?:PytorchStreamReader failed reading (?:zip archive|file (?P<member>\S+)): (?P<reason>[^.]*)|(?P<writer>PytorchStreamWriter failed writing file (?P<wmember>\S+): (?P<wreason>[^.]*))|(?P<wrongsize>storage has wrong size)|unexpected EOF, expected (?P<missing>\d+) more bytes|SafetensorError: (?P<st>.*)|(?P<eof>Ran out of input)|(?P<loadkey>invalid load key)|(?P<unpickle>UnpicklingError))",
     "samples": [("RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory", {"reason": "failed finding central directory"}),
                 ("RuntimeError: storage has wrong size: expected -9223011547364714763 got 256", {"wrongsize": "storage has wrong size"})]},
    {"name": "disk-full", "kind": "enospc", "level": "error",
     "triggers": ["No space left on device", "Disk quota exceeded", "Errno 28", "Errno 122"],
     "pattern": r"(?:No space left on device|Disk quota exceeded|\[Errno (?:28|122)\])",
     "samples": [("OSError: [Errno 28] No space left on device", {})]},
    {"name": "checkpoint-save", "scan": "regex", "kind": "checkpoint_save", "level": "info",
     "triggers": ["aving", "save_checkpoint", "checkpoint", "Checkpoint"],
     "requires_nocase": [["sav"]],  # sav(ing|ed|e), ...saved, save_checkpoint
     "pattern": r"(?i)(?:\bsav(?:ing|ed?)\b[^\n]{0,60}?\b(?:checkpoint|ckpt|model|state|weights)\b|\bcheckpoint[^\n]{0,40}?\bsaved\b|save_checkpoint)(?:(?:[^\n]*?(?<![\w./~-]))??(?P<path>[\w./~-]+\.(?:pth?|ckpt|bin|safetensors|pkl|h5)\b|[\w./~-]*checkpoint-\d+))?",
     "samples": [("Saving model checkpoint to /out/checkpoint-2000", {"path": "/out/checkpoint-2000"}),
                 ("Saved checkpoint: runs/exp/weights/last.pt", {"path": "runs/exp/weights/last.pt"})]},
    {"name": "checkpoint-load", "scan": "regex", "kind": "checkpoint_load", "level": "info",
     "triggers": ["oad", "esum", "checkpoint"],
     "requires_nocase": [["load", "resum", "restor"],  # the verb (torch.load()
                         ["checkpoint", "ckpt", "state", "weights", "model", "torch.load("]],  # and the object
     "pattern": r"(?i)(?:\b(?:load(?:ing|ed)?|resum(?:e|ing|ed)|restor(?:e|ing))\b[^\n]{0,60}?\b(?:checkpoint|ckpt|state|weights|model)\b|torch\.load\()(?:(?:[^\n]*?(?<![\w./~-]))??(?P<path>[\w./~-]+\.(?:pth?|ckpt|bin|safetensors|pkl|h5)\b|[\w./~-]*checkpoint-\d+))?",
     "samples": [("Loading checkpoint from /out/last.pt", {"path": "/out/last.pt"}),
                 ("Resuming from checkpoint runs/exp/checkpoint-500", {"path": "runs/exp/checkpoint-500"})]},
    # ---- phases of the loop: eval / sample / data preparation
    {"name": "eval-start", "scan": "regex", "kind": "eval_start", "level": "info",
     "triggers": ["val", "Val", "eval", "Eval", "EVAL", "test", "Test"],
     "requires_nocase": [["run", "start", "begin", "validat", "evaluat"]],
     "pattern": r"(?i)(?:(?<!\*)\*+ Running (?:Evaluation|Prediction) \*+|\b(?:start(?:ing)?|running|begin(?:ning)?|run)\s+(?:the\s+)?(?:evaluation|validation|eval|testing)\b|^\s*(?:Validating|Evaluating|Validation|Evaluation)\b(?:[ .:]|$)|Validation DataLoader \d+)",
     "samples": [("***** Running Evaluation *****", {}), ("Starting validation at step 2000", {})]},
    {"name": "sample-start", "scan": "regex", "kind": "sample_start", "level": "info",
     "triggers": ["ampl", "enerat"],
     "requires_nocase": [["sampling", "generati"]],
     "pattern": r"(?i)(?:\b(?:start(?:ing)?|running|begin)\s+(?:the\s+)?(?:sampling|generation)\b|^\s*(?:Sampling|Generating)\b(?! \w+ from)|\bgenerating (?:\d+ )?(?:samples|images|videos)\b)",
     "samples": [("Generating samples at step 2000", {}), ("Sampling 64 images per device", {})]},
    # ---- numerics
    {"name": "nan-loss", "kind": "nan", "level": "error",
     "triggers": ["nan", "NaN", "inf", "Inf", "NAN"],
     # its `\b[\w/.]*loss` backtracks over every long token (paths): most nan/inf lines name no loss at all
     "requires_nocase": [["loss", "gradient", "found in input tensor", "returned", "detected nan"]],
     "pattern": r"(?i)(?:\b(?P<metric>[\w/.]{0,128}loss[\w/.]{0,128}+)['\"]?\s*[:=]\s*['\"]?\s*(?P<value>-?nan|-?inf(?:inity)?)\b|\b(?:loss|gradient) (?:is|became|becomes) (?P<value2>nan|inf)\b|(?P<check>NaN or Inf found in input tensor)|Function '(?P<fn>\w+)' returned (?P<anomaly>nan) values|(?P<nonfinite>non-finite loss|loss is not finite|detected nan))",
     "samples": [("=> STEP  750   lr: 0.000600   giou_loss:  nan   conf_loss: 10.89", {"metric": "giou_loss", "value": "nan"}),
                 ("total_losses:nan", {"metric": "total_losses", "value": "nan"}),
                 ("{'loss': nan, 'learning_rate': 1e-05}", {"metric": "loss", "value": "nan"})]},
    {"name": "numeric-warning", "kind": "numeric_warning", "level": "warning",
     "triggers": ["RuntimeWarning", "Gradient overflow"],
     "pattern": r"(?:RuntimeWarning: (?P<what>divide by zero|invalid value|overflow) encountered in (?P<op>\w+)|Gradient overflow\.\s+Skipping step)",
     "samples": [("../libs/box_utils/bbox_transform.py:99: RuntimeWarning: divide by zero encountered in log", {"what": "divide by zero", "op": "log"})]},
    # fp16 dynamic loss scaling (DeepSpeed, apex, fairseq, Megatron, users logging GradScaler's scale): read into a
    # trajectory by parsers/loss_scale.py; a collapse towards the floor is a numeric failure, early skips calibration
    {"name": "loss-scale", "kind": "loss_scale", "level": "info",
     "triggers": ["loss scale", "Loss scale", "loss_scale", "Skipping step", "overflow", "OVERFLOW", "skipped=",
                  "cannot decrease scale", "grad_scale"],
     "pattern": r"(?i)(?:loss[ _]scale|skipping step|gradient overflow|grad overflow|overflow detected|overflow!|"
                r"cannot decrease scale|\bstep=\d+, skipped=\d+|grad_scale)",
     "samples": [("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768", {}),
                 ("Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.", {})]},
    # ---- DDP misuse
    {"name": "ddp-unused", "kind": "ddp_error", "level": "error",
     "triggers": ["did not receive grad", "finished reduction in the prior iteration", "marked as ready", "mark a variable ready", "appears not to match", "DDP expects same model"],
     "pattern": r"(?:Parameter(?:s| indices) which did not receive grad for rank (?P<rank>\d+)|Expected to have finished reduction in the prior iteration|(?:has been )?marked as ready twice|Expected to mark a variable ready only once|appears not to match (?:sizes|strides)|DDP expects same model across all ranks)",
     "samples": [("Parameters which did not receive grad for rank 0: _forward_module.model.x.bias", {"rank": "0"})]},
    # ---- GPU hardware (§7.4)
    {"name": "gpu-ecc", "kind": "gpu_hw", "level": "error",
     "triggers": ["ECC", "Xid", "fallen off the bus", "device handle", "GPU is lost", "AER", "NVLink", "SXid"],
     "pattern": r"(?:(?P<ecc>uncorrectable ECC error encountered|CUDA_ERROR_ECC_UNCORRECTABLE|double bit error \(DBE\)|Uncorrectable ECC)|NVRM: Xid \((?:PCI:)?(?P<bus>[0-9a-fA-F:.]+)\): (?P<xid>\d+)(?:, pid=(?P<pid>'?[^,]*'?))?(?:, name=(?P<pname>[^,]*))?,? ?(?P<xmsg>.*)|(?P<offbus>fallen off the bus)|Unable to determine the device handle for GPU ?(?P<lost_bus>[0-9A-Fa-f:.]+): (?P<lost_err>.+)|(?P<lost>GPU is lost)|(?P<aer>AER: (?:Uncorrected|Corrected) \(\w+\) error)|(?P<nvlink>NVLink (?:error|fatal))|nvidia-nvswitch\d+: SXid \((?P<sbus>[^)]*)\): (?P<sxid>\d+))",
     "samples": [("RuntimeError: CUDA error: uncorrectable ECC error encountered", {"ecc": "uncorrectable ECC error encountered"}),
                 ("NVRM: Xid (PCI:0000:3b:00): 79, pid=123, name=python, GPU has fallen off the bus.", {"xid": "79", "bus": "0000:3b:00"}),
                 ("Unable to determine the device handle for GPU0000:03:00.0: Unknown Error", {"lost_bus": "0000:03:00.0", "lost_err": "Unknown Error"})]},
    {"name": "cuda-fatal", "kind": "cuda_error", "level": "error",
     "triggers": ["CUDA error", "cudaError", "device-side assert", "launch failure", "CUDA_ERROR_", "illegal memory access"],
     "pattern": r"(?:CUDA error: (?P<what>(?!out of memory|uncorrectable)[^\n.]+)|(?P<assert>device-side assert triggered)|(?P<launch>unspecified launch failure)|CUDA_ERROR_(?P<driver>(?!OUT_OF_MEMORY|ECC)\w+)|(?P<illegal>an illegal memory access was encountered))",
     "samples": [("RuntimeError: CUDA error: an illegal memory access was encountered", {"what": "an illegal memory access was encountered"}),
                 ("F1119 18:06:58.546988 14145 math_functions.cu:79] Check failed: error == cudaSuccess (4 vs. 0)  unspecified launch failure", {"launch": "unspecified launch failure"}),
                 ("CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure", {"driver": "LAUNCH_FAILED"})]},
    # ---- process lifecycle (§4)
    {"name": "agent-failed", "kind": "exit", "level": "error",
     "triggers": ["exitcode:", "return code =", "terminated with code", "terminated with exit code", "exited with code",
                  "Exited with exit code", "terminated with signal"],
     "pattern": r"(?:failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<local_rank>\d+) \(pid: (?P<pid>\d+)\)|exits with return code = (?P<code2>-?\d+)|Child process with PID (?P<pid2>\d+) terminated with code (?P<code3>-?\d+)|process (?P<proc>\d+) terminated with (?:exit code|signal) (?P<code4>-?\w+)|exited with code (?P<code5>-?\d+)|task (?P<task>\d+): Exited with exit code (?P<code6>\d+))",
     "samples": [("E1121 13:18:24.116000 6755 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 0 (pid: 6788) of binary: /x/python3",
                  {"code": "1", "local_rank": "0", "pid": "6788"}),
                 ("srun: error: node12: task 3: Exited with exit code 2", {"task": "3", "code6": "2"}),
                 ("torch.multiprocessing.spawn.ProcessExitedException: process 3 terminated with signal SIGABRT",
                  {"proc": "3", "code4": "SIGABRT"})]},
    {"name": "fatal-signal", "kind": "fatal_signal", "level": "error",
     "triggers": ["Segmentation fault", "Bus error", "Aborted", "core dumped", "Fatal Python error", "SIGSEGV", "SIGBUS",
                  "Caught signal",
                  "SIGABRT", "Floating point exception", "Illegal instruction"],
     "pattern": r"(?:Fatal Python error: (?P<fatal>[^\n]{0,120})|(?:^|\s|\]|:)(?P<signame>Segmentation fault|Bus error|Aborted|Floating point exception|Illegal instruction)(?:\s+\(core dumped\))?(?:\s+\S*(?:python|torchrun|deepspeed)\S*.*)?$|\*\*\* (?:Received )?(?:signal \d+ \()?(?P<sig>SIG(?:SEGV|BUS|ABRT|FPE|ILL))|\bsignal (?:11|7|6) \((?P<sig2>SIG(?:SEGV|BUS|ABRT))\)|Caught signal (?P<ucx>\d+) \((?P<ucxname>[A-Z][a-z]+(?: [a-z]+)*))",
     "samples": [("Aborted (core dumped)", {"signame": "Aborted"}),
                 ("srun: error: node12: task 3: Segmentation fault (core dumped)", {"signame": "Segmentation fault"}),
                 ("Fatal Python error: Bus error", {"fatal": "Bus error"}),
                 ("*** SIGSEGV (@0x0) received by PID 4242 (TID 0x7f) from PID 0; stack trace: ***", {"sig": "SIGSEGV"}),
                 ("/bin/bash: line 1: 12345 Bus error               (core dumped) python train.py", {"signame": "Bus error"}),
                 # UCX's signal handler (ucs/debug/debug.c: "Caught signal %d (%s)"), in Open MPI / HPC-X / NCCL jobs
                 ("[node3:3039 :0:3095] Caught signal 7 (Bus error: nonexistent physical address)",
                  {"ucx": "7", "ucxname": "Bus error"})]},
    # A native backtrace frame inside NCCL, as UCX's handler (` 2 0x... ncclGroupEnd()  ???:0`), glibc's
    # backtrace_symbols (`/usr/lib/libnccl.so.2(+0x4a6)[0x7f..]`), c10 (`frame #3: ncclCommInitRank + 0x..`) and gdb
    # (`#3 0x.. in ncclGroupEnd () from /usr/lib/libnccl.so.2`) print it: where a fatal signal struck.
    {"name": "native-frame-nccl", "kind": "native_frame", "level": "info",
     "triggers": ["libnccl", "nccl"],
     "pattern": r"^\s*(?:frame #\d+:|#\s?\d+|\d+)\s+(?:0x[0-9a-fA-F]+\s+)?(?:in\s+)?(?:(?P<fn>nccl[A-Z]\w*)\b|[^\n]{0,200}?(?P<lib>libnccl)[\w.-]*\.so)",
     "samples": [(" 2 0x000000000007587d ncclGroupEnd()  ???:0", {"fn": "ncclGroupEnd"}),
                 (" 5 0x00000000000489b1 ???()  /usr/lib/x86_64-linux-gnu/libnccl.so.2:0", {"lib": "libnccl"}),
                 ("frame #3: ncclCommInitRank + 0x1c (0x7f in /usr/lib/libnccl.so.2)", {"fn": "ncclCommInitRank"}),
                 ("#3  0x00007f1 in ncclGroupEnd () from /usr/lib/x86_64-linux-gnu/libnccl.so.2", {"fn": "ncclGroupEnd"})]},
    {"name": "glog-check", "kind": "error", "level": "error",
     "triggers": ["Check failed:", "*** Check failure stack trace"],
     "pattern": r"Check failed: (?P<check>[^\n]{1,200})",
     "samples": [("F0712 10:00:00.000 123 foo.cc:12] Check failed: x == y (1 vs. 2)", {"check": "x == y (1 vs. 2)"})]},
    {"name": "signal", "kind": "signal", "level": "warning",
     "triggers": ["signal", "SIGTERM", "SIGKILL", "Segmentation fault", "core dumped", "Fatal Python error", "Aborted"],
     "pattern": r"(?:Sending process (?P<pid>\d+) closing signal (?P<sent>SIG\w+)|Received (?P<recv>\d+) death signal|got signal: (?P<got>\d+)|Signal (?P<sig>\d+) \((?P<name>SIG\w+)\) received by PID (?P<victim>\d+)|Received (?P<recv_name>SIG\w+)|(?P<segv>Segmentation fault)|(?P<core>core dumped)|Fatal Python error: (?P<fatal>.*)|(?P<abort>^Aborted\b))",
     "samples": [("W1121 13:18:24.100000 6755 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 6789 closing signal SIGTERM", {"pid": "6789", "sent": "SIGTERM"})]},
    {"name": "cpp-terminate", "kind": "error", "level": "error",
     "triggers": ["terminate called", "what():"],
     "pattern": r"(?:terminate called after throwing an instance of '(?P<cpp_type>[^']+)'|what\(\):\s+(?P<what>.*))",
     "samples": [("terminate called after throwing an instance of 'c10::DistBackendError'", {"cpp_type": "c10::DistBackendError"})]},
    {"name": "teardown-failure", "kind": "teardown", "level": "warning",
     "triggers": ["Some NCCL operations have failed", "taking the entire process down", "watchdog thread terminated", "driver shutting down", "destroy_process_group"],
     "pattern": r"(?:Some NCCL operations have failed or timed out|taking the entire process down|(?P<wd>watchdog thread terminated with exception)|(?P<shutdown>driver shutting down)|destroy_process_group\(\) was not called)",
     "samples": [("[E ProcessGroupNCCL.cpp:495] To avoid data inconsistency, we are taking the entire process down.", {})]},
    # ---- a normal end: what training frameworks print when training is over (HF Trainer, Lightning, accelerate
    # examples, mmengine, Keras/fastai-style summaries); lines after it are no longer training
    {"name": "end-of-training", "kind": "end_marker", "level": "info",
     "triggers": ["train_runtime", "Training completed", "stopped: `max_", "stopped: max_", "raining finished",
                  "raining complete", "inished training", "raining is done", "raining done"],
     "pattern": r"(?:'train_runtime':|\bTraining completed\b|`?Trainer\.fit`? stopped: `?max_(?:epochs|steps)|\b[Tt]raining (?:is )?(?:finished|complete(?:d)?|done)\b|\b[Ff]inished training\b)",
     "samples": [("{'train_runtime': 601.9411, 'train_samples_per_second': 7.029, 'epoch': 1.0}", {}),
                 ("`Trainer.fit` stopped: `max_epochs=10` reached.", {}),
                 ("Training completed. Do not forget to share your model on huggingface.co/models =)", {}),
                 ("INFO - Finished training after 3 epochs", {})]},
    # ---- loggers (§8)
    {"name": "wandb-line", "kind": "wandb", "level": "info",
     "triggers": ["wandb", "W&B"],
     "pattern": r"(?:(?P<retry>Network error|retrying HTTP error|Retrying)\s*\(?(?P<exc>\w*)\)?,? ?(?:entering retry loop)?|(?P<finish>Waiting for W&B process to finish)|_on_finish\(\)[^\]]*\] got exit ret: (?P<exit_ret>\w+)|Tracking run with wandb version (?P<version>\S+)|wandb: (?P<err>ERROR) (?P<errmsg>.*)|(?P<sync>wandb: (?:Syncing run|Run data is saved locally)))",
     "samples": [("wandb: Network error (ConnectTimeout), entering retry loop.", {"exc": "ConnectTimeout"}),
                 ("2023-05-23 11:16:58,008 INFO    MainThread:1507596 [wandb_run.py:_on_finish():2224] got exit ret: None", {"exit_ret": "None"})]},
    # ---- torchrun summary and launcher context
    {"name": "torchrun-failed-title", "kind": "torchrun_summary", "level": "error",
     "triggers": ["ChildFailedError", "Root Cause (first observed failure)"],
     "pattern": r"(?:(?P<cfe>ChildFailedError)|Root Cause \(first observed failure\))",
     "samples": [("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", {"cfe": "ChildFailedError"})]},
    {"name": "world-size", "kind": "config", "level": "info",
     "triggers": ["WORLD_SIZE", "world_size", "MEMBER:", "nranks", "world=", "nproc_per_node", "nproc-per-node", "global_world_sizes", "num_processes"],
     "pattern": r"(?:\bWORLD_SIZE\s*[=:]\s*(?P<ws1>\d+)|\bworld_size\s*[=:]\s*(?P<ws2>\d+)|MEMBER: \d+/(?P<ws3>\d+)|\bworld=(?P<ws4>\d+)|global_world_sizes=\[(?P<ws5>\d+)|--nproc[_-]per[_-]node[= ](?P<nproc>\d+)|\bnum_processes\s*[=:]\s*(?P<ws6>\d+))",
     "samples": [("Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2", {"ws3": "2"}), ("rank 1 initialized, world=2", {"ws4": "2"})]},
    {"name": "rdzv-ranks", "kind": "config", "level": "info",
     "triggers": ["global_ranks="],
     "pattern": r"global_ranks=\[(?P<global_ranks>[\d, ]+)\]",
     "samples": [("  global_ranks=[0, 1]", {"global_ranks": "0, 1"})]},
    {"name": "nccl-version", "kind": "config", "level": "info",
     "triggers": ["NCCL version"],
     "pattern": r"NCCL version (?P<nccl_version>\d+\.\d+\.\d+)(?:\+cuda(?P<cuda>[\d.]+))?",
     "samples": [("NCCL version 2.18.1+cuda12.0", {"nccl_version": "2.18.1", "cuda": "12.0"})]},
    {"name": "torch-dist-debug", "kind": "config", "level": "info",
     "triggers": ["TORCH_DISTRIBUTED_DEBUG", "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE", "NCCL_DEBUG"],
     "pattern": r"(?P<env>TORCH_DISTRIBUTED_DEBUG|TORCH_NCCL_TRACE_BUFFER_SIZE|TORCH_FR_BUFFER_SIZE|NCCL_DEBUG)\s*=\s*(?P<value>\w+)",
     "samples": [("export TORCH_DISTRIBUTED_DEBUG=DETAIL", {"env": "TORCH_DISTRIBUTED_DEBUG", "value": "DETAIL"})]},
    # ---- job identity and versions: which job a file belongs to (postmortem.ingest.bundle keeps two jobs apart)
    {"name": "job-identity", "kind": "job_id", "level": "info",
     "triggers": ["run_id", "rdzv-id", "rdzv_id", "SLURM_JOB", "orch version", "torch==", "torch.__version__"],
     "pattern": r"(?:^\s*run_id\s+:\s+(?P<run_id>[\w.-]{3,})\s*$|--rdzv[-_]id[= ]['\"]?(?P<rdzv_id>[\w.-]{3,})|\bSLURM_JOB_?ID\s*[=:]\s*['\"]?(?P<slurm_job>\d+)|\b(?:PyTorch|[Tt]orch) version\s*[:=]?\s*v?(?P<torch_version>\d+\.\d+(?:\.\d+)?(?:\+[\w.]+)?)\b|\btorch(?:==|\.__version__\s*[:=]\s*['\"]?)(?P<torch_pin>\d+\.\d+(?:\.\d+)?(?:\+[\w.]+)?))",
     "samples": [("  run_id                   : 086078e8-486d-4a9f-8c9f-5c4f8e56ca5c", {"run_id": "086078e8-486d-4a9f-8c9f-5c4f8e56ca5c"}),
                 ("--rdzv-backend=c10d --rdzv-endpoint=localhost:0 --rdzv-id=086078e8-486d-4a9f-8c9f-5c4f8e56ca5c", {"rdzv_id": "086078e8-486d-4a9f-8c9f-5c4f8e56ca5c"}),
                 ("SLURM_JOB_ID=4242", {"slurm_job": "4242"}),
                 ("PyTorch version: 2.1.0+cu121", {"torch_version": "2.1.0+cu121"}),
                 ("torch==2.13.0", {"torch_pin": "2.13.0"})]},
]


@dataclass(frozen=True)
class LineFormat:
    """A line format; its regex is compiled on first use (most formats never trigger in a given job, and compiling
    all of them took ~30 ms of every run, before any file could be read)."""
    name: str
    kind: str
    level: str
    triggers: tuple[str, ...]
    source: str | regex.Pattern  # the pattern (or an already compiled one)
    requires_nocase: tuple[tuple[str, ...], ...] = ()
    scan_regex: bool = False  # the whole-file scan looks for the regex itself, not the triggers (see scan_pattern)

    @functools.cached_property
    def regex(self) -> regex.Pattern:
        return self.source if isinstance(self.source, regex.Pattern) else regex.compile(self.source)

    @property
    def pattern(self) -> str:
        return self.source.pattern if isinstance(self.source, regex.Pattern) else self.source

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        """The group names in group order when every group is named once, else ()."""
        rx = self.regex
        index = rx.groupindex
        if len(index) == rx.groups and sorted(index.values()) == list(range(1, rx.groups + 1)):
            return tuple(sorted(index, key=index.get))
        return ()

    def groupdict(self, m) -> dict:
        """m.groupdict() of this format's match, built from m.groups() (a fraction of the regex module's cost)."""
        if not self.names:
            return m.groupdict()
        return dict(zip(self.names, m.groups()))

    def may_match(self, lowered: str | None) -> bool:
        """False when the line (as lower_for_literals gives it) lacks a `requires_nocase` group."""
        if not self.requires_nocase or lowered is None:
            return True
        return all(any(w in lowered for w in group) for group in self.requires_nocase)


class FormatError(ValueError):
    """A format definition whose samples do not parse."""


# The only characters that case-insensitive `re`/`regex` patterns match to an ASCII letter other than its two cases:
# the Kelvin sign (k; str.lower() agrees), the dotted and dotless I (i) and the long s (s), which str.lower() keeps
# apart (or turns into two characters).
_ODD_FOLDS = ("\u0130", "\u0131", "\u017f")


def lower_for_literals(text: str) -> str | None:
    """`text` lowercased so that an ASCII literal a case-insensitive pattern matches in it is in the result; None
    where that cannot be promised (text with an odd fold): then a literal test says nothing, run the regex."""
    if not text.isascii() and any(c in text for c in _ODD_FOLDS):
        return None
    return text.lower()


def load_formats(defs: list[dict] = FORMAT_DEFS, check: bool = True) -> list[LineFormat]:
    """The definitions as LineFormats; with `check`, compile each and refuse any whose samples do not match or yield
    other values than declared (the test suite checks the built-in ones; a run only declares them)."""
    out = []
    names = set()
    for d in defs:
        if d["name"] in names:
            raise FormatError(f"duplicate format name {d['name']}")
        names.add(d["name"])
        if d.get("scan", "triggers") not in ("triggers", "regex"):
            raise FormatError(f"format {d['name']}: scan is 'triggers' or 'regex'")
        requires = tuple(tuple(group) for group in d.get("requires_nocase", ()))
        fmt = LineFormat(d["name"], d["kind"], d["level"], tuple(d["triggers"]), d["pattern"], requires,
                         d.get("scan") == "regex")
        if check:
            _check(fmt, d)
        out.append(fmt)
    return out


def _check(fmt: LineFormat, d: dict) -> None:
    """Refuse a format whose samples lack its triggers or required words, do not match, or give other values."""
    rx = fmt.regex
    if not d.get("samples"):
        raise FormatError(f"format {d['name']} has no sample lines")
    requires = fmt.requires_nocase
    if any(not group or any(w != w.lower() or not w.isascii() for w in group) for group in requires):
        raise FormatError(f"format {d['name']}: requires_nocase needs non-empty groups of lowercase ASCII")
    for line, want in d["samples"]:
        if not any(t in line for t in d["triggers"]):
            raise FormatError(f"format {d['name']}: sample has none of the triggers: {line!r}")
        if requires and not all(any(w in line.lower() for w in group) for group in requires):
            raise FormatError(f"format {d['name']}: sample lacks a requires_nocase group: {line!r}")
        m = sample_match(rx.search, f"format {d['name']}", line, want, FormatError)
        if list(fmt.groupdict(m).items()) != list(m.groupdict().items()):
            raise FormatError(f"format {d['name']}: groups out of order")


FORMATS = load_formats(check=False)  # checked by tests/test_formats.py


def _tokens(pattern: str):
    """(position, token, inside a [...] class) for each token of a regex; an escape is one token."""
    in_class, i = False, 0
    while i < len(pattern):
        if pattern[i] == "\\":
            yield i, pattern[i:i + 2], in_class
            i += 2
            continue
        ch, was = pattern[i], in_class
        if in_class:
            in_class = ch != "]" or pattern[i - 1] == "["
        elif ch == "[":
            in_class = True
        yield i, ch, was
        i += 1


def _without_optional_tail(pattern: str) -> str:
    """The pattern without a trailing optional group (`...(?:[^\\n]*?(?P<path>...))?`): it changes what a match
    captures, never whether a line matches, and a scanner need not follow it to the end of every line."""
    if not pattern.endswith(")?"):
        return pattern
    opens, start = [], None
    for i, tok, in_class in _tokens(pattern[:-1]):
        if in_class:
            continue
        if tok == "(":
            opens.append(i)
        elif tok == ")":
            start = opens.pop()
    return pattern[:start] if start is not None and not opens and start > 0 else pattern


def scan_pattern(fmt: LineFormat) -> tuple[str, bool]:
    """(pattern, caseless) of a `scan: regex` format for scanning raw lines: named groups plain, `(?i)` as a flag
    and `^` anchors dropped (the format matches a message, which a raw line holds after its prefixes), so that it
    finds every line the format can match on the message (and, rarely, a few more)."""
    pattern = fmt.pattern
    caseless = pattern.startswith("(?i)")
    if caseless:
        pattern = pattern[4:]
    pattern = _without_optional_tail(re.sub(r"\(\?P<\w+>", "(", pattern))
    return _unbounded("".join(tok for _, tok, in_class in _tokens(pattern) if in_class or tok != "^")), caseless


_BOUNDED_REPEAT = re.compile(r"\{(\d+),\d+\}\??")


def _unbounded(pattern: str) -> str:
    """Bounded repeats without their upper bound (`[^\\n]{0,60}?` -> `[^\\n]*`): the scan may find a few more lines,
    which the format's own regex then refuses, and Hyperscan builds the database in a third of the time (a bounded
    repeat in the checkpoint formats alone took 55 ms to compile, on every run)."""
    out, skip_to = [], -1
    for pos, tok, in_class in _tokens(pattern):
        if pos < skip_to:
            continue
        m = _BOUNDED_REPEAT.match(pattern, pos) if tok == "{" and not in_class else None
        if m:
            out.append("*" if m.group(1) == "0" else "{%s,}" % m.group(1))
            skip_to = m.end()
            continue
        out.append(tok)
    return "".join(out)


def trigger_regex(words) -> re.Pattern:
    """One regex that finds any of `words` (all str or all bytes), as a prefix tree: Python's `re` scans that ~10x
    faster than a flat alternation (it only answers whether some word occurs; the match may be a shorter word)."""
    words = [w for w in words if w]
    if not words:
        return re.compile(r"(?!x)x")
    end = words[0][:0]
    group, bar, close = ("(?:", "|", ")") if isinstance(end, str) else (b"(?:", b"|", b")")
    trie: dict = {}
    for w in words:
        node = trie
        for i in range(len(w)):
            node = node.setdefault(w[i:i + 1], {})
        node[end] = {}

    def emit(node: dict):
        if end in node:  # a word ends here: a longer one adds nothing to "some word occurs"
            return end
        alts = [re.escape(ch) + emit(sub) for ch, sub in sorted(node.items())]
        return alts[0] if len(alts) == 1 else group + bar.join(alts) + close
    return re.compile(emit(trie))


# One search for every trigger: a line that contains none of them is skipped without running any format.
TRIGGER_RE = trigger_regex({t for f in FORMATS for t in f.triggers})


def _trigger_index(formats: list[LineFormat]) -> tuple[int, dict[str, list[tuple[str, int]]]]:
    """Triggers bucketed by their first K characters (K = the shortest trigger, at most 2), each with the bit mask
    of the formats (by position) it triggers."""
    masks: dict[str, int] = {}
    for i, f in enumerate(formats):
        for t in f.triggers:
            masks[t] = masks.get(t, 0) | (1 << i)
    k = max(1, min(2, min(len(t) for t in masks)))
    buckets: dict[str, list[tuple[str, int]]] = {}
    for t, mask in sorted(masks.items()):
        buckets.setdefault(t[:k], []).append((t, mask))
    return k, buckets


_KEY_LEN, _TRIGGERS_AT = _trigger_index(FORMATS)
MAX_TRIGGER_SPOTS = 32  # a line with more trigger positions than this is tested trigger by trigger instead
# Ranks print the same messages (progress redraws, warnings, errors) once prefixes are stripped: the masks of recent
# messages are kept (a pure function of the text; bounded, cleared when full).
_MEMO: dict[str, int] = {}
MEMO_MAX = 8192
MEMO_MAX_CHARS = 512  # longer lines are rarely repeated; keeps the memo within a few MB


def triggered(message: str) -> int:
    """Bit mask of the formats (by position in FORMATS) with a trigger in `message`."""
    if len(message) > MEMO_MAX_CHARS:
        return _triggered(message)
    found = _MEMO.get(message)
    if found is None:
        if len(_MEMO) >= MEMO_MAX:
            _MEMO.clear()
        found = _MEMO[message] = _triggered(message)
    return found


def _triggered(message: str) -> int:
    """triggered() uncached: TRIGGER_RE finds exactly the positions where some trigger starts; only the few
    triggers that begin with the characters there are compared, instead of testing all ~160 against the line."""
    m = TRIGGER_RE.search(message)
    found = 0
    spots = 0
    k = _KEY_LEN
    while m is not None:
        p = m.start()
        for t, mask in _TRIGGERS_AT.get(message[p:p + k], ()):
            if message.startswith(t, p):
                found |= mask
        spots += 1
        if spots > MAX_TRIGGER_SPOTS:  # trigger-dense text: the plain test costs less than walking every spot
            return _triggered_plain(message)
        m = TRIGGER_RE.search(message, p + 1)
    return found


def _triggered_plain(message: str) -> int:
    found = 0
    for i, fmt in enumerate(FORMATS):
        for t in fmt.triggers:
            if t in message:
                found |= 1 << i
                break
    return found


def match_line(message: str) -> list[tuple[LineFormat, regex.Match]]:
    """All formats that match a (prefix-stripped) message, in declaration order; cheap when nothing triggers."""
    found = triggered(message)
    hits = []
    lowered = False
    while found:
        low = found & -found
        fmt = FORMATS[low.bit_length() - 1]
        found ^= low
        if fmt.requires_nocase:
            if lowered is False:
                lowered = lower_for_literals(message)
            if not fmt.may_match(lowered):
                continue
        m = fmt.regex.search(message)
        if m:
            hits.append((fmt, m))
    return hits

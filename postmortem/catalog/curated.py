"""The curated message families (build input; the analyzer reads the generated families.json, not this module).

Each family groups the messages that say one thing, across libraries and releases. Fields:
- id: kebab-case, stable. Earlier families win: specific before generic (a wrapper line that quotes a timeout is a
  timeout first).
- pattern: `re` syntax, searched (not anchored) in the printed line; it must match every wording the sources print.
- needs: lowercase words (\\w+ tokens) one of which every match contains: the cheap prefilter of `family_of`.
- category (DESIGN.md ids), role (root | consequence | benign), implies (what it says about the printing rank).
- evidence: (lib, regex over extracted templates) selecting the source strings the family was built from; every
  selected string, its placeholders filled with sample values, must match the pattern.
- parts: (lib, regex) selecting C++ fragments of a message that the compiler keeps apart; each must be part of a
  join.
- joins: (lib, template with {} placeholders) the printed message as the code assembles it from fragments; the build
  checks that each literal piece is in the library's strings of a release and records those releases.
- external: where messages come from sources that were not extracted (kernel, shell, Slurm); such a family is tested
  on real lines of the corpus instead.
"""
from __future__ import annotations

ROOT, CONSEQUENCE, BENIGN = "root", "consequence", "benign"


def F(id, category, role, implies, pattern, needs, description, evidence=(), parts=(), joins=(), external=None,
      flags=""):
    return dict(id=id, category=category, role=role, implies=list(implies), pattern=pattern, needs=list(needs),
                description=description, evidence=[list(e) for e in evidence], parts=[list(p) for p in parts],
                joins=[list(j) for j in joins], external=external, flags=flags)


FAMILIES = [
    # ------------------------------------------------------------------ numerics: loss scaling, NaN
    F("loss-scale-at-minimum", "nan_inf", ROOT, ["numeric_failure"],
      r"loss scale already at minimum|[Mm]inimum loss scale reached|cannot decrease scale anymore",
      ["minimum"],
      "The dynamic loss scaler reached its floor after repeated overflows and the optimizer gives up: the gradients "
      "are inf/NaN at every scale (fp16 overflow that calibration cannot absorb).",
      evidence=[("deepspeed", r"loss scale already at minimum"), ("fairseq", r"Minimum loss scale reached")]),
    F("loss-scale-overflow-skip", "nan_inf", BENIGN, ["handled"],
      r"(?:OVERFLOW!|OVERFLOW within closure!|[Oo]verflow detected|Gradient overflow|loss scale overflow!|gradient overflow detected|"
      r"overflow detected, setting scale)[^\n]*?(?:[Ss]kipping (?:step|update)|reducing|setting (?:loss )?scale|"
      r"ignoring gradient|hysteresis)",
      ["overflow"],
      "An fp16 step overflowed: the optimizer skipped it and lowered the loss scale. A few at the start are "
      "calibration; a scale that keeps halving to its minimum at the end of a log is a numeric failure "
      "(postmortem.parsers.loss_scale decides from the trajectory).",
      evidence=[("deepspeed", r"OVERFLOW! Rank|Overflow detected\. Skipping step|loss scale overflow! Skipping"),
                ("apex", r"^Gradient overflow|^OVERFLOW within closure|Gradient overflow, skipping update"),
                ("fairseq", r"overflow detected, setting scale")]),
    F("loss-scale-overflow-note", "nan_inf", BENIGN, ["handled"],
      r"Grad overflow on iteration|NOTE: (?:gradient )?overflow detected|number of skipped iterations:\s*[1-9]|"
      r"setting loss scale to: ",
      ["overflow", "skipped", "setting"],
      "A report that a step overflowed or was skipped (DeepSpeed's iteration note, fairseq's NOTE, Megatron's "
      "skipped-iterations counter): part of a loss-scale trajectory, not a failure by itself.",
      evidence=[("deepspeed", r"^\s*Grad overflow on iteration"), ("fairseq", r"^NOTE: (?:gradient )?overflow|"
                                                                            r"^setting loss scale to: "),
                ("apex", r"Grad overflow on iteration")]),
    F("loss-scale-change", "nan_inf", BENIGN, ["none"],
      r"(?:Increasing|Reducing) dynamic loss scale from|No Grad overflow for \d+ iterations|"
      r"setting loss scale from \S+ -> |Using (?:dynamic|static) loss scale",
      ["dynamic", "overflow", "scale"],
      "The loss scaler moved its scale (growth after a clean window, or a reduction) or announced its mode.",
      evidence=[("deepspeed", r"(?:Increasing|Reducing) dynamic loss scale from|No Grad overflow for|"
                              r"setting loss scale from"),
                ("apex", r"^Using (?:dynamic|static) loss scale")]),
    F("anomaly-nan-in-backward", "nan_inf", ROOT, ["numeric_failure"],
      r"Function '[^']+' returned nan values in its \d+(?:th|st|nd|rd) output",
      ["returned"],
      "Autograd anomaly detection found NaN in a backward function's output: the step that produced it is the "
      "first numeric failure.",
      parts=[("torch", r"returned nan values in its|^Function '$")],
      joins=[("torch", "Function '{}' returned nan values in its {}th output.")]),
    F("nan-in-grad-norm", "nan_inf", ROOT, ["numeric_failure"],
      r"found NaN in local grad norm|Rank \d+: found NaN in local|NaN or Inf found in input tensor|"
      r"Detected NaN or Inf in wgrad|"
      r"is not finite\. Previous best value|Detected (?:NaN|Inf|nan|inf) (?:loss|gradient)|loss is (?:nan|NaN)\b|"
      r"[Ll]oss (?:is|became) (?:NaN|nan|inf|Inf)",
      ["nan", "finite", "inf"],
      "A NaN/Inf loss or gradient norm was detected by a check that stops or flags training (Megatron's grad-norm "
      "check, Lightning's non-finite monitor).",
      evidence=[("megatron", r"Detected NaN or Inf in wgrad"),
                ("lightning", r"is not finite\. Previous best value")]),

    # ------------------------------------------------------------------ GPU memory
    F("cuda-out-of-memory", "gpu_oom", ROOT, ["memory_refused"],
      r"CUDA out of memory|CUDA error: out of memory|HIP out of memory|CUDA ran out of memory|"
      r"torch\.(?:cuda\.)?OutOfMemoryError|cudaErrorMemoryAllocation|XPU out of memory|"
      r"Cuda failure '?out of memory|CUDA_ERROR_OUT_OF_MEMORY|cuda runtime error \(2\) : out of memory",
      ["cuda", "hip", "outofmemoryerror", "cudaerrormemoryallocation", "xpu", "cuda_error_out_of_memory"],
      "The GPU allocator (or NCCL's CUDA calls) could not get device memory: the process ran out of GPU memory.",
      evidence=[("torch", r"^CUDA out of memory\. |CUDA ran out of memory outside"),
                ("nccl", r"^(?:⟪%s⟫:⟪%d⟫ )?Cuda failure (?:⟪%d⟫ )?'⟪%s⟫'$", "out of memory")],
      parts=[("torch", r"^CUDA out of memory\. Tried to allocate $")],
      joins=[("torch", "CUDA out of memory. Tried to allocate {}. GPU {} has a total capacity of {} of which {} is "
                       "free. "),
             ("torch", "CUDA error: {}", "out of memory")]),
    F("cuda-oom-retry", "gpu_oom", BENIGN, ["handled"],
      r"ran out of memory in validation step, retrying|OOM: Ran out of memory with exception|"
      r"Batch size \d+ failed, trying batch size|attempting to recover from OOM|[Bb]atch size found: |"
      r"Unable to acquire workspace on first attempt, emptying cache and retrying",
      ["retrying", "oom", "batch", "found", "workspace"],
      "An out-of-memory that the code catches and retries with less (a smaller batch, an emptied cache): the run "
      "goes on; only a later unrecovered OOM is a failure.",
      evidence=[("fairseq", r"ran out of memory in validation step|OOM: Ran out of memory"),
                ("lightning", r"Batch size ⟪[^⟫]*⟫ failed, trying batch size"),
                ("deepspeed", r"Unable to acquire workspace on first attempt")]),
    F("no-executable-batch-size", "gpu_oom", ROOT, ["memory_refused"],
      r"No executable batch size found, reached zero",
      ["executable"],
      "accelerate's batch-size search halved the batch to zero without fitting in memory.",
      evidence=[("accelerate", r"No executable batch size found")]),

    # ------------------------------------------------------------------ host memory
    F("numpy-array-memory-error", "host_oom", ROOT, ["memory_refused"],
      r"Unable to allocate [\d.]+ (?:[KMGTPE]i)?B for an array with shape",
      ["unable"],
      "numpy could not allocate an array in host memory (_ArrayMemoryError, a MemoryError subclass).",
      evidence=[("numpy", r"Unable to allocate ⟪[^⟫]*⟫ for an array with shape", "1.50 GiB")]),
    F("cpu-allocator-refused", "host_oom", ROOT, ["memory_refused"],
      r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)|"
      r"C10 Out of Memory\. Trying to allocate|unable to mmap \d+ bytes|Torch: unable to mmap memory",
      ["defaultcpuallocator", "c10", "mmap"],
      "torch's CPU allocator was refused host memory (malloc/mmap failed): memory refused inside the process.",
      parts=[("torch", r"^DefaultCPUAllocator: |^C10 Out of Memory|unable to mmap memory")],
      joins=[("torch", "DefaultCPUAllocator: can't allocate memory: you tried to allocate {} bytes. Error code {} "
                       "({})"),
             ("torch", "C10 Out of Memory. Trying to allocate {} bytes")]),
    F("std-bad-alloc", "host_oom", ROOT, ["memory_refused"],
      r"std::bad_alloc|instance of 'std::bad_alloc'",
      ["std", "bad_alloc"],
      "A C++ allocation failed inside the process (std::bad_alloc), usually host memory exhausted.",
      joins=[("torch", "std::bad_alloc")]),
    F("python-memory-error", "host_oom", ROOT, ["memory_refused"],
      r"(?<![\w.])(?:[\w]+\.)*_?(?:Array)?MemoryError\b(?!\w)",
      ["memoryerror", "_arraymemoryerror"],
      "A Python MemoryError (or numpy's _ArrayMemoryError subclass): host memory refused inside the process.",
      evidence=[("cpython", r"MemoryError")], external="CPython builtins (MemoryError)"),
    F("ray-memory-monitor-kill", "host_oom", ROOT, ["killed_from_outside"],
      r"node running low on memory|exceeds the memory usage threshold of|Ray killed this worker|"
      r"ray\.exceptions\.OutOfMemoryError|Memory on the node \(IP:",
      ["running", "exceeds", "ray", "outofmemoryerror", "memory"],
      "Ray's memory monitor killed a worker because the node's memory use crossed its threshold: killed from "
      "outside, host memory.",
      evidence=[("ray", r"running low on memory|memory usage threshold")],
      joins=[("ray", "Task was killed due to the node running low on memory."),
             ("ray", "Memory on the node (IP: {}, ID: {}) where the task ({}) was running was {}), which exceeds "
                     "the memory usage threshold of {}{|}. Ray killed this worker (ID: {}")]),
    F("kernel-oom-killer", "host_oom", ROOT, ["killed_from_outside"],
      r"Out of memory: Kill(?:ed)? process|oom-kill:constraint=|Memory cgroup out of memory|invoked oom-killer|"
      r"oom_reaper: reaped process|Killed process \d+ \(\S+\) total-vm",
      ["memory", "oom", "oom_reaper", "killed", "kill"],
      "The kernel OOM killer (host or cgroup) chose and killed a process: killed from outside, host memory.",
      external="Linux kernel mm/oom_kill.c, mm/memcontrol.c (dmesg)"),
    F("slurm-oom-kill", "host_oom", ROOT, ["killed_from_outside"],
      r"Detected \d+ oom[-_]kill event|Some of (?:your|the step) (?:processes|tasks) (?:may )?have been "
      r"OOM Killed|oom-kill event\(s\) in",
      ["detected", "some", "oom"],
      "Slurm's cgroup plugin saw OOM kills in the step: a task was killed from outside for exceeding its memory.",
      external="Slurm slurmstepd (task/cgroup)"),
    F("dataloader-worker-bus-error", "dataloader_failure", ROOT, ["data_loading_failed"],
      r"Unexpected bus error encountered in worker|Unexpected segmentation fault encountered in worker|"
      r"Unexpected floating-point exception encountered in worker",
      ["unexpected"],
      "A DataLoader worker got SIGBUS/SIGSEGV/SIGFPE; a bus error usually means /dev/shm is too small.",
      evidence=[("torch", r"^ERROR: Unexpected (?:bus error|segmentation fault|floating-point exception) "
                          r"encountered in worker")]),
    F("shm-exhausted", "dataloader_failure", ROOT, ["data_loading_failed"],
      r"unable to (?:write to|open|allocate shared memory\(shm\) for) (?:file|shared memory object) <|"
      r"Couldn't allocate shared memory segment|insufficient shared memory|out of shared memory|"
      r"No space left on device[^\n]*(?:/dev/shm|torch_)",
      ["unable", "couldn", "insufficient", "shared", "space"],
      "Shared memory (/dev/shm) used to pass tensors between processes ran out or could not be opened.",
      evidence=[("torch", r"^It is possible that dataloader's workers are out of shared memory")],
      parts=[("torch", r"^unable to (?:write to|open|allocate shared memory\(shm\) for) (?:file|shared memory "
                       r"object) <$")],
      joins=[("torch", "unable to write to file <{}>: {} ({})", "/torch_1234_567"),
             ("torch", "unable to open shared memory object <{}> in read-write mode: {} ({})"),
             ("torch", "unable to allocate shared memory(shm) for file <{}>: {} ({})"),
             ("torch", "Couldn't allocate shared memory segment: {}")]),

    # ------------------------------------------------------------------ DataLoader
    F("dataloader-worker-killed", "dataloader_failure", ROOT, ["data_loading_failed"],
      r"DataLoader worker \(pid\(?s?\)? ?[\d, ]+\)? (?:is killed by signal|exited unexpectedly)",
      ["dataloader"],
      "A DataLoader worker process died (killed by a signal such as SIGKILL from the OOM killer, or exited): the "
      "main process raises when it notices.",
      evidence=[("torch", r"^DataLoader worker \(pid\(s\) ⟪|^DataLoader worker \(pid ⟪")],
      parts=[("torch", r"^DataLoader worker \(pid $")],
      joins=[("torch", "DataLoader worker (pid {}) is killed by signal: {}. "),
             ("torch", "DataLoader worker (pid {}) exited unexpectedly with exit code {}. Details are lost due to "
                       "multiprocessing.")]),
    F("dataloader-worker-exception", "dataloader_failure", ROOT, ["data_loading_failed"],
      r"Caught \w+ in DataLoader worker process \d+|Caught \w+ in pin memory thread",
      ["caught"],
      "A DataLoader worker (or the pin-memory thread) raised while loading a batch; the worker's traceback is "
      "re-raised in the main process.",
      evidence=[("torch", r"^Caught ⟪", "ValueError in DataLoader worker process 0")]),
    F("dataloader-timeout", "dataloader_failure", ROOT, ["data_loading_failed"],
      r"DataLoader timed out after \d+ seconds|Pin memory thread exited unexpectedly",
      ["dataloader", "pin"],
      "The DataLoader waited longer than its timeout for a batch (workers hung or too slow), or its pin-memory "
      "thread died.",
      evidence=[("torch", r"^DataLoader timed out after|^Pin memory thread exited unexpectedly")]),
    F("fd-exhaustion", "dataloader_failure", ROOT, ["data_loading_failed"],
      r"received \d+ items of ancdata|Too many open files",
      ["ancdata", "many"],
      "Tensors passed between processes by file descriptor ran out of descriptors (ulimit -n / sharing strategy).",
      external="CPython multiprocessing/reduction.py (recvfds) and glibc strerror(EMFILE)",
      joins=[("glibc", "Too many open files")]),

    # ------------------------------------------------------------------ checkpoints and serialization
    F("torch-load-corrupt-archive", "checkpoint_corruption", ROOT, ["checkpoint_io_failed"],
      r"PytorchStreamReader failed|invalid header or archive is corrupted|failed finding central directory|"
      r"storage has wrong (?:byte )?size|decompression failed or archive is corrupted|"
      r"unsupported central directory size",
      ["pytorchstreamreader", "invalid", "failed", "storage", "decompression", "unsupported"],
      "torch.load found a truncated or corrupt checkpoint archive (partly written, cut by a full disk or a kill, "
      "or read while being written).",
      parts=[("torch", r"^PytorchStreamReader failed $")],
      joins=[("torch", "PytorchStreamReader failed {|}reading zip archive{|}: {|}failed finding central directory"),
             ("torch", "PytorchStreamReader failed {|}reading file {}: {|}invalid header or archive is corrupted"),
             ("torch", "PytorchStreamReader failed {|}locating file {}: {|}file not found"),
             ("torch", "PytorchStreamReader failed {|}reading file {}: {|}file read failed"),
             ("torch", "storage has wrong byte size: expected {} got {}")]),
    F("torch-save-write-failed", "checkpoint_corruption", ROOT, ["checkpoint_io_failed"],
      r"PytorchStreamWriter failed|inline_container\.cc:\d+\] \. unexpected pos|unexpected pos \d+ vs \d+|"
      r"Failed saving model checkpoint to",
      ["pytorchstreamwriter", "unexpected", "failed"],
      "torch.save could not finish writing a checkpoint (disk full, quota, network file system error): the file "
      "left behind is incomplete.",
      parts=[("torch", r"^PytorchStreamWriter failed $|^unexpected pos $")],
      evidence=[("deepspeed", r"^Failed saving model checkpoint to")],
      joins=[("torch", "PytorchStreamWriter failed {|}writing file {}: {|}file write failed"),
             ("torch", "PytorchStreamWriter failed {|}writing central directory for archive {}: {|}file write failed"),
             ("torch", "unexpected pos {} vs {}")]),
    F("nccl-shm-failure", "nccl_error", ROOT, ["crashed"],
      r"Error while \w+(?: to)? shared memory segment|failed to create shared memory (?:file|mapping)|"
      r"Call to posix_fallocate failed|shm\.h:\d+ NCCL WARN",
      ["segment", "shared", "posix_fallocate", "shm"],
      "NCCL could not create or map its /dev/shm segment (a container's small /dev/shm, permissions): the "
      "communicator fails on this node.",
      evidence=[("nccl", r"^Error while ⟪%s⟫ shared memory segment|failed to create shared memory")]),
    F("disk-full", "checkpoint_corruption", ROOT, ["checkpoint_io_failed"],
      r"[Nn]o space left on device|Disk quota exceeded|\[Errno 28\]|ENOSPC|\[Errno 122\]",
      ["space", "quota", "errno", "enospc"],
      "A write failed because the file system is full (or over quota): a checkpoint written then is truncated.",
      external="glibc strerror(ENOSPC/EDQUOT)",
      joins=[("glibc", "No space left on device"), ("glibc", "Disk quota exceeded"),
             ("torch", "no space left on device")]),
    F("safetensors-header-corrupt", "checkpoint_corruption", ROOT, ["checkpoint_io_failed"],
      r"Error while deserializing header: \w+|SafetensorError: Error while deserializing",
      ["deserializing"],
      "A safetensors file has a broken header (truncated or not a safetensors file).",
      joins=[("safetensors", "Error while deserializing header: {|}HeaderTooLarge"),
             ("safetensors", "Error while deserializing header: {|}MetadataIncompleteBuffer"),
             ("safetensors", "Error while deserializing header: {|}InvalidHeaderDeserialization")]),
    F("pickle-truncated", "checkpoint_corruption", ROOT, ["checkpoint_io_failed"],
      r"(?:EOFError|UnpicklingError)[^\n]*(?:Ran out of input|invalid load key|pickle data was truncated)|"
      r"^Ran out of input$|invalid load key, '|pickle data was truncated",
      ["eoferror", "unpicklingerror", "input", "invalid", "truncated"],
      "A pickle stream (an old-format torch checkpoint, an optimizer state) ended early or is not a pickle: the "
      "file is truncated or corrupt.",
      evidence=[("cpython", r"^pickle data was truncated|invalid load key")],
      external="CPython Modules/_pickle.c (Ran out of input)"),
    F("zipfile-corrupt", "checkpoint_corruption", ROOT, ["checkpoint_io_failed"],
      r"File is not a zip file|Bad magic number for (?:file header|central directory)|Truncated file header|"
      r"zipfile\.BadZipFile",
      ["zip", "magic", "truncated", "badzipfile"],
      "Python's zipfile found a truncated or non-zip file (checkpoints and datasets stored as zip archives).",
      evidence=[("cpython", r"^File is not a zip file|^Bad magic number for|^Truncated file header")]),
    F("weights-only-load-failed", "rank_crash", ROOT, ["checkpoint_io_failed"],
      r"Weights only load failed",
      ["weights"],
      "torch.load with weights_only=True (the default since 2.6) refused a checkpoint holding other Python objects.",
      evidence=[("torch", r"^Weights only load failed")]),
    F("resume-checkpoint-missing-warning", "checkpoint_corruption", BENIGN, ["handled"],
      r"Unable to find latest file at \S+, if trying to load latest checkpoint|"
      r"ckpt_path=\"last\"\) is set, but there is no (?:fault tolerant or )?last checkpoint available|"
      r"Didn't find an RNG file",
      ["unable", "ckpt_path", "didn"],
      "A resume found no checkpoint (or no RNG state) and the run goes on from scratch or without it: harmless by "
      "itself, the cause when a later step expects resumed state.",
      evidence=[("deepspeed", r"^Unable to find latest file at"),
                ("lightning", r"ckpt_path=\"last\"\) is set, but there is no"),
                ("transformers", r"^Didn't find an RNG file")]),
    F("checkpoint-path-missing", "checkpoint_corruption", ROOT, ["checkpoint_io_failed"],
      r"No such file or directory: '[^']*(?:checkpoint|ckpt|global_step|\.pth?'|\.bin'|\.safetensors|pytorch_model|"
      r"optimizer|scheduler|rng_state|trainer_state|model_states|optim_states|latest)|"
      r"[Cc]heckpoint (?:file |directory |destination directory )?(?:at )?(?:\S+ )?(?:not found|does not exist)|"
      r"[Cc]heckpoint file not found: |Can't find a valid checkpoint at|Unable to find (?:'latest' |latest )?file at|"
      r"does not appear to have a file named|Error no file named|Tried to find \S+ but folder does not exist|"
      r"checkpoint load path: \S+ does not exist|universal checkpoint: \S+ does not exist",
      ["such", "checkpoint", "unable", "appear", "named", "folder"],
      "A checkpoint file or folder that a resume or load expects is missing (never written, deleted, written on "
      "another node, or cut short by a crash or a full disk before it was complete).",
      evidence=[("lightning", r"^Checkpoint at ⟪[^⟫]*⟫ not found"),
                ("transformers", r"Can't find a valid checkpoint at|does not appear to have a file named|"
                                 r"^Error no file named"),
                ("deepspeed", r"^Unable to find latest file at|checkpoint load path: ⟪[^⟫]*⟫ does not exist"),
                ("accelerate", r"^Tried to find ⟪")],
      joins=[("glibc", "No such file or directory{|}: '{}'", "/ckpt/run/checkpoint-500/optimizer.pt")]),
    F("hf-cant-load-pretrained", "checkpoint_corruption", ROOT, ["checkpoint_io_failed"],
      r"Can't load (?:the )?(?:config(?:uration)?|tokenizer|the model|model|weights|feature extractor|"
      r"image processor)"
      r"(?: for|\b)|Unable to load weights from (?:pytorch|pytorch checkpoint|safetensors) file|"
      r"OSError: [^\n]*is not a (?:local folder and is not a )?valid model identifier",
      ["load", "unable", "valid"],
      "transformers could not load a config, tokenizer or weights from a path or hub id (missing or partial "
      "checkpoint folder, wrong path).",
      evidence=[("transformers", r"^Can't load (?:the )?(?:config|tokenizer|the model|model|weights)|"
                                 r"^Unable to load weights from")]),
    F("checkpoint-layout-mismatch", "checkpoint_corruption", ROOT, ["checkpoint_io_failed"],
      r"The checkpoint being loaded used a DP world size of \d+ but the current world size is|"
      r"configured \d+ optimizers but the checkpoint contains \d+ optimizers|"
      r"checkpoint contains only the model\. This is probably due to",
      ["checkpoint", "configured"],
      "A checkpoint does not fit the run that loads it (another data-parallel size, optimizer count, or weights "
      "only where training state is expected).",
      evidence=[("deepspeed", r"^The checkpoint being loaded used a DP world size"),
                ("lightning", r"optimizers but the checkpoint contains|checkpoint contains only the model")]),

    # ------------------------------------------------------------------ NCCL process group: watchdog, errors
    F("nccl-watchdog-timeout", "collective_timeout", CONSEQUENCE, ["waiting_in_collective"],
      r"Watchdog caught collective operation timeout|timed out in blocking wait|"
      r"Operation timed out after \d+|ran for \d+ milliseconds before timing out",
      ["watchdog", "blocking", "operation", "milliseconds"],
      "A collective on this rank did not complete within the process-group timeout: this rank waited for peers "
      "that did not arrive (or were slow): the cause is usually on another rank.",
      parts=[("torch", r"^Watchdog caught collective operation timeout: $| timed out in blocking wait|"
                       r"^ ran for $| milliseconds before timing out")],
      joins=[("torch", "Watchdog caught collective operation timeout: {|}WorkNCCL({|}SeqNum={}{|}, OpType={}{}{|}, "
                       "Timeout(ms)={}){|} ran for {} milliseconds before timing out."),
             ("torch", "Work {} timed out in blocking wait.")]),
    F("nccl-watchdog-status", "collective_timeout", CONSEQUENCE, ["waiting_in_collective"],
      r"failure detected by watchdog at work sequence id|Timeout at NCCL work: \d+, last enqueued NCCL work|"
      r"last enqueued (?:NCCL )?work: -?\d+, last completed (?:NCCL )?work",
      ["failure", "timeout", "enqueued"],
      "The watchdog's status after a timeout: which work sequence failed and the last enqueued/completed ones.",
      parts=[("torch", r"failure detected by watchdog at work sequence id|PG status: last enqueued work|"
                       r"Timeout at NCCL work|last enqueued NCCL work|last completed NCCL work")],
      joins=[("torch", " failure detected by watchdog at work sequence id: {} PG status: last enqueued work: {}, "
                       "last completed work: {}"),
             ("torch", "Timeout at NCCL work: {}, last enqueued NCCL work: {}, last completed NCCL work: {}.")]),
    F("nccl-dump-on-peer-timeout", "collective_timeout", CONSEQUENCE, ["waiting_in_collective"],
      r"dump signal due to a collective timeout from\s+(?:\S+\s+)?rank|detected a timeout from another rank|"
      r"Observed flight recorder dump signal from another rank",
      ["dump", "detected", "observed"],
      "This rank was told by another rank's watchdog to dump its flight recorder: the timeout was seen elsewhere.",
      parts=[("torch", r"dump signal due to a collective timeout|flight recorder dump signal from another rank")],
      joins=[("torch", "[Rank {}] {|}Received a dump signal due to a collective timeout from {} rank {} {|}and we "
                       "will try our best to dump the debug info.")]),
    F("nccl-heartbeat-monitor", "collective_timeout", CONSEQUENCE, ["waiting_in_collective"],
      r"Heartbeat monitor timed out|watchdog got stuck for \d+ seconds|[Ww]atchdog thread (?:is )?(?:hang|stuck)",
      ["heartbeat", "watchdog"],
      "ProcessGroupNCCL's heartbeat monitor found the watchdog itself stuck (often a CUDA call hung after a "
      "timeout) and aborts the process.",
      parts=[("torch", r"watchdog got stuck for|Heartbeat monitor timed out")],
      joins=[("torch", "ProcessGroupNCCL's watchdog got stuck for {} seconds without making progress in monitoring "
                       "enqueued collectives. ")]),
    F("nccl-remote-error", "nccl_error", CONSEQUENCE, ["peer_gone"],
      r"remote process exited or there was a network error|ncclRemoteError|"
      r"call failed possibly due to a network error or a remote process exiting",
      ["remote", "ncclremoteerror", "network"],
      "NCCL's error for a peer that went away (process exited) or a network failure between them.",
      evidence=[("nccl", r"ncclRemoteError:")],
      joins=[("torch", "remote process exited or there was a network error")]),
    F("nccl-comm-aborted", "collective_timeout", CONSEQUENCE, ["waiting_in_collective"],
      r"NCCL communicator was aborted|Communicators are aborted|ncclCommAbort|[Aa]borting (?:NCCL )?communicator",
      ["nccl", "communicators", "ncclcommabort", "aborting"],
      "The NCCL communicator was torn down after an earlier error or timeout on this rank: what follows is "
      "fallout.",
      parts=[("torch", r"^NCCL communicator was aborted")],
      joins=[("torch", "NCCL communicator was aborted on rank {}.")]),
    F("nccl-system-error", "nccl_error", ROOT, ["crashed"],
      r"unhandled system error|ncclSystemError|System call \(e\.g\. socket, malloc\) or external library call failed",
      ["unhandled", "ncclsystemerror", "system"],
      "An NCCL system call or network library call failed (socket, IB verbs, shared memory): a transport problem on "
      "this node, or a peer that vanished mid-transfer.",
      evidence=[("nccl", r"^ncclSystemError:")],
      joins=[("torch", "unhandled system error")]),
    F("nccl-internal-or-usage-error", "nccl_error", ROOT, ["crashed"],
      r"NCCL error[^\n]*(?:internal error|invalid usage|invalid argument|unhandled cuda error)|"
      r"ncclInternalError|ncclInvalidUsage|ncclInvalidArgument|ncclUnhandledCudaError",
      ["nccl", "ncclinternalerror", "ncclinvalidusage", "ncclinvalidargument", "ncclunhandledcudaerror"],
      "NCCL returned an internal, usage, argument or CUDA error for this rank's call.",
      evidence=[("nccl", r"^nccl(?:InternalError|InvalidUsage|InvalidArgument|UnhandledCudaError):")]),
    F("nccl-error-generic", "nccl_error", ROOT, ["crashed"],
      r"NCCL error in: |NCCL error: |ProcessGroupNCCL\.cpp:\d+, (?!remote)[a-z ]+, NCCL version",
      ["nccl", "processgroupnccl"],
      "torch reported an NCCL error for this rank's communicator (see the NCCL reason in the same line).",
      parts=[("torch", r"^NCCL error in: $|^NCCL error: $")],
      joins=[("torch", "NCCL error in: {}:{}, {}, NCCL version {}")]),
    F("nccl-watchdog-thread-terminated", "collective_timeout", CONSEQUENCE, ["waiting_in_collective"],
      r"(?:NCCL|Process group) watchdog thread terminated with exception|\(Watchdog caught exception: ",
      ["watchdog"],
      "The NCCL watchdog thread ended with an exception (a timeout or a communicator error) and brings the process "
      "down; the quoted exception says which.",
      parts=[("torch", r"watchdog thread terminated with exception|\(Watchdog caught exception: ")],
      joins=[("torch", "[Rank {}{|}] NCCL watchdog thread terminated with exception: {}"),
             ("torch", "[PG {} Rank {}] {|}Process group watchdog thread terminated with exception: {}")]),
    F("nccl-watchdog-frames", "collective_timeout", CONSEQUENCE, ["waiting_in_collective"],
      r"c10d::ProcessGroupNCCL::(?:ncclCommWatchdog|workCleanupLoop|watchdogHandler|WorkNCCL::checkTimeout|"
      r"Watchdog::run|Watchdog::runLoop|HeartbeatMonitor::runLoop)|c10d::ProcessGroupNCCL::WorkNCCL::"
      r"finishedGPUExecutionInternal",
      ["c10d"],
      "C++ stack frames of the NCCL watchdog printed with a timeout or abort: they show where the watchdog was, "
      "not a cause.",
      evidence=[("torch", r"^c10d::ProcessGroupNCCL::(?:ncclCommWatchdog|workCleanupLoop|watchdogHandler|"
                          r"WorkNCCL::checkTimeout|Watchdog::run|HeartbeatMonitor::runLoop)$")]),
    F("nccl-async-error", "nccl_error", ROOT, ["crashed"],
      r"found async exception when checking for NCCL errors|NCCL async error|ncclCommGetAsyncError",
      ["found", "async", "ncclcommgetasyncerror"],
      "The watchdog found an asynchronous NCCL error on this rank's communicator.",
      parts=[("torch", r"found async exception when checking for NCCL errors")]),
    F("desync-report", "collective_timeout", CONSEQUENCE, ["waiting_in_collective"],
      r"finished collective #\d+, but didn't join collective|Not all ranks joining collective|"
      r"is not joining collective|are not joining|completed collective #\d+ on rank",
      ["finished", "joining", "completed"],
      "TORCH_NCCL_DESYNC_DEBUG's report, printed by a waiting rank, naming the ranks that did not join the "
      "collective (those ranks are the culprits).",
      parts=[("torch", r"finished collective #|but didn't join collective|Not all ranks joining collective|"
                       r"not joining collective")],
      joins=[("torch", "[{}] finished collective #{}, but didn't join collective #{} (count from 1)")]),
    F("collective-fingerprint-mismatch", "barrier_skew", ROOT, ["collective_mismatch"],
      r"Detected mismatch between collectives on ranks|is running (?:inconsistent )?collective: "
      r"CollectiveFingerPrint|Collectives differ in the following aspects|CollectiveFingerPrint\(",
      ["detected", "running", "collectives", "collectivefingerprint"],
      "TORCH_DISTRIBUTED_DEBUG=DETAIL compared the collectives the ranks issued and found them different (op, "
      "shape, dtype or sequence): the ranks took different code paths.",
      parts=[("torch", r"Detected mismatch between collectives|CollectiveFingerPrint\(|"
                       r"Collectives differ in the following aspects|is running collective|"
                       r"is running inconsistent collective")],
      joins=[("torch", "Detected mismatch between collectives on ranks. Rank {} is running collective: {|}"
                       "CollectiveFingerPrint({|}SequenceNumber={}{|}, OpType={}{|}, TensorShape=[{}{|}], "
                       "TensorDtypes={}{|}, TensorDeviceTypes={}){|}, but Rank {} is running collective: {}.")]),
    F("gloo-size-mismatch", "barrier_skew", ROOT, ["collective_mismatch"],
      r"op\.preamble\.length <= op\.nbytes|preamble\.length <= op\.nbytes|Mismatch in (?:nbytes|size)|"
      r"collective mismatch error|posted incorrect receive info|message truncated : receiving \d+ bytes instead of",
      ["preamble", "mismatch", "posted", "truncated"],
      "gloo received a message of another size than the local collective expects: the ranks issued different "
      "collectives (or different shapes) at the same point.",
      evidence=[("gloo", r"op\.preamble\.length <= op\.nbytes"),
                ("nccl", r"collective mismatch error|posted incorrect receive info|mismatch in collec")]),

    # ------------------------------------------------------------------ monitored barrier, store, TCPStore
    F("monitored-barrier-rank-failed", "collective_timeout", CONSEQUENCE, ["waiting_in_collective"],
      r"Rank \d+ failed to pass monitoredBarrier in \d+ ms|[Rr]anks? [\d, ]+ failed to pass monitoredBarrier|"
      r"timed out in monitoredBarrier after|No ranks successfully processed in monitoredBarrier",
      ["monitoredbarrier"],
      "monitored_barrier on rank 0 timed out waiting for the named ranks: those ranks did not reach the barrier "
      "(they are the culprits; the printing rank waited).",
      parts=[("torch", r"failed to pass monitoredBarrier in|timed out in monitoredBarrier after|"
                       r"No ranks successfully processed in monitoredBarrier")],
      joins=[("torch", "Rank {} failed to pass monitoredBarrier in {} ms"),
             ("torch", "Rank {} timed out in monitoredBarrier after {} ms.")]),
    F("monitored-barrier-peer-error", "collective_timeout", CONSEQUENCE, ["peer_gone"],
      r"successfully reached monitoredBarrier, but received errors while waiting",
      ["successfully"],
      "A non-zero rank reached monitored_barrier but lost rank 0 while waiting (rank 0 failed first).",
      parts=[("torch", r"successfully reached monitoredBarrier, but received errors")],
      joins=[("torch", "Rank {} successfully reached monitoredBarrier, but received errors while waiting{|} for "
                       "send/recv from rank 0. Please check rank 0 logs for faulty rank.")]),
    F("store-based-barrier-timeout", "collective_timeout", CONSEQUENCE, ["store_wait"],
      r"Timed out initializing process group in store based barrier",
      ["timed"],
      "init_process_group's store barrier gave up: not every rank joined the process group in time (a rank "
      "crashed or never started, or joined another store).",
      evidence=[("torch", r"^Timed out initializing process group in store based barrier")]),
    F("store-based-barrier-wait", "collective_timeout", CONSEQUENCE, ["store_wait"],
      r"Waiting in store based barrier to initialize process group|Rank \d+: Completed store-based barrier for key",
      ["waiting", "completed"],
      "init_process_group waiting in (or finishing) its store barrier for the other ranks to join; printed by "
      "healthy starts too, it is a failure only when the count of joined workers stays short.",
      evidence=[("torch", r"^Waiting in store based barrier to initialize process group|"
                          r"Completed store-based barrier for key")]),
    F("tcpstore-clients-timeout", "collective_timeout", CONSEQUENCE, ["store_wait"],
      r"Timed out after \d+ seconds waiting for clients\. \d+/\d+ clients joined",
      ["timed"],
      "The TCPStore server waited for every client to connect and some never did (a peer did not start or "
      "connected elsewhere).",
      parts=[("torch", r"seconds waiting for clients")],
      joins=[("torch", "Timed out after {} seconds waiting for clients. {}/{} clients joined.")]),
    F("store-wait-timeout", "collective_timeout", CONSEQUENCE, ["store_wait"],
      r"wait timeout after \d+ms, keys:|Socket Timeout|^Wait timeout$|DistStoreError: (?:Timed out|wait timeout)|"
      r"Timeout waiting for key|waitForInput: (?:socket \S+ timed out after \d+ms|poll for socket \S+ returned 0)|"
      r"retr(?:ie|ei)ving ncclUniqueId from \[\d+\] via c10d key-value store",
      ["wait", "socket", "timeout", "diststoreerror", "waitforinput", "retrieving", "retreiving"],
      "A store get/wait gave up waiting for a key that another rank should have set: that rank is missing or "
      "behind.",
      parts=[("torch", r"^wait timeout after |^Socket Timeout$|^waitForInput: socket ⟪\{\}⟫ timed out|returned 0, "
                       r"likely a timeout|via c10d key-value store|^Wait timeout$")],
      joins=[("torch", "wait timeout after {}ms, keys: {}"),
             ("torch", "waitForInput: socket {} timed out after {}ms"),
             ("torch", "[{}{|}] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d "
                       "key-value store by key '{}{|}', but store->get('{}{|}') got error: {|}Socket Timeout")]),
    F("tcpstore-client-connect-timeout", "collective_timeout", CONSEQUENCE, ["store_wait"],
      r"The client socket has timed out after \S+ while trying to connect to|"
      r"TCP client failed to connect/validate to host \S+ - timed out",
      ["client", "tcp", "timed"],
      "A rank could not reach the rendezvous store (MASTER_ADDR:MASTER_PORT) in time: the store host is down, not "
      "yet up, or unreachable.",
      parts=[("torch", r"The client socket has timed out after|TCP client failed to connect/validate to host "
                       r"⟪\{\}⟫:⟪\{\}⟫ - timed out")],
      joins=[("torch", "The client socket has timed out after {} while trying to connect to ({}, {}).")]),
    F("tcpstore-client-connect-retry", "collective_timeout", BENIGN, ["handled"],
      r"The client socket has failed to connect to |TCP client failed to connect/validate to host \S+ - retrying|"
      r"The server socket on \S+ is not yet listening|will retry\.?$|Rendezvous attempt failed, will retry",
      ["client", "server", "retry"],
      "A connection attempt to the store failed and is being retried (the server may simply not be up yet): "
      "harmless unless a timeout follows.",
      parts=[("torch", r"The client socket has failed to connect to|is not yet listening|"
                       r"TCP client failed to connect/validate to host ⟪\{\}⟫:⟪\{\}⟫ - retrying")],
      evidence=[("torch", r"^Rendezvous attempt failed, will retry")],
      joins=[("torch", "The client socket has failed to connect to {} {}.")]),
    F("tcpstore-address-in-use", "rank_crash", ROOT, ["crashed"],
      r"[Aa]ddress already in use|EADDRINUSE|errno: 98\b|The server socket has failed to (?:bind|listen on)",
      ["address", "eaddrinuse", "errno", "server"],
      "The store (or another server) could not bind its port because something already listens there: this "
      "rank's start failed while the others join another store and wait.",
      parts=[("torch", r"The server socket has failed to (?:bind|listen)")],
      joins=[("torch", "address already in use"), ("glibc", "Address already in use"),
             ("torch", "The server socket has failed to listen on any local network address."),
             ("torch", "The server socket has failed to bind to {} (errno: {} - {}).")]),
    F("store-connection-lost", "nccl_error", CONSEQUENCE, ["peer_gone"],
      r"recvValue failed|sendBytes failed|recvBytes failed|recvValueWithTimeout failed|"
      r"Failed to check the \"should dump\" flag on TCPStore|Connection was likely closed",
      ["recvvalue", "sendbytes", "recvbytes", "recvvaluewithtimeout", "failed", "connection"],
      "The connection to the TCPStore server broke: the store host (rank 0 or the agent) exited.",
      parts=[("torch", r"^recvValueWithTimeout failed on|Failed to check the \"should dump\" flag")]),

    # ------------------------------------------------------------------ gloo / sockets
    F("gloo-connect-retry", "nccl_error", BENIGN, ["handled"],
      r"failed to connect, willRetry=1",
      ["willretry"],
      "gloo could not connect a pair yet and will retry (the peer may still be starting): harmless unless the "
      "final attempt (willRetry=0) fails.",
      evidence=[("gloo", r"^failed to connect, willRetry=", "1")]),
    F("gloo-connect-failed", "nccl_error", CONSEQUENCE, ["peer_gone"],
      r"Gloo connectFullMesh failed with|timed out connecting: |failed to connect, willRetry=0|"
      r"\[[^\]]{0,256}gloo[^\]]{0,256}\] Connect timeout",  # bounded: a line of `[` was quadratic
      ["gloo", "timed", "willretry", "connect"],
      "gloo could not connect to a peer while building its mesh (the peer is not listening: it crashed, restarted "
      "or never came up).",
      evidence=[("gloo", r"^failed to connect, willRetry=", "0"), ("gloo", r"Connect timeout")],
      parts=[("torch", r"^timed out connecting: $|^Gloo connectFullMesh failed with $")],
      joins=[("torch", "Gloo connectFullMesh failed with {}{|}timed out connecting: {}")]),
    F("gloo-timeout", "collective_timeout", CONSEQUENCE, ["waiting_in_collective"],
      r"Timed out waiting \S+ms for (?:recv|send) operation to complete|Read timeout \[|Write timeout \[|"
      r"Timed out waiting \d+ms for (?:recv|send)|gloo::EnforceNotMet[^\n]*Timed out",
      ["timed", "timeout"],
      "A gloo send/recv waited longer than the timeout for its peer: this rank waited for another.",
      evidence=[("gloo", r"Timed out waiting ⟪|Read timeout|Write timeout", "[10.0.0.7]:29500")]),
    F("peer-connection-closed", "nccl_error", CONSEQUENCE, ["peer_gone"],
      r"Connection closed by (?:remote )?peer|[Cc]onnection reset by peer|Application timeout caused pair closure|"
      r"\[Errno 104\]|\[Errno 32\] Broken pipe|Broken pipe|peer closed connection|Socket closed",
      ["connection", "application", "errno", "broken", "peer", "socket"],
      "The other end of a collective or store connection went away (process exited or was killed): printed by "
      "the survivors.",
      evidence=[("gloo", r"Connection closed by peer|Application timeout caused pair closure|Socket closed"),
                ("nccl", r"Connection closed by remote peer|Connection reset by peer")],
      joins=[("torch", "Connection closed by peer {}"), ("glibc", "Connection reset by peer"),
             ("glibc", "Broken pipe"), ("torch", "connection reset by peer")]),
    F("connection-refused", "nccl_error", CONSEQUENCE, ["peer_gone"],
      r"[Cc]onnection refused|ECONNREFUSED|\[Errno 111\]|errno: 111\b",
      ["connection", "econnrefused", "errno"],
      "Nothing listened at the peer's address: the peer is not up (yet), or already gone.",
      external="glibc strerror(ECONNREFUSED)",
      joins=[("glibc", "Connection refused"), ("torch", "connection refused")]),
    F("gloo-enforce-fail", "rank_crash", ROOT, ["crashed"],
      r"\[enforce fail at [^\]]*gloo[^\]]*\]|gloo::EnforceNotMet",
      ["enforce", "gloo"],
      "A gloo internal check failed (other than the size mismatch and timeout families).",
      evidence=[("gloo", r"^\[enforce fail at ⟪FILE[^⟫]*⟫\] (?!op\.preamble\.length <= op\.nbytes)")],
      joins=[]),

    # ------------------------------------------------------------------ NCCL WARN lines (NCCL_DEBUG)
    F("nccl-net-ib-completion-error", "nccl_error", ROOT, ["crashed"],
      r"NET/IB(?:/GIN)? ?: Got completion (?:from peer \S+ )?with (?:status|error)[= ]|"
      r"NET/IB : Got async event|NET/IB ?: .*(?:wc\.status|IBV_WC_)",
      ["net"],
      "An InfiniBand/RoCE work completion failed (retry exceeded, flush): the fabric or the peer's HCA failed; when "
      "the peer process died first, the flush errors follow it.",
      evidence=[("nccl", r"^NET/IB(?:/GIN)? ?: Got completion|^NET/IB : Got async")]),
    F("nccl-net-socket-error", "nccl_error", CONSEQUENCE, ["peer_gone"],
      r"NET/Socket ?: (?:[Cc]all to|recv|send|socket progress error)|Call to recv failed|"
      r"socketProgress(?:Opt)?: Connection (?:closed|reset)|Net : Connection closed by remote peer|"
      r"Call to recv from \S+ failed",
      ["socket", "recv", "socketprogress", "socketprogressopt", "remote"],
      "An NCCL socket transfer failed or the connection closed (usually the peer process died), or message sizes "
      "disagree across ranks.",
      evidence=[("nccl", r"^NET/Socket ?: (?:[Cc]all to|recv|send|socket progress error)|"
                         r"^socketProgress(?:Opt)?: Connection|^Net : Connection closed by remote peer|^Call to recv")]),
    F("nccl-proxy-error", "nccl_error", CONSEQUENCE, ["peer_gone"],
      r"\[Proxy Service \d+\] Failed to execute operation|Socket recv failed while polling for opId|"
      r"\[Service thread\] Error encountered progressing operation|\[Proxy Service\] Poll failed",
      ["proxy", "service", "socket"],
      "NCCL's proxy thread (which drives the network) failed an operation, usually because a peer disconnected.",
      evidence=[("nccl", r"^\[Proxy Service ⟪%d⟫\] Failed to execute operation|\[Service thread\] Error "
                         r"encountered progressing|Proxy Service\] Poll failed|Socket recv failed while polling")]),
    F("nccl-bootstrap-error", "nccl_error", ROOT, ["crashed"],
      r"Bootstrap ?: no socket interface found|bootstrap(?:Root|Net)?[^\n]*(?:failed|Connection)|"
      r"NET/Socket : No usable listening interface|Unable to establish connection|"
      r"Bootstrap Root : mismatch in rank count",
      ["bootstrap", "bootstraproot", "bootstrapnet", "net", "unable"],
      "NCCL could not set up its bootstrap network (no usable interface, connect failures, rank count mismatch) "
      "when creating a communicator.",
      evidence=[("nccl", r"^Bootstrap ?: no socket interface|^Bootstrap Root : mismatch in rank count|"
                         r"^NET/Socket : No usable listening interface")]),
    F("nccl-cuda-failure", "rank_crash", ROOT, ["crashed"],
      r"NCCL WARN Cuda failure|Cuda failure '(?!out of memory)[^']+'|Cuda failure \d+ '(?!out of memory)",
      ["nccl", "cuda"],
      "A CUDA call inside NCCL failed (other than out-of-memory): the GPU or an earlier kernel on it failed.",
      evidence=[("nccl", r"^Cuda failure")]),

    # ------------------------------------------------------------------ CUDA runtime errors
    F("cuda-ecc-error", "gpu_hardware", ROOT, ["crashed"],
      r"uncorrectable ECC error encountered|ECC error|cudaErrorECCUncorrectable|CUDA_ERROR_ECC_UNCORRECTABLE",
      ["uncorrectable", "ecc", "cudaerroreccuncorrectable", "cuda_error_ecc_uncorrectable"],
      "The GPU reported an uncorrectable memory (ECC) error: a hardware fault.",
      joins=[("cudart", "uncorrectable ECC error encountered")]),
    F("cuda-fell-off-bus", "gpu_hardware", ROOT, ["crashed"],
      r"fallen off the bus|GPU is lost|unspecified launch failure|CUDA error: (?:an )?unknown error|"
      r"Unable to determine the device handle for GPU|"
      r"cudaErrorLaunchFailure|GPU has fallen off|no CUDA-capable device is detected|CUDA error: device not ready",
      ["fallen", "lost", "unspecified", "cuda", "cudaerrorlaunchfailure", "handle", "capable"],
      "The GPU stopped answering (fell off the bus, launch failure, unknown error): usually a hardware, driver or "
      "power fault on that node.",
      joins=[("cudart", "unspecified launch failure"), ("cudart", "no CUDA-capable device is detected")]),
    F("nvidia-xid", "gpu_hardware", ROOT, ["crashed"],
      r"NVRM: Xid \(PCI:[0-9a-fA-F:.]+\): \d+|PCIe Bus Error: severity=(?:Uncorrected|Fatal)|"
      r"AER: (?:Uncorrected|Fatal) error",
      ["nvrm", "pcie", "aer"],
      "The kernel driver logged a GPU Xid event or an uncorrected PCIe error for a device: a hardware or driver "
      "fault on that node (which Xid says what).",
      external="NVIDIA kernel driver (NVRM Xid), Linux PCIe AER (dmesg)"),
    F("cuda-illegal-address", "rank_crash", ROOT, ["crashed"],
      r"an illegal memory access was encountered|misaligned address|device-side assert triggered|"
      r"illegal instruction was encountered|cudaErrorIllegalAddress|CUDA error: an illegal",
      ["illegal", "misaligned", "device", "cudaerrorillegaladdress", "cuda"],
      "A kernel on this rank faulted (illegal address, device-side assert such as an out-of-range index): a "
      "software bug surfaced on the GPU.",
      joins=[("cudart", "an illegal memory access was encountered"), ("cudart", "device-side assert triggered"),
             ("cudart", "misaligned address")]),

    # ------------------------------------------------------------------ DDP / FSDP misuse
    F("ddp-unfinished-reduction", "ddp_usage_error", ROOT, ["ddp_misuse"],
      r"Expected to have finished reduction in the prior iteration|"
      r"Parameter(?: indice)?s which did not receive grad for rank",
      ["expected", "parameter", "parameters"],
      "DDP's reducer found parameters that got no gradient in the previous step (unused parameters without "
      "find_unused_parameters=True, or a graph that changes between steps).",
      parts=[("torch", r"^Expected to have finished reduction in the prior iteration|did not receive grad for "
                       r"rank $")]),
    F("ddp-mark-ready-twice", "ddp_usage_error", ROOT, ["ddp_misuse"],
      r"Expected to mark a variable ready only once",
      ["expected"],
      "A parameter's gradient hook fired twice in one backward (reentrant checkpointing, a module used twice, "
      "or shared parameters) under DDP.",
      parts=[("torch", r"^Expected to mark a variable ready only once")]),
    F("ddp-model-mismatch", "ddp_usage_error", ROOT, ["ddp_misuse"],
      r"DDP expects same model across all ranks|appears not to match (?:sizes|strides) of the same param in "
      r"process 0|params\[\d+\] in this process with sizes",
      ["ddp", "appears", "params"],
      "DDP's construction check found the model differs between ranks (parameter count, shapes or strides).",
      parts=[("torch", r"^DDP expects same model across all ranks, but Rank $")],
      evidence=[("torch", r"appears not to match")],
      joins=[("torch", "DDP expects same model across all ranks, but Rank {} has {} params, while rank {} has "
                       "inconsistent {} params.")]),
    F("ddp-find-unused-no-unused", "ddp_usage_error", BENIGN, ["none"],
      r"find_unused_parameters=True was specified in DDP constructor, but did not find any unused parameters|"
      r"Grad strides do not match bucket view strides",
      ["find_unused_parameters", "strides"],
      "DDP performance warnings (an unneeded find_unused_parameters, gradient layout mismatch): harmless.",
      parts=[("torch", r"^find_unused_parameters=True was specified in DDP constructor|"
                       r"Grad strides do not match bucket view strides")]),
    F("fsdp-usage-error", "ddp_usage_error", ROOT, ["ddp_misuse"],
      r"FSDP (?:only supports|does not support|doesn't support|requires)|An FSDP-managed module|"
      r"Expects (?:the )?(?:flat parameter|FlatParameter)",
      ["fsdp", "xlafsdp", "flat", "flatparameter"],
      "FSDP refused a configuration or state it does not support (wrapping, parameter or state-dict usage).",
      evidence=[("torch", r"^FSDP (?:only supports|does not support|doesn't support|requires)|"
                          r"^An FSDP-managed module")]),

    # ------------------------------------------------------------------ GradScaler, autograd context
    F("gradscaler-no-inf-checks", "rank_crash", ROOT, ["crashed"],
      r"No inf checks were recorded (?:for this optimizer|prior to update)|"
      r"unscale_\(\) has already been called on this optimizer",
      ["checks", "unscale_"],
      "GradScaler misuse: step() without gradients recorded for the optimizer, or unscale_ called twice.",
      evidence=[("torch", r"^No inf checks were recorded|^unscale_\(\) has already been called")]),
    F("anomaly-error-context", "rank_crash", ROOT, ["crashed"],
      r"Error detected in \w+Backward\w*\. Traceback of forward call that caused the error|"
      r"Traceback of forward call that caused the error",
      ["detected", "forward"],
      "Autograd anomaly mode prints the forward traceback of the op whose backward failed; the error that follows "
      "says what failed.",
      parts=[("torch", r"Traceback of forward call that caused the error|^Error detected in $")],
      joins=[("torch", "Error detected in {}. {|}Traceback of forward call that caused the error:")]),

    # ------------------------------------------------------------------ launchers: elastic/torchrun, DeepSpeed, Lightning
    F("elastic-child-failed", "rank_crash", CONSEQUENCE, ["launcher_summary"],
      r"ChildFailedError|Root Cause \(first observed failure\)|<NO_OTHER_FAILURES>|"
      r"failed \(exitcode: -?\d+\) local_rank: \d+ \(pid: \d+\) of (?:binary|fn)",
      ["childfailederror", "root", "no_other_failures", "failed"],
      "torchrun's summary of the ranks that failed: it reports (and may misattribute) a failure, it is not one.",
      evidence=[("torch", r"failed \(exitcode: ⟪|Root Cause \(first observed failure\)|NO_OTHER_FAILURES|"
                          r"^⟪[^⟫]*⟫ FAILED$")],
      joins=[]),
    F("elastic-sigterm-workers", "rank_crash", CONSEQUENCE, ["launcher_terminated"],
      r"Sending process \S+ closing signal \S+|Closing process \S+ via signal \S+|"
      r"Unable to shutdown process \S+ via \S+ ?, forcefully exit+ing via|Terminating process \d+ via signal",
      ["sending", "closing", "unable", "terminating"],
      "The launcher is stopping the remaining workers after one failed (or after it was signalled).",
      evidence=[("torch", r"^Sending process ⟪[^⟫]*⟫ closing signal|^Closing process ⟪[^⟫]*⟫ via signal|"
                          r"^Unable to shutdown process")]),
    F("elastic-signal-received", "rank_crash", CONSEQUENCE, ["launcher_terminated"],
      r"SignalException: Process \d+ got signal: \d+|Received \S+ death signal, shutting down workers|"
      r"got signal: \d+|Got termination signal: \S+",
      ["signalexception", "received", "got"],
      "The launcher itself received a signal (scheduler preemption, timeout, Ctrl-C) and shuts its workers down.",
      evidence=[("torch", r"got signal: ⟪|death signal, shutting down workers|^Got termination signal")]),
    F("elastic-exit-barrier", "collective_timeout", CONSEQUENCE, ["store_wait"],
      r"Error waiting on exit barrier\. Elapsed: \S+ seconds",
      ["barrier"],
      "A node's agent finished its workers but the other nodes did not reach the exit barrier in time: they are "
      "still running or stuck.",
      evidence=[("torch", r"^Error waiting on exit barrier")]),
    F("elastic-worker-group-restart", "rank_crash", CONSEQUENCE, ["launcher_summary"],
      r"Worker group (?:failed|FAILED)|\[\S{1,256}\] Worker group FAILED\. \d+/\d+ attempts left|"
      r"Rendezvous'ing worker group|will restart worker group|Stopping worker group",
      ["worker", "rendezvous", "will", "stopping"],
      "torch elastic reports a failed worker group and its restart attempts.",
      evidence=[("torch", r"Worker group (?:FAILED|failed)|attempts left; will restart worker group|"
                          r"^Stopping worker group")]),
    F("elastic-rendezvous-timeout", "collective_timeout", CONSEQUENCE, ["store_wait"],
      r"RendezvousTimeoutError|The node '[^']+' can't complete rendezvous|"
      r"timed out while waiting for participants|Rendezvous timeout|RendezvousClosedError|"
      r"The rendezvous '[^']*' has been closed",
      ["rendezvoustimeouterror", "the", "timed", "rendezvous", "rendezvousclosederror"],
      "The elastic rendezvous did not gather the expected nodes in time, or was closed: a node did not come.",
      evidence=[("torch", r"timed out while waiting for participants|can't complete rendezvous|"
                          r"rendezvous '⟪[^⟫]*⟫' has been closed|^Rendezvous timeout")]),
    F("deepspeed-launcher-kill", "rank_crash", CONSEQUENCE, ["launcher_summary"],
      r"Killing subprocess \d+|exits with return code = -?\d+|Main process received \S+, exiting",
      ["killing", "exits", "exiting"],
      "DeepSpeed's launcher saw a rank exit and kills the others (or was signalled): a summary, not a cause.",
      evidence=[("deepspeed", r"^Killing subprocess|exits with return code|Main process received")]),
    F("lightning-sigterm", "rank_crash", CONSEQUENCE, ["launcher_terminated"],
      r"Received SIGTERM: |SIGTERMException|\[rank: \d+\] Received SIGTERM|"
      r"Handling signal: SIG\w+|Trainer was signaled to stop",
      ["received", "sigtermexception", "handling", "trainer"],
      "Lightning caught SIGTERM (sent by the launcher or the scheduler) and stops: the trigger is elsewhere.",
      evidence=[("lightning", r"^Received SIGTERM|Trainer was signaled to stop")]),
    F("lightning-deadlock-detected", "rank_crash", CONSEQUENCE, ["peer_gone"],
      r"DeadlockDetectedException|DeadLock detected from rank: \d+",
      ["deadlockdetectedexception", "deadlock"],
      "Lightning saw a rank raise while others would wait, and terminates all processes to avoid a hang; the "
      "named rank's exception is the cause.",
      evidence=[("lightning", r"DeadLock detected from rank")]),
    F("mp-spawn-process-failed", "rank_crash", CONSEQUENCE, ["launcher_summary"],
      r"process \d+ terminated with (?:exit code -?\d+|signal \S+)|-- Process \d+ terminated with the following "
      r"error|ProcessExitedException|ProcessRaisedException",
      ["terminated", "processexitedexception", "processraisedexception"],
      "torch.multiprocessing.spawn's report that a child process died or raised: it re-raises the child's failure "
      "(the child's own traceback, printed below it, is the cause).",
      evidence=[("torch", r"terminated with (?:exit code|signal|the following error)")]),
    F("subprocess-nonzero-exit", "rank_crash", CONSEQUENCE, ["launcher_summary"],
      r"CalledProcessError: Command '[^\n]*' (?:returned non-zero exit status -?\d+|died with <Signals)|"
      r"returned non-zero exit status -?\d+|Command '[^\n]*' died with ",
      ["calledprocesserror", "returned", "died"],
      "A launcher (accelerate, a wrapper script) reports that its child command failed: a summary of a failure "
      "printed earlier by the child.",
      evidence=[("cpython", r"returned non-zero exit status|died with ⟪")]),
    F("process-killed-signal", "host_oom", ROOT, ["killed_from_outside"],
      r"^(?:\S+: )?(?:line \d+: +\d+ )?Killed(?:\s+\S.*)?$|exitcode\s*:\s*-9\b|exit code -9\b|"
      r"Signals\.SIGKILL|signal 9 \(SIGKILL\)|died with <Signals\.SIGKILL",
      ["killed", "exitcode", "exit", "sigkill", "signal"],
      "A process was killed with SIGKILL (exit -9) with no Python traceback: from outside (the OOM killer most "
      "often, or a scheduler/launcher).",
      external="bash job control ('Killed'), torch elastic exit codes"),
    F("fatal-signal", "rank_crash", ROOT, ["fatal_signal"],
      r"Segmentation fault|Bus error|Aborted \(core dumped\)|Fatal Python error|"
      r"SIGSEGV|SIGBUS|SIGABRT|exitcode\s*:\s*-(?:6|7|11)\b|signal 11|\*\*\* Received signal",
      ["segmentation", "bus", "aborted", "fatal", "sigsegv", "sigbus", "sigabrt", "exitcode", "signal"],
      "The process died of a fatal signal (segfault, bus error, abort) or the interpreter's fatal error.",
      external="CPython faulthandler, bash job control, torch elastic exit codes"),
]

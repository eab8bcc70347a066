"""Whether an input looks like the output of a training job at all (a passwd file gives no verdict worth a number)."""
from __future__ import annotations

import re

# Event kinds that ordinary non-training text also produces ("Generating locales..." reads as a sample phase).
WEAK_EVENT_KINDS = frozenset({"config", "sample_start", "eval_start"})
# Inputs whose kind alone says a job or its machine wrote them.
JOB_SOURCE_KINDS = frozenset({"collect_manifest", "nccl_log", "pyspy", "pyspy_json", "nvidia_smi", "dmesg",
                              "torchrun_error", "flight_recorder", "stack_dump", "host_memory"})
NOT_TRAINING_SUMMARY = ("Nothing in the input looks like a training job's output: no step, rank, launcher, NCCL, "
                        "traceback or stack-dump line was found, so there is nothing to judge. Point postmortem at "
                        "the job's logs, or run the job under `postmortem collect`.")
NOT_TRAINING_CONFIDENCE = 0.1


# Words of a training job's output; a file with a few of them is a training log postmortem may not read yet, and
# must not be called "not a training log" (icefall's `(5/8) Computing validation loss` has no known rank or step).
_TRAINING_WORDS = re.compile(rb"(?i)\b(loss|epoch|step|steps|train|training|rank|torch|cuda|nccl|gpu|batch|traceback|"
                             rb"optimizer|model|dataset|dataloader|checkpoint|learning_rate|lr|iteration|iter|validation|"
                             rb"eval|accelerate|deepspeed|lightning|wandb|tensorboard|ddp|fsdp|distributed|c10d|backward|forward|grad|"
                             rb"grads|gradient|gradients|autograd|tensor|tensors|pytorch|reducer|cudnn|fp16|bf16|amp|megatron|"
                             rb"slurm|srun|mpirun|horovod|ray|rocm|hip|rccl|gloo|worker|workers|weights|param|params|"
                             rb"parameters)\b")
HEAD_BYTES = 65536
MAX_FILES_READ = 32


def _has_training_words(paths) -> bool:
    """At least two different training words in the first bytes of the input files (a bounded read): a pasted
    warning of a few lines ('Grad strides do not match bucket view strides ... torch/csrc/distributed') is a job's."""
    seen: set[bytes] = set()
    from postmortem.ingest.textio import read_head
    for path in list(paths)[:MAX_FILES_READ]:
        head = read_head(path, HEAD_BYTES)  # (a gzipped log's words are in its decompressed text)
        seen |= {m.lower() for m in _TRAINING_WORDS.findall(head)}
        if len(seen) >= 2:
            return True
    return False


def looks_like_training(tables, paths=()) -> bool:
    """True when any table holds something a training job (or its launcher, GPUs, kernel) wrote, or the files
    (`paths`) use a training job's words."""
    frames = tables.frames
    for name in ("steps", "tracebacks", "stacks", "collectives", "gpu", "nccl"):
        df = frames.get(name)
        if df is not None and len(df):
            return True
    if tables.meta.get("ranks_seen"):
        return True
    ev = frames.get("events")
    if ev is not None and len(ev) and (~ev["kind"].isin(list(WEAK_EVENT_KINDS))).any():
        return True
    src = frames.get("sources")
    if src is not None and len(src) and src["kind"].isin(list(JOB_SOURCE_KINDS)).any():
        return True
    return _has_training_words(paths)

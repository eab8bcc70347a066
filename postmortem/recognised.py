"""Whether an input looks like the output of a training job at all (a passwd file gives no verdict worth a number)."""
from __future__ import annotations

# Event kinds that ordinary non-training text also produces ("Generating locales..." reads as a sample phase).
WEAK_EVENT_KINDS = frozenset({"config", "sample_start", "eval_start"})
# Inputs whose kind alone says a job or its machine wrote them.
JOB_SOURCE_KINDS = frozenset({"collect_manifest", "nccl_log", "pyspy", "pyspy_json", "nvidia_smi", "dmesg",
                              "torchrun_error", "flight_recorder", "stack_dump", "host_memory"})
NOT_TRAINING_SUMMARY = ("Nothing in the input looks like a training job's output: no step, rank, launcher, NCCL, "
                        "traceback or stack-dump line was found, so there is nothing to judge. Point postmortem at "
                        "the job's logs, or run the job under `postmortem collect`.")
NOT_TRAINING_CONFIDENCE = 0.1


def looks_like_training(tables) -> bool:
    """True when any table holds something a training job (or its launcher, GPUs, kernel) wrote."""
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
    return bool(src is not None and len(src) and src["kind"].isin(list(JOB_SOURCE_KINDS)).any())

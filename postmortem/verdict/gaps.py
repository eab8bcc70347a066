"""Evidence gaps: what was missing that would have settled the question, and how to collect it next time."""
from __future__ import annotations

import re

HANG_CATEGORIES = {"collective_timeout", "straggler", "barrier_skew", "logging_blocking", "unknown", "dataloader_failure"}
# Failures the flight recorder speaks to: ranks that stopped meeting in collectives (a DataLoader worker's death is
# not one: its stacks and the worker's exit say more)
FR_CATEGORIES = HANG_CATEGORIES - {"dataloader_failure"}


def _gloo_only(tables) -> bool:
    """True when the job's collectives ran on gloo (its transport errors or a gloo FR entry) and NCCL printed nothing."""
    if len(tables.nccl):
        return False
    ev = tables.events
    if not len(ev):
        return False
    msgs = ev["message"].astype(str)
    return bool(msgs.str.contains("gloo", regex=False).any()) and not msgs.str.contains("NCCL", regex=False).any()


def evidence_gaps(tables, verdict) -> list[dict]:
    """List missing evidence given the tables and the verdict (empty when nothing useful is missing)."""
    gaps: list[dict] = []
    cat = verdict.category if verdict else None
    kinds = set(tables.sources["kind"]) if len(tables.sources) else set()
    ev_kinds = set(tables.events["kind"]) if len(tables.events) else set()
    from postmortem.verdict.stall_gap import stall_gap
    stall = stall_gap(tables) if cat in HANG_CATEGORIES else None
    if stall is not None:  # the collector ran, and its stall delay outlasted the hang
        gaps.append(stall)
    elif cat in HANG_CATEGORIES and tables.stacks.empty:
        gaps.append({"missing": "py-spy dumps of every rank",
                     "why": "Stacks show exactly where each rank was when the job hung; without them the waiting "
                            "rank's activity is inferred from its last log line.",
                     "how": "for p in $(pgrep -f train.py); do py-spy dump --pid $p > pyspy_$p.txt; done  "
                            "(or run the job under `postmortem collect`)"})
    collector_env = tables.meta.get("collector_env") or {}
    fr_on = any(k in collector_env for k in ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"))
    if (cat in HANG_CATEGORIES or cat in ("nccl_error", "collective_timeout")) and "flight_recorder" not in kinds and fr_on:
        gaps.append({"missing": "flight-recorder traces",
                     "why": "postmortem collect enabled the flight recorder, but no dump was written: gloo (CPU) "
                            "process groups do not dump on timeout, and NCCL dumps only on a watchdog timeout.",
                     "how": "call torch._C._distributed_c10d._dump_fr_trace_json(True, True) from a timeout handler, "
                            "or reproduce on the NCCL backend"})
    elif (cat in FR_CATEGORIES or cat in ("nccl_error", "collective_timeout")) and "flight_recorder" not in kinds:
        gloo = _gloo_only(tables)
        gaps.append({"missing": "flight-recorder traces",
                     "why": "They record the last collectives of every rank (seq, op, sizes, state), which names "
                            "the lagging or mismatched rank directly."
                            + (" This job used gloo, whose process groups record but do not dump on a timeout."
                               if gloo else ""),
                     "how": ("export TORCH_FR_BUFFER_SIZE=2000, and on the timeout call "
                             "torch._C._distributed_c10d._dump_fr_trace_json(True, True) and write what it returns "
                             "to $LOGDIR/fr_rank_<rank>.json (or run the job under `postmortem collect`)") if gloo else
                            "export TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_TRACE_BUFFER_SIZE=2000 "
                            "TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_DUMP_TEMP_FILE=$LOGDIR/fr_rank_  "
                            "(a path prefix: each rank appends its rank number)"})
    if cat in ("nccl_error", "collective_timeout", "gpu_hardware") and tables.nccl.empty:
        gaps.append({"missing": "NCCL debug output",
                     "why": "NCCL WARN lines name the failing transport, peer and CUDA error behind 'unhandled "
                            "system error' and similar summaries.",
                     "how": "export NCCL_DEBUG=INFO NCCL_DEBUG_FILE=$LOGDIR/nccl.%h.%p"})
    if cat in ("gpu_oom", "gpu_hardware") and tables.gpu.empty:
        gaps.append({"missing": "nvidia-smi history",
                     "why": "Memory per GPU over time shows whether usage grew steadily or jumped at a phase change.",
                     "how": "nvidia-smi --query-gpu=timestamp,index,memory.used,memory.total,utilization.gpu "
                            "--format=csv -l 5 > $LOGDIR/nvidia-smi.csv &"})
    if cat == "host_oom" and "dmesg" not in kinds and "host_oom" not in ev_kinds:
        gaps.append({"missing": "kernel log",
                     "why": "The OOM killer's line names the killed pid and its memory, confirming a host OOM.",
                     "how": "dmesg -T | tail -n 200 > $LOGDIR/dmesg.txt  (or journalctl -k)"})
    ws, seen = tables.meta.get("world_size"), tables.meta.get("ranks_seen", [])
    if ws and len(seen) < ws and cat not in (None, "no_failure"):
        missing = [r for r in range(int(ws)) if r not in seen][:16]
        gaps.append({"missing": f"logs of ranks {missing}",
                     "why": f"Only {len(seen)} of {ws} ranks left lines that name their rank; a silent rank is "
                            "often the culprit.",
                     "how": "torchrun --log-dir $LOGDIR --tee 3 ... (keeps every rank's stdout/stderr in its own file)"})
    if not tables.events["ts"].notna().any() and cat not in (None, "no_failure") and len(tables.events) \
            and not lines_carry_times(tables):
        gaps.append({"missing": "timestamps on log lines",
                     "why": "Without times the order of events across ranks is inferred from log positions.",
                     "how": "logging.basicConfig(format='%(asctime)s %(message)s') or pipe through `ts` (moreutils)"})
    gaps.extend(_verdict_gaps(tables, verdict))
    gaps.extend(bundle_gaps(tables.meta, cat))
    return gaps


# Dates and clock times as log lines write them (06/12/2025 09:12:05, 2025-06-12T09:12:05, Jun 12 09:12:05, [09:12:05]).
_TIME_TEXT = re.compile(r"\b\d{1,4}[/.-]\d{1,2}[/.-]\d{1,4}[ T_]+\d{1,2}:\d\d:\d\d|"
                        r"\b[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d|(?:^|[\[ ])\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[\] ]|$)")


def lines_carry_times(tables, sample: int = 200) -> bool:
    """True when the log lines show a date or clock time even though none was parsed into `ts` (then asking for
    timestamps would ask for what the input already has)."""
    ev = tables.events
    messages = ev["message"].dropna().astype(str).head(sample) if len(ev) else []
    return any(_TIME_TEXT.search(m) for m in messages)


def _verdict_gaps(tables, verdict) -> list[dict]:
    """What would name the cause of an unexplained failure, or show a failure behind a hedged 'no failure'."""
    cat = verdict.category if verdict else None
    out = []
    kinds = set(tables.sources["kind"]) if len(tables.sources) else set()
    if cat == "unknown" or (cat == "no_failure" and verdict.confidence < 0.6):
        if "dmesg" not in kinds:
            out.append({"missing": "kernel log of every node",
                        "why": "A process that dies without a Python traceback (SIGKILL by the OOM killer, SIGSEGV, "
                               "SIGBUS, a GPU Xid) leaves its reason only in the kernel log.",
                        "how": "dmesg -T | tail -n 300 > $LOGDIR/dmesg.$(hostname).txt  (or journalctl -k --since ...)"})
        if not len(tables.events) or not (tables.events["kind"].isin(["torchrun_failure", "exit"])).any():
            out.append({"missing": "the launcher's exit summary and each rank's full stderr",
                        "why": "The exit code or signal of every rank, and the first traceback, are what a cause "
                               "is read from; a posted excerpt or a terminal scrollback cuts them off.",
                        "how": "torchrun --log-dir $LOGDIR --redirects 3 --tee 3 ... and keep error.json "
                               "(TORCHELASTIC_ERROR_FILE); or run the job under `postmortem collect`"})
        if cat == "unknown" and "faulthandler" not in " ".join(kinds):
            out.append({"missing": "Python stacks at the moment of the crash or hang",
                        "why": "faulthandler prints every thread's stack on a fatal signal; py-spy shows where a "
                               "hung rank waits.",
                        "how": "PYTHONFAULTHANDLER=1 python train.py ...; on a hang: py-spy dump --pid PID"})
    return out


def bundle_gaps(meta: dict, cat: str | None) -> list[dict]:
    """Say so when files of several jobs were found, or timestamps of several hosts were compared."""
    out = []
    note = (meta.get("jobs") or {}).get("note")
    if note:
        out.append({"missing": "logs of a single job",
                    "why": note[:1].upper() + note[1:],
                    "how": "put each job's logs in its own directory (torchrun --log-dir $LOGDIR/$RUN_ID) and "
                           "analyse one directory at a time"})
    if meta.get("clock_note") and cat not in (None, "no_failure"):
        out.append({"missing": "synchronised clocks across hosts",
                    "why": meta["clock_note"][:1].upper() + meta["clock_note"][1:],
                    "how": "run chrony/NTP on every node and log in UTC (e.g. logging.Formatter.converter = "
                           "time.gmtime), or compare hosts by step number instead of wall-clock time"})
    return out

"""Memory rules: GPU OOM (with the phase it happened in), host OOM / OOM killer, DataLoader worker deaths."""
from __future__ import annotations

from itertools import islice

import pandas as pd

from postmortem.verdict.findings import Evidence, Finding
from postmortem.verdict.sentences import clip, ranks_phrase, sentence_case
from postmortem.rules import facts, rule
from postmortem.rules.phase import infer_phase

ALLOCATOR_GROUPS = ("dev", "kernel", "thc", "thc2", "req2", "cublas")   # Python-side OOMs (NCCL's own are nccl_error evidence)


def _python_ooms(tables) -> pd.DataFrame:
    oom = facts.fatal(tables, facts.ev(tables, "oom"))
    if oom.empty:
        return oom
    return oom[[any(g in a for g in ALLOCATOR_GROUPS) for a in oom["details"]]]


def _tb_for(tables, row) -> pd.Series | None:
    """The traceback that carries an OOM line: same source, ending at (or just after) the OOM line."""
    tb = tables.tracebacks
    if tb.empty:
        return None
    same = tb[(tb["source"] == row["source"]) & (tb["end_line"] >= row["line"] - 2) & (tb["line"] <= row["line"] + 2)]
    if len(same):
        return same.iloc[0]
    near = tb[(tb["source"] == row["source"]) & (tb["line"] <= row["line"]) & (tb["end_line"] >= row["line"] - 40)]
    return near.iloc[-1] if len(near) else None


@rule(id="gpu-oom", title="CUDA out of memory", category="gpu_oom", severity="critical",
      description="A CUDA allocator (or kernel) out-of-memory error; the phase (train, eval, sample, checkpoint) is "
                  "inferred from the traceback frames, the phase markers before it, the step of death against the "
                  "periods echoed in the config, batch-size echoes and the size of the failed allocation.",
      remediation="Reduce the batch of the phase that failed (e.g. sample/eval batch size), wrap eval/sampling in "
                  "torch.no_grad(), free training tensors before the pass (torch.cuda.empty_cache()), or set "
                  "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True when reserved >> allocated.",
      references=("https://pytorch.org/docs/stable/notes/cuda.html#memory-management",),
      false_positives=("An OOM caught and handled by the program (e.g. batch-size search) that did not end the job.",))
def gpu_oom(tables):
    ooms = _python_ooms(tables)
    if ooms.empty:
        return []
    ooms = ooms.assign(_k=facts.order_keys(ooms)).sort_values("_k")
    first = ooms.iloc[0]
    culprit = [int(first["rank"])] if pd.notna(first["rank"]) else []
    tb_row = _tb_for(tables, first)
    if not culprit and tb_row is not None and pd.notna(tb_row["rank"]):
        culprit = [int(tb_row["rank"])]
    steps = facts.last_step_per_rank(tables)
    step = steps.get(culprit[0]) if culprit else (max(steps.values()) if steps else None)
    if step is None:  # the culprit's own steps are unknown: the job's step where its OOM line sits
        step = facts.step_before(tables, first["source"], first["line"])
    detail = facts.ev(tables, "oom_detail")
    detail = detail[(detail["source"] == first["source"]) & (abs(detail["line"] - first["line"]) <= 2)]
    guess = infer_phase(tables, first, tb_row, step, detail.iloc[0]["details"] if len(detail) else None)
    conf = 0.55 + 0.4 * guess.strength if guess.phase != "unknown" else 0.5
    oom_ranks = facts.ranks_of(ooms)
    evidence = [Evidence(first["source"], int(first["line"]), culprit[0] if culprit else None,
                         str(first["message"])[:400])]
    if tb_row is not None:
        evidence.append(facts.tb_evidence(tb_row))
    cfg = facts.ev(tables, "config")
    # The first three sizing echoes are cited: a big job echoes its config once per rank, no need to test them all.
    sizing = islice((i for i, a in enumerate(cfg["details"])
                     if any(w in a.get("key", "") for w in ("batch", "period", "every"))), 3)
    evidence += facts.evidence_from(cfg.iloc[list(sizing)], 3)
    why = "; ".join(guess.signals) if guess.signals else "no signal places it in a phase"
    phase_txt = {"train": "during a training step", "eval": "during evaluation/validation",
                 "sample": "during sampling/generation", "checkpoint": "while saving a checkpoint",
                 "init": "during setup", "unknown": "in an undetermined phase"}[guess.phase]
    others = [r for r in facts.world_ranks(tables) if r not in culprit]
    return [Finding(
        rule="gpu-oom", category="gpu_oom", phase=guess.phase, confidence=conf, severity="critical",
        title=f"CUDA out of memory {phase_txt}" + (f" on rank {culprit[0]}" if culprit else ""),
        explanation=(f"{ranks_phrase(culprit[:1], True, 'A rank')} ran out of GPU memory {phase_txt}"
                     f"{f' at step {step}' if step is not None else ''}. Phase evidence: {why}."
                     + (f" {len(oom_ranks)} ranks reported OOM." if len(oom_ranks) > 1 else "")
                     + " Timeouts or closed connections on other ranks are consequences."),
        remediation={"sample": "Lower the sampling/generation batch size (it is per device) or the number of sample "
                               "batches, run sampling under torch.no_grad()/inference_mode, and free the training "
                               "graph first (del loss; torch.cuda.empty_cache()).",
                     "eval": "Wrap evaluation in torch.no_grad()/inference_mode, lower the eval batch size, move "
                             "large metric computations to CPU.",
                     "checkpoint": "Save from CPU copies (state_dict on CPU / FSDP offload_to_cpu), one rank at a time.",
                     }.get(guess.phase, "Reduce the per-device batch size or sequence length, use gradient "
                                        "checkpointing or mixed precision, or a GPU with more memory."),
        culprit_ranks=culprit, affected_ranks=others, step=step, evidence=evidence, order=facts.order_key(first),
        explains=("collective_timeout", "rank_crash", "nccl_error"))]


@rule(id="host-oom-killer", title="Host RAM exhausted (kernel OOM killer)", category="host_oom", severity="critical",
      description="The kernel's OOM killer (dmesg/syslog/Slurm) killed a process, or a rank died by SIGKILL / the "
                  "shell printed 'Killed' with no Python traceback, or host memory grew steadily in snapshots.",
      remediation="Reduce host memory: fewer DataLoader workers, datasets in numpy/arrow buffers instead of Python "
                  "objects (copy-on-access in forked workers), smaller replay/prefetch buffers; check `dmesg -T`.",
      false_positives=("SIGKILL sent by a scheduler (time limit, preemption) or by torchrun after another rank failed.",))
def host_oom(tables):
    kills = facts.fatal(tables, facts.ev(tables, ("host_oom", "kernel_oom_kill")))
    shell = facts.ev(tables, "killed")
    mem = facts.ev(tables, "host_mem")
    sigkill = facts.ev(tables, ("torchrun_failure", "exit"))
    from postmortem.ranks.ends import exit_code  # every launcher's way of saying -9 (torchrun, mpirun's signal 9, ...)
    sigkill = sigkill[sigkill["details"].map(lambda a: str(a.get("exitcode", a.get("code", ""))) == "-9"
                                           or a.get("signal") == "SIGKILL" or exit_code(a) == -9)]
    evidence, conf, culprit = [], 0.0, []
    if len(kills):
        evidence += facts.evidence_from(kills, 4)
        # A C++ allocation that failed (std::bad_alloc) is host memory running out, or a process limit / a huge
        # bogus size: less direct than the kernel's own OOM line.
        alloc_only = all("bad_alloc" in (a or {}) for a in kills["details"])
        conf = 0.7 if alloc_only else 0.9
        try:  # the kernel names a pid; torchrun's exit lines name the rank that pid was
            from postmortem.tables.joins import join_killed_pids
            killed = join_killed_pids(tables)
            pids = {int(p) for p in kills["pid"].dropna()} | {int(a["pid"]) for a in kills["details"]
                                                              if str(a.get("pid", "")).isdigit()}
            culprit = sorted({rank for pid, rank in killed.items() if pid in pids})
        except Exception:
            culprit = []
    if len(shell):
        last_line = tables.sources.set_index("source")["lines"].to_dict()
        # 'Killed' as one of the last lines of a log, with no traceback after it: the process was SIGKILLed.
        tail = shell[[int(r["line"]) >= (last_line.get(r["source"]) or 0) - 3 for _, r in shell.iterrows()]]
        if len(tail):
            evidence += facts.evidence_from(tail, 2)
            conf = max(conf, 0.75)
    if len(sigkill):
        evidence += facts.evidence_from(sigkill, 3)
        culprit = culprit or facts.ranks_of(sigkill)
        conf = max(conf, 0.6) if conf == 0 else min(0.95, conf + 0.05)
    growth = _ram_growth(mem)
    if growth:
        evidence += growth[1]
        conf = max(conf, 0.6) if conf == 0 else min(0.95, conf + 0.05)
    if not evidence:
        return []
    tb = facts.root_tracebacks(tables)
    if conf < 0.9 and len(tb[~tb["exc_type"].isin(["<truncated>", "MemoryError"])]):
        conf -= 0.25  # a Python exception exists: the kill may be torchrun cleaning up after it
    why = []
    if len(kills):
        why.append("the kernel OOM killer killed the process")
    if growth:
        why.append(growth[0])
    if len(shell) and not len(kills):
        why.append("the shell reported the process 'Killed' (SIGKILL) with no Python traceback")
    if len(sigkill) and not len(kills):
        why.append(f"rank(s) {culprit} exited by SIGKILL (-9) without a Python traceback")
    return [Finding(rule="host-oom-killer", category="host_oom", confidence=conf, severity="critical",
                    title="Host memory exhausted: process killed by the OOM killer",
                    explanation=sentence_case("; ".join(why)) + ". SIGKILL leaves no Python traceback, which is why the "
                                "job just stops.",
                    remediation="Lower host memory use (fewer/lighter DataLoader workers, no per-worker copies of big Python "
                    "datasets, bounded buffers) or request more RAM; confirm with `dmesg -T | grep -i oom`.",
                    culprit_ranks=culprit, evidence=evidence[:8], order=(1, float("inf")),
                    explains=("collective_timeout", "rank_crash", "dataloader_failure"))]


def _ram_growth(mem: pd.DataFrame):
    """Steady growth of used host RAM across snapshots: (sentence, evidence) or None."""
    if len(mem) < 3:
        return None
    used = [a.get("used_kb") for a in mem["details"]]
    used = [u for u in used if isinstance(u, (int, float))]
    if len(used) < 3:
        return None
    rises = sum(1 for a, b in zip(used, used[1:]) if b > a)
    if rises >= 0.8 * (len(used) - 1) and used[-1] > 1.5 * used[0]:
        total = mem.iloc[-1]["details"].get("total_kb")
        share = f" ({used[-1] / total:.0%} of {total / 1024 ** 2:.0f} GiB)" if total else ""
        return (f"used host RAM grew in {rises} of {len(used) - 1} snapshots, {used[0] / 1024 ** 2:.1f} -> "
                f"{used[-1] / 1024 ** 2:.1f} GiB{share}", facts.evidence_from(mem.iloc[[0, -1]], 2))
    return None


@rule(id="dataloader-worker-died", title="DataLoader worker died or ran out of shared memory",
      category="dataloader_failure", severity="critical",
      description="A DataLoader worker was killed (signal), crashed (bus error / segfault), timed out, or could not "
                  "allocate shared memory (/dev/shm).",
      remediation="For bus errors / shm: raise /dev/shm (docker --shm-size=16g or --ipc=host, k8s emptyDir medium "
                  "Memory) or use fewer workers; for killed workers check host RAM (dmesg) and per-worker memory; "
                  "for exceptions in workers fix the dataset code shown in the worker traceback.",
      references=("https://pytorch.org/docs/stable/data.html#multi-process-data-loading",))
def dataloader_failure(tables):
    dl = facts.fatal(tables, facts.ev(tables, "dataloader"))
    if dl.empty:
        return []
    dl = dl.assign(_k=facts.order_keys(dl)).sort_values("_k")
    shm = dl[dl["details"].map(lambda a: "shm" in a or a.get("what") == "bus error" or "Bus" in str(a.get("signal", "")))]
    killed = dl[dl["details"].map(lambda a: str(a.get("signal", "")).startswith("Killed"))]
    first = dl.iloc[0]
    culprit = facts.ranks_of(dl)[:1]
    kills = facts.ev(tables, ("host_oom", "kernel_oom_kill"))
    if len(shm):
        why = ("A DataLoader worker hit a bus error: the worker could not write into shared memory (/dev/shm), "
               "which is small by default in containers (64 MB in Docker).")
    elif len(killed) and len(kills):
        why = "A DataLoader worker was SIGKILLed by the kernel OOM killer (host RAM exhausted)."
    elif len(killed):
        why = ("A DataLoader worker was killed by SIGKILL: usually the kernel OOM killer (host RAM) — check dmesg.")
    else:
        why = f"A DataLoader worker failed: {clip(str(first['message']), 200)}"
    from postmortem.ranks.worker_errors import worker_error
    own = worker_error(tables, first.to_dict()) if not len(shm) and not len(killed) else None
    if own is not None:  # the user's dataset or collate code raised in the worker: a record it cannot handle
        return [Finding(rule="dataloader-worker-died", category="dataloader_failure", confidence=0.9,
                        severity="critical", title=f"The data code raised {own.exc_type} in a DataLoader worker",
                        explanation=(f"A DataLoader worker ran the job's own data code and it raised {own.exc_type}: "
                                     f"{clip(own.exc_message, 160)} (in {own.where}); the main process re-raised it "
                                     f"('{clip(str(first['message']), 100)}'). The worker did not die of memory or a "
                                     "signal: a record that code cannot handle stopped the rank."),
                        remediation=(f"Fix the record or the code at {own.where}: validate or clean the shard that "
                                     "holds the record, or make the code skip (and count) records it cannot parse; "
                                     "num_workers=0 raises the same exception in the main process, with the record "
                                     "at hand in a debugger."),
                        culprit_ranks=culprit, evidence=[own.evidence] + facts.evidence_from(dl, 3),
                        order=facts.order_key(first), explains=("collective_timeout", "rank_crash", "host_oom"))]
    return [Finding(rule="dataloader-worker-died", category="dataloader_failure", confidence=0.9,
                    severity="critical", title="DataLoader worker failure" + (" (shared memory)" if len(shm) else ""),
                    explanation=why, remediation=dataloader_failure_remediation(len(shm) > 0),
                    culprit_ranks=culprit, evidence=facts.evidence_from(dl, 4), order=facts.order_key(first),
                    explains=("collective_timeout", "rank_crash", "host_oom"))]


def dataloader_failure_remediation(shm: bool) -> str:
    """Fix text for a DataLoader failure."""
    if shm:
        return ("Give the container more shared memory (docker run --shm-size=16g or --ipc=host; Kubernetes: mount an "
                "emptyDir with medium: Memory at /dev/shm), or lower num_workers / use file_system sharing strategy.")
    return ("Check host memory (dmesg for the OOM killer), reduce num_workers or per-worker memory, and read the "
            "worker's own traceback for exceptions in the dataset code.")


CKPT_STEP = __import__("re").compile(r"checkpoint[-_](\d+)")


@rule(id="death-at-periodic-step", title="Job died silently at a periodic sampling/eval step", category="gpu_oom",
      severity="error",
      description="No error line survived (logs lost or never written), but the job died at a step where a periodic "
                  "pass (sampling/eval) starts whose echoed batch size is larger than the training batch: the "
                  "classic signature of an OOM in that pass. Low confidence by construction; the evidence gaps say "
                  "what would settle it.",
      remediation="Re-run with per-rank logs kept (torchrun --log-dir) and nvidia-smi history; meanwhile lower the "
                  "periodic pass's batch size.",
      false_positives=("A death at that step for another reason (host OOM, node failure) whose logs were also lost.",))
def death_at_periodic_step(tables):
    from postmortem.rules.phase import batch_ratio, config_values, phase_from_periods
    from postmortem.verdict.signals import stopped_short
    if len(_python_ooms(tables)):
        return []
    tb = facts.root_tracebacks(tables)
    if len(tb[tb["exc_type"] != "<truncated>"]):
        return []
    deaths = facts.ev(tables, ("torchrun_failure", "exit", "killed"))
    deaths = deaths[deaths["details"].map(lambda a: str(a.get("exitcode", a.get("code", "1"))) not in ("0", "-15"))]
    short = stopped_short(tables)
    if deaths.empty and short is None:
        return []
    cfg = config_values(tables)
    steps = list(facts.last_step_per_rank(tables).values())
    for attrs in facts.ev(tables, "checkpoint_save")["details"]:
        m = CKPT_STEP.search(str(attrs.get("path", "")))
        if m:
            steps.append(int(m.group(1)))
    step = max(steps) if steps else None
    phase, why_period = phase_from_periods(step, cfg)
    bphase, why_batch = batch_ratio(cfg)
    if not phase or phase not in ("sample", "eval") or bphase != phase:
        return []
    culprit = facts.ranks_of(deaths[deaths["details"].map(lambda a: bool(a.get("root", True)))])[:1] \
        if len(deaths) else []
    stop_ev = []
    if short is not None:
        stop_ev = [Evidence(short["source"], facts._int(short["line"]), facts._int(short["rank"]),
                            f"progress stopped at {int(short['step'])}/{int(short['total'])} with no end marker")]
    return [Finding(rule="death-at-periodic-step", category="gpu_oom", phase=phase,
                    confidence=0.45 if len(deaths) else 0.4,
                    severity="error", title=f"Likely out of memory in the {phase} pass at step {step}",
                    explanation=(f"No error message survived, but the job died at step {step}: {why_period}, and "
                                 f"{why_batch}. A periodic pass with a larger per-device batch than training is the "
                                 "most likely thing to exhaust GPU memory exactly there. This is an inference, not an "
                                 "observation."),
                    remediation="Lower the per-device batch of the periodic pass (or run it under no_grad with "
                                "fewer batches) and keep per-rank logs plus nvidia-smi history to confirm.",
                    culprit_ranks=culprit, step=step, evidence=stop_ev + facts.evidence_from(deaths, 2) +
                    facts.evidence_from(facts.ev(tables, "config"), 4), order=(1, float("inf")),
                    explains=("collective_timeout", "unknown"))]


@rule(id="gpu-memory-held-elsewhere", title="GPU memory held by something other than the job", category="gpu_oom",
      severity="error",
      description="GPU memory is taken while nothing of the job uses it: an nvidia-smi snapshot shows most of a GPU's "
                  "memory used with no process listed on it and 0 % utilisation (an orphaned or foreign allocation, a "
                  "zombie of an earlier run), or an OOM message shows PyTorch itself holding a small part of the GPU "
                  "while almost none is free. Any job on that GPU then runs out of memory.",
      remediation="Find and kill the holder (nvidia-smi --query-compute-apps=pid,used_memory --format=csv; "
                  "fuser -v /dev/nvidia*; in containers look from the host), or reset the GPU / restart the instance; "
                  "then rerun.",
      false_positives=("In a container nvidia-smi lists no processes even for the job itself; an idle job that "
                       "holds its memory looks the same in one snapshot.",))
def gpu_memory_held_elsewhere(tables):
    evidence, why = [], []
    gpu = tables.gpu
    if len(gpu):
        snap = gpu[(gpu["mem_total_mib"] > 0) & (gpu["mem_used_mib"] >= 0.5 * gpu["mem_total_mib"])
                   & (gpu["util_pct"].fillna(-1) == 0)
                   & gpu["processes"].map(lambda p: isinstance(p, list) and not p)]
        if len(snap):
            r = snap.iloc[0]
            why.append(f"GPU {r['gpu_index']} had {r['mem_used_mib']:.0f} of {r['mem_total_mib']:.0f} MiB in use at "
                       "0 % utilisation with no process listed on it")
            evidence.append(Evidence(r["source"], facts._int(r["line"]), facts._int(r["rank"]),
                                     f"GPU {r['gpu_index']}: {r['mem_used_mib']:.0f} / {r['mem_total_mib']:.0f} MiB used, "
                                     "0 % util, no process"))
    for _, d in facts.ev(tables, "oom_detail").iterrows():
        det = d["details"] or {}
        total, free = _gib(det.get("total")), _gib(det.get("free"))
        held = _gib(det.get("alloc") or det.get("proc"))
        if total and free is not None and held is not None and free < 0.05 * total and held < 0.1 * total:
            why.append(f"the OOM message shows this process holding {det.get('alloc') or det.get('proc')} of "
                       f"{det.get('total')} with only "
                       f"{det.get('free')} free: the rest belongs to another process")
            evidence.append(Evidence(d["source"], facts._int(d["line"]), facts._int(d["rank"]), str(d["message"])[:300]))
            break
    if not why:
        return []
    return [Finding(rule="gpu-memory-held-elsewhere", category="gpu_oom", phase=None,
                    confidence=0.6 if len(why) > 1 or evidence[0].text.startswith(("RuntimeError", "torch", "Tried",
                                                                                    "CUDA")) else 0.45,
                    severity="error", title="GPU memory was held by something other than the job",
                    explanation="; ".join(why).capitalize() + ". The job cannot use memory another process (or an "
                                "orphaned allocation) holds, so it runs out of memory whatever its batch size.",
                    remediation="Kill the process holding the GPU (nvidia-smi --query-compute-apps, fuser -v "
                                "/dev/nvidia*), reset the GPU or restart the instance, then rerun.",
                    evidence=evidence[:4], order=(1, float("inf")), explains=("rank_crash", "unknown"))]


def _gib(text) -> float | None:
    """'7.92 GiB' / '24.56 MiB' -> GiB; None when not a size."""
    import re
    m = re.match(r"\s*([\d.]+)\s*([KMGT]?)i?B", str(text or ""))
    if not m:
        return None
    return float(m.group(1)) * {"": 1 / 1024 ** 3, "K": 1 / 1024 ** 2, "M": 1 / 1024, "G": 1, "T": 1024}[m.group(2)]


# Event kinds that say why a worker ended; with none of them the launcher's closing signals follow a silent death.
_SAID_WHY = ("oom", "host_oom", "kernel_oom_kill", "killed", "fatal_signal", "dataloader", "checkpoint_error",
             "enospc", "gpu_hw", "cuda_error", "nan", "ddp_error", "nccl_error", "nccl_warn", "error",
             "collective_error", "collective_mismatch", "torchrun_failure", "exit", "kernel_xid", "kernel_gpu_error")


@rule(id="workers-stopped-after-silent-death", title="The launcher stopped the workers after one died without a word",
      category="host_oom", severity="critical",
      description="torchrun's agent sends its workers SIGTERM ('Sending process N closing signal SIGTERM') when one "
                  "of them has exited, or when the agent itself got a signal. With no agent signal, no exception, "
                  "no fatal signal, no exit code and no timeout anywhere, the worker that ended died without a word: "
                  "SIGKILL, which the kernel's OOM killer sends and which leaves no traceback, is by far the most "
                  "common such death, and loading weights into host memory is the usual peak.",
      remediation="Check `dmesg -T | grep -i -E 'killed process|out of memory'` on the node; load weights with "
                  "low_cpu_mem_usage / device_map / safetensors memory mapping, one local rank at a time, or on a "
                  "node with more RAM; keep torchrun's error summary (its 'exitcode: -9' names the rank).",
      false_positives=("A worker killed by the scheduler or by hand (SIGKILL too), or a native crash whose agent "
                       "summary was cut from the log.",))
def workers_stopped_after_silent_death(tables):
    sig = facts.ev(tables, "signal")
    if sig.empty:
        return []
    sent = sig[sig["details"].map(lambda a: (a or {}).get("sent") == "SIGTERM")]
    agent_hit = sig[sig["details"].map(lambda a: any((a or {}).get(k) for k in ("recv", "recv_name", "got")))]
    if sent.empty or len(agent_hit):
        return []
    if len(facts.ev(tables, _SAID_WHY)) or len(facts.waits(tables)) or len(facts.root_tracebacks(tables)):
        return []
    loading = facts.ev(tables, "checkpoint_load")
    last_work = tables.steps.iloc[-1] if len(tables.steps) else None
    during = clip(str(last_work["desc"]), 60) if last_work is not None and pd.notna(last_work["desc"]) else None
    conf = 0.5 if len(loading) else 0.45
    where = f" during '{during}'" if during else ""
    return [Finding(rule="workers-stopped-after-silent-death", category="host_oom", confidence=conf,
                    severity="critical",
                    title=f"A worker died without a word{where}; the launcher stopped the others",
                    explanation=(f"The launcher sent SIGTERM to {len(sent)} worker(s){where}, which it does once a "
                                 "worker has exited, and nothing in the logs says why that worker ended: no "
                                 "exception, fatal signal, exit code or timeout, and the agent itself got no "
                                 "signal. A SIGKILL leaves exactly this; the kernel's OOM killer is its most common "
                                 "sender" + (", and loading weights into host memory is the usual peak." if len(loading)
                                             else ".")),
                    remediation="Confirm with `dmesg -T | grep -i 'killed process'`; lower the host-memory peak "
                                "(low_cpu_mem_usage, memory-mapped safetensors, fewer local ranks loading at once) "
                                "or use a node with more RAM.",
                    evidence=facts.evidence_from(loading, 1) + facts.evidence_from(sent, 3),
                    order=facts.order_key(sent.iloc[0]), explains=("rank_crash", "unknown"))]

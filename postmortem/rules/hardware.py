"""Hardware and transport rules: GPU faults (ECC, Xid, lost GPU) and NCCL/network failures."""
from __future__ import annotations

import re

import pandas as pd

from postmortem.verdict.sentences import clip
from postmortem.verdict.findings import Finding
from postmortem.rules import facts, rule

APP_XIDS = {13, 31, 43, 45, 69}   # usually the application (illegal access, killed channel), not the hardware


@rule(id="gpu-hardware-fault", title="GPU hardware fault (ECC, Xid, GPU lost)", category="gpu_hardware",
      severity="critical",
      description="Uncorrectable ECC errors, hardware Xid codes (48, 63, 64, 74, 79, 92, 94, 95, 119, 120...), a GPU "
                  "that fell off the bus, or nvidia-smi unable to reach a GPU.",
      remediation="Drain the node and report it to the cluster admins with the Xid/ECC lines; rerun elsewhere. "
                  "Check `nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER` and reset the GPU if allowed.",
      references=("https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html",),
      false_positives=("Xid 13/31/43 are mostly application bugs (illegal memory access), not hardware.",))
def gpu_hardware(tables):
    hw = facts.ev(tables, ("gpu_hw", "kernel_xid", "kernel_gpu_error"))
    # A corrected PCIe AER error was fixed by the hardware: a hint for the admins, never a failure.
    hw = hw[[not _corrected(a, m) for a, m in zip(hw["details"], hw["message"])]] if len(hw) else hw
    launch = facts.ev(tables, "cuda_error")
    launch = launch[launch["details"].map(lambda a: bool(a.get("launch")) or a.get("driver") == "LAUNCH_FAILED")] \
        if len(launch) else launch
    gpu = tables.gpu
    lost = gpu[gpu["lost"].map(lambda v: v is True)] if len(gpu) else gpu
    ecc = gpu[gpu["ecc_uncorrected"].fillna(0) > 0] if len(gpu) else gpu
    if hw.empty and lost.empty and ecc.empty:
        return _launch_failure(launch)
    app_only = len(hw) and all(_xid(a) in APP_XIDS for a in hw["details"]) and lost.empty and ecc.empty
    conf = 0.45 if app_only else 0.9
    why = []
    if len(hw):
        why.append(clip(str(hw.iloc[0]["message"]), 200))
    if len(lost):
        why.append(f"nvidia-smi could not reach GPU {lost.iloc[0]['bus_id'] or ''}".strip())
    if len(ecc):
        why.append(f"uncorrectable ECC count {int(ecc.iloc[0]['ecc_uncorrected'])} on GPU {ecc.iloc[0]['gpu_index']}")
    gpu_ev = pd.concat([lost, ecc])
    evidence = facts.evidence_from(hw, 4) + [
        facts.Evidence(r["source"], facts._int(r["line"]), facts._int(r["rank"]),
                       f"GPU {r['bus_id'] or r['gpu_index']}: {'lost' if r['lost'] is True else 'ECC uncorrectable'}")
        for _, r in gpu_ev.head(3).iterrows()]
    return [Finding(rule="gpu-hardware-fault", category="gpu_hardware", confidence=conf, severity="critical",
                    title="GPU hardware fault" if not app_only else "GPU Xid error (likely application-caused)",
                    explanation="; ".join(why) + ". A faulty GPU makes its rank hang or crash; the other ranks then "
                                "time out waiting for it.",
                    remediation="Drain the node, report the Xid/ECC lines, rerun elsewhere.",
                    culprit_ranks=facts.ranks_of(hw)[:1], evidence=evidence[:6],
                    order=facts.order_key(hw.iloc[0]) if len(hw) else (1, float("inf")),
                    explains=("collective_timeout", "rank_crash", "nccl_error", "unknown"))]


def _xid(attrs: dict) -> int | None:
    try:
        return int(attrs.get("xid"))
    except (TypeError, ValueError):
        return None


SHM_RE = re.compile(r"(?i)posix_fallocate|/dev/shm|shm_open|No space left on device|shared memory")
OOM_RE = re.compile(r"(?i)out of memory|Failed to CUDA (?:calloc|malloc)")
IB_RE = re.compile(r"(?i)NET/IB|completion|ibv_|RETRY_EXC|transport retry")
CLOSED_RE = re.compile(r"(?i)Connection closed|Connection reset|Socket recv failed|remote peer")


@rule(id="nccl-failure", title="NCCL / network transport failure", category="nccl_error", severity="critical",
      description="NCCL WARN lines or NCCL errors raised to Python: shared-memory segments that cannot be "
                  "allocated, CUDA allocation failures inside NCCL, InfiniBand completion errors, sockets closed by a "
                  "peer as the first error.",
      remediation="Read the first NCCL WARN: /dev/shm too small -> docker --shm-size / --ipc=host or NCCL_SHM_DISABLE=1; "
                  "'Cuda failure out of memory' -> leave GPU memory headroom for NCCL buffers; IB completion errors -> "
                  "check the fabric (ibstat, link flaps) or NCCL_IB_* settings.",
      false_positives=("'Connection closed by remote peer' when the peer died of another cause (then a cascade).",))
def nccl_failure(tables):
    warn = facts.ev(tables, "nccl_warn")
    err = facts.ev(tables, "nccl_error")
    if warn.empty and err.empty:
        return []
    rows = pd.concat([warn, err])
    rows = rows.assign(_k=facts.order_keys(rows)).sort_values("_k")
    text = " ".join(warn["message"].astype(str))
    culprit, conf, why = [], 0.55, ""
    oom = warn[warn["message"].str.contains(OOM_RE)]
    shm = warn[warn["message"].str.contains(SHM_RE)]
    if len(shm):
        conf, why = 0.88, ("NCCL could not allocate its shared-memory segment (/dev/shm full or too small, e.g. "
                           "Docker's 64 MB default) while connecting local ranks.")
        culprit = _dev_ranks(shm)
    elif len(oom):
        conf, why = 0.85, ("NCCL could not allocate GPU memory for its buffers (Cuda failure 'out of memory'): the "
                           "model already filled that GPU; its proxy died and peers saw the connection close.")
        culprit = _dev_ranks(oom)
    elif IB_RE.search(text):
        conf, why = 0.8, "The network transport reported completion errors (InfiniBand/RoCE): a link or HCA problem."
    elif len(warn) and CLOSED_RE.search(text) and len(warn) == len(warn[warn["message"].str.contains(CLOSED_RE)]):
        conf, why = 0.5, "A peer closed its NCCL connection; that peer's own log holds the cause."
    else:
        first = rows.iloc[0]
        why = f"NCCL reported: {clip(str(first['message']), 200)}"
    return [Finding(rule="nccl-failure", category="nccl_error", confidence=conf, severity="critical",
                    title="NCCL failure", explanation=why,
                    remediation="Fix the first NCCL WARN's cause (shared memory size, GPU memory headroom, network); "
                                "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_FILE=$LOGDIR/nccl.%h.%p to see every rank.",
                    culprit_ranks=culprit, evidence=facts.evidence_from(rows, 5),
                    order=facts.order_key(rows.iloc[0]), explains=("collective_timeout", "rank_crash"))]


def _dev_ranks(df: pd.DataFrame) -> list[int]:
    # Only a rank stated by the line counts: the CUDA device index in an NCCL line is a local index, not a rank.
    return facts.ranks_of(df)[:1]


def _corrected(details: dict, message) -> bool:
    return (details or {}).get("severity") == "corrected" or "AER: Corrected" in str(message)


def _launch_failure(launch: pd.DataFrame) -> list[Finding]:
    """'unspecified launch failure' with no Xid/ECC line: hedged, since a kernel bug can print it too."""
    if launch.empty:
        return []
    return [Finding(rule="gpu-hardware-fault", category="gpu_hardware", confidence=0.45, severity="critical",
                    title="CUDA 'unspecified launch failure' (a GPU fault is the usual cause)",
                    explanation=f"{clip(str(launch.iloc[0]['message']), 200)}. A kernel that dies without an illegal "
                                "address or an assert is what an unstable GPU reports (power, heat, a failing "
                                "board); a kernel bug is the other possibility. The kernel log's Xid line decides.",
                    remediation="Check `dmesg -T | grep -i xid` and `nvidia-smi -q -d POWER,TEMPERATURE,ECC`; rerun "
                                "on other GPUs or one GPU at a time; check the power supply under full load.",
                    culprit_ranks=facts.ranks_of(launch)[:1], evidence=facts.evidence_from(launch, 3),
                    order=facts.order_key(launch.iloc[0]), explains=("collective_timeout", "rank_crash", "unknown"))]


@rule(id="ddp-unused-parameters", title="DDP: parameters that did not take part in the loss",
      category="ddp_usage_error", severity="error",
      description="DDP reducer errors: parameters that received no gradient, reduction not finished before the next "
                  "iteration, a variable marked ready twice, or models that differ across ranks.",
      remediation="Use every parameter in forward (delete unused layers) or pass find_unused_parameters=True; for "
                  "data-dependent branches make every rank run the same modules (e.g. a zero-weighted pass); "
                  "set TORCH_DISTRIBUTED_DEBUG=DETAIL to list the parameters.",
      references=("https://pytorch.org/docs/stable/notes/ddp.html",))
def ddp_unused(tables):
    d = facts.fatal(tables, facts.ev(tables, "ddp_error"))
    if d.empty:
        return []
    culprits = _mismatch_reference(tables, d) or _lone(tables, facts.ranks_of(d))
    # a reducer error of the model itself (not one rank's different parameters) is every rank's alike
    alike = not culprits and not d["message"].astype(str).str.contains("appears not to match", regex=False).any()
    return [Finding(rule="ddp-unused-parameters", category="ddp_usage_error", confidence=0.9, severity="error",
                    title="DDP reducer error: unused or mismatched parameters",
                    explanation="DDP expected a gradient for every parameter in each iteration; some parameters took "
                                "no part in the loss (" + clip(str(d.iloc[0]["message"]), 200) + ").",
                    remediation="Remove the unused modules or use find_unused_parameters=True; make data-dependent "
                                "branches run on every rank.",
                    culprit_ranks=culprits, alike=alike, evidence=facts.evidence_from(d, 3),
                    order=facts.order_key(d.iloc[0]), explains=("rank_crash", "collective_timeout", "barrier_skew"))]


# torch's DDP constructor (c10d verify_params_across_processes) compares every rank's parameter shapes with one
# process's: `[R]: params[i] in this process with sizes [...] appears not to match sizes of the same param in process P`
_MISMATCH_RE = re.compile(r"appears not to match (?:sizes|strides) of the same param in process (\d{1,7})")


def _mismatch_reference(tables, d) -> list[int]:
    """When every other rank of a job of 3 or more reports a mismatch with the same process, that process is the odd
    one (a lone reporter is the odd one itself, which _lone finds)."""
    ws = tables.meta.get("world_size")
    if not ws or ws < 3 or ws > 100_000:
        return []
    refs, reporters = set(), set()
    for msg, r in zip(d["message"].tolist(), d["rank"].tolist()):
        m = _MISMATCH_RE.search(str(msg))
        if m is None or pd.isna(r):
            continue
        refs.add(int(m.group(1)))
        reporters.add(int(r))
    if len(refs) == 1:
        ref = next(iter(refs))
        if reporters == set(range(int(ws))) - {ref}:
            return [ref]
    return []


def _lone(tables, ranks: list[int]) -> list[int]:
    """A rank stands out only when it alone reports the error in a multi-rank job (or the job has one rank), and the
    others show they were elsewhere: waiting for it in a collective, losing it as a peer, or another error of their
    own. DDP's reducer errors hit every rank of a model alike; when the launcher shows only the first failing child
    (mp.spawn) or groups the others' identical errors (Ray), the one reporter is no odd one out."""
    ws = tables.meta.get("world_size") or 1
    if len(ranks) != 1:
        return []
    if tables.tracebacks["rank"].nunique() > 1 and _same_error_everywhere(tables):
        return []
    if ws > 1 and not _others_elsewhere(tables, ranks[0]):
        return []
    return ranks


def _others_elsewhere(tables, rank: int) -> bool:
    """Some other rank ended in a collective (waiting, a lost peer) or with an exception of another class."""
    from postmortem.ranks.ends import IN_COLLECTIVE_ENDS
    table = tables.frames.get("ranks")
    if table is None or table.empty or "end" not in table.columns:
        return True  # no end states to compare: keep the reporter
    others = table[table["rank"] != rank]
    if others["end"].isin(list(IN_COLLECTIVE_ENDS)).any():
        return True
    tb = tables.tracebacks
    own = set(tb.loc[tb["rank"] == rank, "exc_type"])
    theirs = tb[tb["rank"].notna() & (tb["rank"] != rank) & (tb["exc_type"] != "<truncated>")]
    return bool(len(theirs)) and not set(theirs["exc_type"]) <= own


def _same_error_everywhere(tables) -> bool:
    tb = tables.tracebacks
    tb = tb[tb["rank"].notna() & (tb["exc_type"] != "<truncated>")]
    return tb["exc_type"].nunique() == 1 and tb["rank"].nunique() > 1

"""Verdict sentences: one sentence a person would write (what, where, why) from a finding's fields."""
from __future__ import annotations

import re

from postmortem.findings import Finding

_EXC_RE = re.compile(r"\b((?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit))\b")
_BUSY_RE = re.compile(r"busy \((?P<what>.+)\) while", re.S)
_STUCK_RE = re.compile(r"stuck in (?P<what>.+?) while", re.S)

PHASE_WORDS = {"train": "during training", "eval": "during evaluation", "sample": "while sampling",
               "checkpoint": "while saving or loading a checkpoint", "init": "during start-up"}


def sentence_case(text: str) -> str:
    """First letter upper-cased, the rest untouched (str.capitalize() would lower-case names like PytorchStreamReader)."""
    return text[:1].upper() + text[1:]


def ranks_phrase(ranks, capital: bool = False, none: str = "a rank") -> str:
    """`rank 3`, `ranks 1, 2 and 3`, `ranks 0-7`; `none` when the list is empty."""
    rs = sorted({int(r) for r in ranks if r is not None})
    if not rs:
        text = none
    elif len(rs) == 1:
        text = f"rank {rs[0]}"
    elif len(rs) > 3 and rs == list(range(rs[0], rs[-1] + 1)):
        text = f"ranks {rs[0]}-{rs[-1]}"
    else:
        text = f"ranks {', '.join(map(str, rs[:-1]))} and {rs[-1]}"
    return sentence_case(text) if capital else text


def _step(f: Finding) -> str:
    return f" at step {int(f.step)}" if f.step is not None else ""


def _phase(f: Finding) -> str:
    return f" {PHASE_WORDS[f.phase]}" if f.phase in PHASE_WORDS else ""


def _exception(f: Finding) -> str | None:
    for text in [f.title] + [e.text for e in f.evidence]:
        m = _EXC_RE.search(text or "")
        if m:
            return m.group(1)
    return None


def _others(f: Finding) -> str:
    return ranks_phrase(f.affected_ranks, none="the other ranks")


def finding_sentence(f: Finding) -> str:
    """The finding as one sentence: what happened, on which rank, at which step or phase, and why."""
    who, whose = ranks_phrase(f.culprit_ranks, capital=True), ranks_phrase(f.culprit_ranks)
    hedge = "probably " if f.confidence < 0.5 else ""
    cat, step, phase = f.category, _step(f), _phase(f)
    if cat == "gpu_oom":
        tail = "; the job died without an out-of-memory message, at the step where that pass runs" \
            if f.rule == "death-at-periodic-step" else ""
        return f"{who} {hedge}ran out of GPU memory{phase}{step}{tail}."
    if cat == "host_oom":
        return f"The kernel's out-of-memory killer {hedge}ended {whose}{step} because the host ran out of RAM."
    if cat == "dataloader_failure":
        shm = " (out of shared memory)" if "shared memory" in f.title else ""
        return f"A DataLoader worker of {whose} {hedge}died{shm}{step}, and the rank stopped with it."
    if cat == "barrier_skew":
        if f.rule == "uneven-progress":
            stop = f" (the run stopped at step {int(f.step)})" if f.step is not None else ""
            return (f"{who} {hedge}ran a different number of batches than {_others(f)}{stop}, so a collective "
                    "was left waiting for a partner that never called it.")
        if f.rule == "peer-exited-while-waiting":
            return f"{who} {hedge}left the training loop{step} while {_others(f)} waited for it in a collective."
        return (f"{who} {hedge}called a different collective than {_others(f)}{step}, so the collectives could "
                "not match.")
    if cat in ("straggler", "logging_blocking"):
        m = _BUSY_RE.search(f.title) or _STUCK_RE.search(f.title)
        if cat == "logging_blocking":
            what = "was blocked inside the logger"
        elif m and f.rule == "odd-rank-out-stack":
            what = f"was stuck in {m.group('what')}"
        elif m and not m.group("what").startswith("non-collective work"):
            what = f"was busy with {m.group('what')}"
        else:
            what = "was busy with work outside the collectives"
        return f"{who} {hedge}{what}{step} while {_others(f)} waited for it in a collective."
    if cat == "checkpoint_corruption":
        return (f"{who} {hedge}failed to load a checkpoint{step} because the file was incomplete or corrupt "
                "(partially written, or read while being written).")
    if cat == "nccl_error":
        return f"NCCL communication {hedge}failed on {whose}{step}, and the job could not continue."
    if cat == "gpu_hardware":
        app = ", an Xid error that is likely caused by the application" if "application" in f.title else ""
        return f"The GPU of {whose} {hedge}reported a hardware fault{app}{step}."
    if cat == "nan_inf":
        on = f" on {whose}" if f.culprit_ranks else ""
        return f"The loss {hedge}became NaN or Inf{on}{step}, and training could not recover."
    if cat == "ddp_usage_error":
        return (f"DDP {hedge}stopped {whose if f.culprit_ranks else 'the job'}{step} because some parameters got no "
                "gradient in an iteration (unused or mismatched parameters).")
    if cat == "rank_crash":
        exc = _exception(f)
        with_exc = f" with {exc}" if exc else " with an exception"
        after = f", and {_others(f)} stopped because of it" if f.affected_ranks else ""
        return f"{who} {hedge}crashed{with_exc}{phase}{step}{after}."
    if cat == "collective_timeout":
        lag = re.search(r"rank ([\d, ]+) lagged", f.title)
        why = f"; rank {lag.group(1)} lagged behind" if lag else "; nothing in the logs shows why"
        where = f" on {ranks_phrase(f.affected_ranks)}" if f.affected_ranks else ""
        return f"A collective timed out{where}{step}{why}."
    if cat == "no_failure":
        return sentence_case(f.title.rstrip(".")) + "."
    return f"Something failed{' on ' + whose if f.culprit_ranks else ''}{step}, but the evidence does not say what."


def verdict_sentence(root: Finding) -> str:
    """The verdict's summary for its root finding (Verdict.summary, the JSON `verdict.summary`)."""
    return finding_sentence(root)


def describe(analysis) -> str:
    """repr(Analysis): the verdict, the culprit and counts, in a few lines."""
    v = analysis.verdict
    t = analysis.tables
    ws = t.meta.get("world_size")
    head = f"<postmortem.Analysis of {analysis.input!r}>"
    if v is None:
        return head + "\nno readable input files"
    lines = [head, f"verdict:  {v.category} (confidence {v.confidence:.2f}) {v.summary}"]
    if v.culprit_ranks:
        lines.append(f"culprit:  {ranks_phrase(v.culprit_ranks)}" + (f", step {v.step}" if v.step is not None else ""))
    lines.append(f"input:    {len(t.sources)} files, world size {ws if ws is not None else '?'}, "
                 f"{len(analysis.finding_list)} findings, {len(analysis.evidence_gaps)} evidence gaps")
    lines.append("tables:   " + ", ".join(f"{n} ({len(df)})" for n, df in t.frames.items()))
    return "\n".join(lines)

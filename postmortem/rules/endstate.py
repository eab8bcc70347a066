"""Rules that read the `ranks` table and the order of events: a collective entered after training ended, and a
communicator whose very first collective never completed."""
from __future__ import annotations

import pandas as pd

from postmortem.verdict.sentences import clip
from postmortem.verdict.findings import Evidence, Finding
from postmortem.rules import facts, rule



@rule(id="collective-after-training-end", title="A collective called after training had ended",
      category="barrier_skew", severity="critical",
      description="The training loop finished (the framework's end-of-training marker), and afterwards a rank waited "
                  "in a collective until it timed out: code that runs after training on some ranks only (a rank-0 "
                  "save or evaluation that ends in a barrier, a gather in a rank-0 callback) issued a collective "
                  "the other ranks, already past the loop or gone, never joined.",
      remediation="Make post-training code collective-safe: call save/eval helpers that contain barriers on every "
                  "rank (Lightning's trainer.save_checkpoint, accelerate's save_state, HF save_model), or guard "
                  "only the file write with `if rank == 0`, never the function that synchronises.",
      false_positives=("A second training stage started after the marker (its own timeouts are not post-training).",))
def collective_after_end(tables):
    # waiting in a collective: timeouts, or the peers' sockets closing under it (gloo, when they had exited)
    waits = facts.waits(tables)
    closed = facts.ev(tables, "collective_error")
    if len(closed):
        waits = pd.concat([waits, closed]) if len(waits) else closed
    ends = facts.ev(tables, "end_marker")
    done = _bars_at_total(tables)  # a training progress bar that reached its total also says training was over
    if len(done):
        ends = pd.concat([ends, done]) if len(ends) else done
    if waits.empty or ends.empty:
        return []
    after = []
    for w in waits.itertuples(index=False):
        same = ends[ends["source"] == w.source]
        if len(same) and (same["line"] < w.line).any():
            after.append(w)
            continue
        wt, et = pd.to_datetime(w.ts, utc=True, errors="coerce"), pd.to_datetime(ends["ts"], utc=True, errors="coerce")
        if pd.notna(wt) and (et < wt).any():
            after.append(w)
    if not after:
        return []
    after = pd.DataFrame(after)
    waiting = facts.ranks_of(after)
    world = facts.world_ranks(tables)
    # The rank that waits after the end is the one that entered the extra collective (the others had left the loop).
    culprit = waiting if waiting and len(waiting) * 2 <= max(len(world), 1) else []
    end = ends.iloc[0]
    return [Finding(rule="collective-after-training-end", category="barrier_skew", confidence=0.7,
                    severity="critical",
                    title="A rank waited in a collective after training had ended",
                    explanation=(f"Training ended ('{clip(str(end['message']), 80)}', {end['source']}:{end['line']}), and "
                                 f"afterwards {'rank ' + ', '.join(map(str, waiting)) if waiting else 'a rank'} "
                                 "waited in a collective until the timeout. Post-training code ran a collective on "
                                 "some ranks only (typically a save or evaluation under `if rank == 0` that "
                                 "synchronises inside), so its partners never came."),
                    remediation="Call functions that synchronise (save_checkpoint, save_state, evaluate) on every "
                                "rank and guard only the file write by rank; or destroy the process group before "
                                "rank-0-only work.",
                    culprit_ranks=culprit, affected_ranks=[r for r in world if r not in culprit],
                    evidence=facts.evidence_from(ends, 1) + facts.evidence_from(after, 3),
                    order=facts.order_key(end), explains=("collective_timeout", "rank_crash", "unknown"))]


def _bars_at_total(tables) -> pd.DataFrame:
    """Training progress rows at their bar's total (`16/16`), as end-marker-like rows (source, line, ts, message)."""
    st = tables.steps
    if st.empty:
        return st.iloc[0:0]
    train = st[(st["phase"] == "train") & st["step"].notna()]
    # the last training progress of its file, at its total, and not a per-epoch bar (the next epoch's would follow)
    last = train.sort_values(["source", "line"]).groupby("source").tail(1)
    full = last[last["total"].notna() & (last["total"] > 1) & (last["step"] >= last["total"])]
    full = full[~full["desc"].fillna("").str.contains("epoch", case=False)]
    if full.empty:
        return full
    return full.assign(message=[f"progress {int(s)}/{int(t)}" for s, t in zip(full["step"], full["total"])],
                       kind="end_marker")[["source", "line", "rank", "host", "ts", "message", "kind"]]


@rule(id="first-collective-never-completed", title="The first collective of the job never completed",
      category="nccl_error", severity="critical",
      description="Every rank that reports a timeout waited in collective #1 of its communicator, no rank is "
                  "behind or elsewhere: the ranks all arrived, yet not one collective ever completed. That is the "
                  "transport between the GPUs/nodes (P2P, shared memory, InfiniBand/RoCE, a firewall), not the "
                  "training code.",
      remediation="Run nccl-tests (all_reduce_perf) on the same GPUs; retry with NCCL_P2P_DISABLE=1, then "
                  "NCCL_SHM_DISABLE=1 / NCCL_IB_DISABLE=1 to find the broken path; check the GPU pair's P2P "
                  "(nvidia-smi topo -p2p r), ACS/IOMMU settings and the network interface (NCCL_SOCKET_IFNAME).",
      false_positives=("A rank that never reached the first collective (stuck in data loading at start-up) looks "
                       "the same when its logs are missing.",))
def first_collective(tables):
    waits = facts.waits(tables)
    if waits.empty:
        return []
    seqs = [a.get("seq") for a in waits["details"] if a.get("seq") is not None]
    if not seqs or any(int(s) > 1 for s in seqs):
        return []
    ranks = tables.frames.get("ranks")
    if ranks is not None and len(ranks):
        busy = ranks[ranks["stack_class"].notna() & ~ranks["stack_class"].isin(["collective_wait", "unknown"])]
        if len(busy):
            return []  # a rank is elsewhere: it never reached the collective (a straggler, not the transport)
        if ranks["last_step"].notna().any():
            return []  # training steps ran, so collectives had completed before
    root = facts.root_tracebacks(tables)
    if len(root[~root["exc_type"].isin(["<truncated>", "KeyboardInterrupt"])]):
        return []
    waiting = facts.ranks_of(waits)
    op = next((a.get("op") for a in waits["details"] if a.get("op")), "collective")
    return [Finding(rule="first-collective-never-completed", category="nccl_error", confidence=0.55,
                    severity="critical",
                    title=f"The first {op} never completed on any rank",
                    explanation=(f"{'Ranks ' + ', '.join(map(str, waiting)) if waiting else 'The ranks'} timed out "
                                 f"in collective #1 ({op}) of the communicator, and no rank shows progress or work "
                                 "elsewhere: every rank arrived, yet the very first collective never completed. "
                                 "The link between the GPUs or nodes is the likely cause."),
                    remediation="Run nccl-tests on the same GPUs; try NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1 one "
                                "at a time; set NCCL_DEBUG=INFO to see the transport each peer pair uses.",
                    affected_ranks=waiting, evidence=facts.evidence_from(waits, 4),
                    order=facts.order_key(waits.iloc[0]), explains=("collective_timeout", "rank_crash", "unknown"))]


_LAUNCHER_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "code 0")


@rule(id="rank-exited-silently", title="A rank exited without an exception while its peers lost it",
      category="rank_crash", severity="error",
      description="A rank's process ended with a non-zero exit code or a fatal signal and printed no Python "
                  "exception, while its peers report the connection to it closed or time out waiting for it: the "
                  "rank that left is the cause (os._exit / sys.exit with an error code, a C++ abort, a segfault), "
                  "the peers' errors are the cascade.",
      remediation="Look at what the exiting rank ran last (its last lines, a core dump, faulthandler output): an "
                  "explicit exit in the code, a native crash (run with PYTHONFAULTHANDLER=1), or an external kill.",
      false_positives=("A rank killed from outside (scheduler, OOM killer: SIGKILL is left to the host OOM rule).",))
def rank_exited_silently(tables):
    ranks = tables.frames.get("ranks")
    if ranks is None or ranks.empty:
        return []
    gone = ranks[ranks["exit"].notna() & ~ranks["exit"].isin(list(_LAUNCHER_SIGNALS) + ["SIGKILL"])
                 & ranks["first_error"].isna() & (ranks["end"] != "exited")]  # (exited: it said why it left)
    if gone.empty or len(gone) * 2 > len(ranks):
        return []
    others = ranks[~ranks["rank"].isin(gone["rank"])]
    lost = others[others["waiting"] | others["first_error"].fillna("").str.contains(
        r"(?i)closed|reset by peer|timed? ?out|broken pipe|collective_error|watchdog")]
    if lost.empty:
        return []
    culprits = [int(r) for r in gone["rank"]]
    g = gone.iloc[0]
    exits = ", ".join(f"rank {int(r)}: {e}" for r, e in zip(gone["rank"], gone["exit"]))
    # A rank none of whose own lines is in the inputs (a console filtered to rank 0, a log shared without rank
    # tags): that no exception of it shows says nothing; only the launcher's word that it exited first is left.
    unheard = not set(culprits) & _heard(tables)
    evidence = [_at_evidence(g["exit_at"], int(g["rank"]), f"rank {int(g['rank'])} exit: {g['exit']} (no Python exception)")]
    evidence += [_at_evidence(r["first_error_at"], int(r["rank"]), str(r["first_error"] or "waiting in a collective"))
                 for _, r in lost.head(2).iterrows()]
    who = "that rank" if len(culprits) == 1 else "those ranks"
    said = (f"none of {who}'s own output is in the inputs (the logs show other ranks only), so whether it raised "
            "is not known" if unheard else f"no Python exception was printed by {who}")
    return [Finding(rule="rank-exited-silently", category="rank_crash", confidence=0.4 if unheard else 0.55,
                    severity="error",
                    title=f"Rank {culprits[0]} exited ({g['exit']})" + ("" if unheard else " without an exception"),
                    explanation=(f"The launcher reports {exits}, and {said}; the other ranks then lost "
                                 "their connection to it or timed out waiting. The rank that left is the cause; "
                                 "their errors follow from it."),
                    remediation="Find why that rank exited: an explicit exit with an error code, a native crash "
                                "(PYTHONFAULTHANDLER=1 shows where), or a kill from outside (dmesg, the scheduler).",
                    culprit_ranks=culprits, affected_ranks=[int(r) for r in lost["rank"]], evidence=evidence[:4],
                    order=(1, float("inf")), explains=("collective_timeout", "nccl_error", "unknown"))]


def _heard(tables) -> set[int]:
    """Ranks with lines of their own in the inputs (their last lines: what they printed, not a launcher's word)."""
    last = tables.frames.get("last_lines")
    if last is None or last.empty or "rank" not in last.columns:
        return set()
    return {int(r) for r in last["rank"].dropna().unique()}


def _at_evidence(at, rank: int, text: str) -> Evidence:
    """Evidence from a `source:line` cell of the ranks table."""
    src, _, line = str(at or "?").rpartition(":")
    if not line.isdigit():
        src, line = str(at or "?"), ""
    return Evidence(src, int(line) if line else None, rank, text[:300])

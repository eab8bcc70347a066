"""Collective rules: mismatched collectives, uneven progress (barrier skew), and stragglers doing long work."""
from __future__ import annotations

import bisect
import re
from collections import Counter

import numpy as np
import pandas as pd

from postmortem.verdict.findings import Evidence, Finding
from postmortem.verdict.sentences import clip, ranks_phrase, sentence_case
from postmortem.rules import facts, rule

FP_KV = re.compile(r"(SequenceNumber|OpType|TensorShape|TensorDtypes)=(\[[^\]]*\]|[^,)]+)")
TEARDOWN_NOISE = ("teardown",)


def _fingerprint(text: str | None) -> dict:
    return dict(FP_KV.findall(text or ""))


def _numel(shape: str | None) -> int | None:
    nums = re.findall(r"\d+", shape or "")
    if not nums:
        return None
    n = 1
    for x in nums:
        n *= int(x)
    return n


@rule(id="collective-mismatch", title="Ranks called different collectives", category="barrier_skew",
      severity="critical",
      description="TORCH_DISTRIBUTED_DEBUG=DETAIL (ProcessGroupWrapper) reported that ranks ran different collectives "
                  "at the same point. Same op and sequence number but different large flat tensor sizes means DDP "
                  "gradient buckets differed (ranks used different parameters: a DDP usage error); different ops, "
                  "sequence numbers or small tensors mean rank-dependent control flow (barrier skew).",
      remediation="Make every rank issue the same collectives in the same order: no collectives under "
                  "rank-dependent or data-dependent conditions (logging keys, time-based checkpoint triggers, "
                  "early exits); broadcast decisions from rank 0 instead of deciding per rank.")
def collective_mismatch(tables):
    mm = facts.ev(tables, "collective_mismatch")
    if mm.empty:
        return []
    row = mm.iloc[0]
    a = row["details"]
    fa, fb = _fingerprint(a.get("fp_a")), _fingerprint(a.get("fp_b"))
    na, nb = _numel(fa.get("TensorShape")), _numel(fb.get("TensorShape"))
    same_op = fa.get("OpType") and fa.get("OpType") == fb.get("OpType")
    same_seq = fa.get("SequenceNumber") is not None and fa.get("SequenceNumber") == fb.get("SequenceNumber")
    bucket = (same_op and fa.get("OpType", "").upper() == "ALLREDUCE" and na and nb and na != nb
              and min(na, nb) >= 1_000_000 and (same_seq or not fa.get("SequenceNumber")))
    ranks = [int(x) for x in (a.get("rank_a"), a.get("rank_b")) if x is not None]
    if bucket:
        return [Finding(rule="collective-mismatch", category="ddp_usage_error", confidence=0.8, severity="critical",
                        title="DDP gradient buckets differ across ranks",
                        explanation=(f"At the same collective (ALLREDUCE #{fa.get('SequenceNumber', '?')}) ranks "
                                     f"reduced flat buffers of {na:,} vs {nb:,} elements: DDP's gradient buckets "
                                     "differed, so the ranks' backward passes used different parameter sets "
                                     "(data-dependent branches such as a skipped vision tower on a text-only batch)."),
                        remediation="Make every rank run the same modules each step (run skipped branches on dummy "
                                    "input with zero weight) or use find_unused_parameters=True / static_graph "
                                    "carefully.",
                        affected_ranks=ranks, evidence=facts.evidence_from(mm, 3), order=facts.order_key(row),
                        explains=("collective_timeout", "rank_crash", "barrier_skew"))]
    what = (f"rank {a.get('rank_a')} ran {fa.get('OpType', '?')}"
            + (f" #{fa['SequenceNumber']}" if fa.get("SequenceNumber") else "")
            + (f" while rank {a.get('rank_b')} ran {fb.get('OpType', '?')}"
               + (f" #{fb['SequenceNumber']}" if fb.get("SequenceNumber") else "") if fb else ""))
    own = {}
    for at in mm["details"]:
        for rk, fp in (("rank_a", "fp_a"), ("rank_b", "fp_b")):
            if at.get(rk) is not None and _fingerprint(at.get(fp)).get("OpType"):
                own[int(at[rk])] = _fingerprint(at.get(fp))["OpType"]
    counts = Counter(own.values())
    culprit = [r for r, op in own.items() if counts[op] * 2 < len(own)] if len(counts) > 1 else []
    return [Finding(rule="collective-mismatch", category="barrier_skew", confidence=0.88, severity="critical",
                    culprit_ranks=culprit,
                    title="Ranks issued different collective sequences",
                    explanation=f"The collective fingerprints differ: {what}. Ranks followed different code paths, "
                                "so one waits in a collective the others never call (or call with other arguments).",
                    remediation="Make every rank issue the same collectives in the same order: no collectives under rank- or data-dependent conditions; broadcast decisions from rank 0.",
                    # every rank whose fingerprint the reports show, and every rank that reported one
                    affected_ranks=sorted(set(ranks) | set(own) | set(facts.ranks_of(mm))),
                    evidence=facts.evidence_from(mm, 3), order=facts.order_key(row),
                    explains=("collective_timeout", "rank_crash"))]


@rule(id="uneven-progress", title="Ranks ended at different steps or batch counts", category="barrier_skew",
      severity="critical",
      description="Per-rank progress differs at the end (different last steps, different batches per epoch) while "
                  "ranks wait in collectives: the ranks will issue different numbers of collectives (uneven data "
                  "shards, last partial batch, rank-dependent loops).",
      remediation="Give every rank the same number of batches: DistributedSampler(drop_last=True) or pad the "
                  "dataset, DDP's join() context manager for uneven inputs, and no per-rank early exits.")
def uneven_progress(tables):
    waits = facts.waits(tables)
    st = tables.steps
    st = st[st["rank"].notna() & st["step"].notna() & (st["phase"] == "train")]
    if st.empty or waits.empty:
        return []
    per = st.groupby("rank").agg(last=("step", "max"), total=("total", "max"))
    if len(per) < 2:
        return []
    totals = per["total"].dropna()
    uneven_total = totals.nunique() > 1
    uneven_last = per["last"].nunique() > 1
    if not (uneven_total or uneven_last):
        return []
    col = "total" if uneven_total else "last"
    mode = Counter(per[col].dropna().astype(int)).most_common(1)[0][0]
    odd = [int(r) for r, v in per[col].items() if v == v and int(v) != mode]
    if len(odd) * 2 > len(per):  # no majority: everyone differs; name none
        odd = []
    conf = 0.85 if uneven_total else 0.72
    desc = ", ".join(f"rank {int(r)}: {int(v)}" for r, v in per[col].items() if v == v)
    ev_rows = st.sort_values("line").groupby("rank").tail(1)
    return [Finding(rule="uneven-progress", category="barrier_skew", confidence=conf, severity="critical",
                    title="Ranks did different numbers of steps/batches",
                    explanation=(f"{'Batches per epoch' if uneven_total else 'Last step reached'} differ between "
                                 f"ranks ({desc}) and ranks then waited in a collective that the others never "
                                 "reached: the ranks issued different numbers of collectives."),
                    remediation="Use DistributedSampler(drop_last=True) or pad so every rank gets the same number "
                                "of batches; wrap uneven loops in DDP's join(); avoid per-rank early exits.",
                    culprit_ranks=odd, affected_ranks=facts.ranks_of(waits),
                    step=int(per["last"].max()), evidence=facts.evidence_from(ev_rows, 8) + facts.evidence_from(waits, 3),
                    order=(1, float("inf")), explains=("collective_timeout", "rank_crash", "straggler"))]


@rule(id="peer-exited-while-waiting", title="A rank left the loop while others waited in a collective",
      category="barrier_skew", severity="error",
      description="Collective timeouts on some ranks while a peer was shutting down normally (CUDA 'driver "
                  "shutting down', exit code 0, a finished message): the peer ran out of work earlier, e.g. the "
                  "last partial batch was not dropped.",
      remediation="Give every rank the same number of iterations (drop_last=True / padding / DDP join()).")
def peer_exited(tables):
    waits = facts.waits(tables)
    if waits.empty:
        tb = tables.tracebacks
        waits = tb[tb["exc_message"].str.contains("timeout|Timed out", case=False, regex=True)] if len(tb) else tb
    if waits.empty:
        return []
    down = facts.ev(tables, "teardown")
    down = down[down["details"].map(lambda a: "shutdown" in a)]
    clean = facts.ev(tables, "exit")
    clean = clean[clean["details"].map(lambda a: str(a.get("code", a.get("code2", a.get("code3", "")))) == "0")]
    hits = pd.concat([down, clean])
    if hits.empty:
        return []
    return [Finding(rule="peer-exited-while-waiting", category="barrier_skew", confidence=0.7, severity="error",
                    title="A peer finished while others were still in a collective",
                    explanation="A collective timed out while another process was already shutting down normally "
                                f"({clip(str(hits.iloc[0]['message']), 120)}): that rank had no more batches and left the "
                                "loop, so the others waited for a collective it never called.",
                    remediation="Make every rank run the same number of iterations (drop_last=True, padding, "
                                "DDP join()).",
                    culprit_ranks=facts.ranks_of(hits)[:1], affected_ranks=facts.ranks_of(waits),
                    evidence=facts.evidence_from(waits, 3) + facts.evidence_from(hits, 2),
                    order=(1, float("inf")), explains=("collective_timeout",))]


MAIN_FIRST = re.compile(r"main_process_first|local_main_process_first|main_process_only")


@rule(id="straggler-busy-rank", title="One rank did long work while the others waited", category="straggler",
      severity="critical",
      description="Ranks time out in a collective (watchdog, gloo, store) while one rank — the one missing from the "
                  "timeouts, the store's source, or the main process of main_process_first — was busy with "
                  "non-collective work (tokenizing, preprocessing, evaluation, saving) shown by its progress.",
      remediation="Do long one-rank work before init_process_group or cache it offline, raise the process-group "
                  "timeout (init_process_group(timeout=...), --ddp_timeout) to cover it, or split it across ranks.")
def straggler(tables):
    waits = facts.waits(tables)
    tb = tables.tracebacks
    mpf = tb[tb["frames"].map(lambda fr: bool(MAIN_FIRST.search(facts.frames_text(fr))))] if len(tb) else tb
    if waits.empty and mpf.empty:
        return []
    waiting = set(facts.ranks_of(waits)) | set(facts.ranks_of(mpf))
    candidates: list[tuple[int, str]] = []
    for attrs in waits["details"]:
        if attrs.get("src") is not None:
            candidates.append((int(attrs["src"]), f"the waiting rank fetched the communicator id from rank {attrs['src']}'s store"))
        if attrs.get("culprit") is not None:
            candidates.append((int(attrs["culprit"]), f"the desync report names rank {attrs['culprit']}"))
    if len(mpf):
        # main_process_first() makes every other rank wait for the main one: rank 0 by default, else (a waiting
        # rank 0: the main process is chosen otherwise, e.g. per node) the one rank of the world that is not waiting
        main = [0] if 0 not in waiting else [r for r in facts.world_ranks(tables) if r not in waiting]
        if len(main) == 1:
            candidates.append((main[0], "the waiting ranks sit inside main_process_first(), which waits for the "
                                        "main process"))
    ws = tables.meta.get("world_size")
    if ws and len(waiting) >= max(1, ws - 2) and len(waiting) < ws and not tables.meta.get("world_size_inferred"):
        for r in range(int(ws)):
            if r not in waiting:
                candidates.append((r, f"rank {r} is the only one not reporting a timeout"))
    elif ws and len(waiting) >= 2 and len(waiting) == ws - 1 and 0 not in waiting:
        candidates.append((0, "rank 0 is the only one not reporting a timeout"))
    lag, lag_why, lag_ev = facts.laggards(tables)
    for r in lag:
        candidates.append((r, lag_why))
    work = _work_evidence(tables, waits)
    weak_work = False
    if work is None and len(waits):
        work = _line_before_wait(tables, waits)
        weak_work = work is not None
    if not candidates and work is None:
        return []
    by_convention = False
    if not candidates and work is not None and not weak_work:
        r = work[0].rank
        if r is not None and r not in waiting:
            candidates.append((r, f"rank {r} printed the work"))
            by_convention = True  # no second sign (timeouts' absence, a store or a desync report) says it was late
        elif r is None and 0 not in waiting and len(waiting) >= 2:
            # Frameworks print progress, evaluation and metrics on the main process only (mmengine, HF Trainer,
            # Lightning, accelerate): an untagged work line among tagged timeouts is rank 0's, by that convention.
            candidates.append((0, "the work line carries no rank tag, and training frameworks print progress and "
                                  "evaluation on the main process (rank 0) only; rank 0 reports no timeout"))
            by_convention = True
    culprit = Counter(r for r, _ in candidates).most_common(1)[0][0] if candidates else None
    if work is not None and culprit is not None and work[0].rank is not None and work[0].rank != culprit:
        work, weak_work = None, False  # another rank's progress is no sign of what the culprit was doing
    reasons = [why for r, why in candidates if r == culprit]
    conf = 0.55
    if culprit is not None and work is not None:
        conf = 0.6 if by_convention else 0.85
    elif work is not None:
        conf = 0.6
    elif len(reasons) >= 2:
        conf = 0.65
    if weak_work:  # only a line's position says it was the work: hedge
        conf = min(conf, 0.55)
    if culprit is not None and _dumped_waiting(tables, culprit):
        conf = min(conf, 0.5)  # a dump of its own stack shows it waiting in a collective, not busy elsewhere
    what = work[1] if work is not None else "non-collective work (no progress line shows which)"
    timeout = _timeout_s(waits)
    evidence = facts.evidence_from(waits, 3) + (facts.evidence_from(mpf, 1, text_col="exc_type") if len(mpf) else [])
    if work is not None:
        evidence = [work[0]] + evidence
    evidence += [e for e in lag_ev if culprit in (e.rank, None)]
    if culprit is not None and not any(e.rank == culprit for e in evidence):
        from postmortem.ranks.last_words import last_own_line
        own = last_own_line(tables, culprit)  # what the rank the others waited for said last
        evidence += [own] if own is not None else []
    return [Finding(rule="straggler-busy-rank", category="straggler", confidence=conf, severity="critical",
                    title=f"{ranks_phrase([culprit] if culprit is not None else [], True, 'One rank')} was busy ({what}) while the others waited",
                    explanation=(f"{ranks_phrase(waiting, True, 'The other ranks')} waited in a collective"
                                 + (f" and gave up after the {timeout:g} s timeout" if timeout else "")
                                 + f", while {ranks_phrase([culprit] if culprit is not None else [], none='one rank')} was doing {what}. "
                                 + ". ".join(sentence_case(r) for r in reasons)
                                 + (". " if reasons else "") + "The timeouts are the symptom; the long one-rank work "
                                 "is the cause."),
                    remediation="Move the long work out of the collective's window: preprocess/tokenize offline or "
                                "before init_process_group and cache it, raise the timeout (init_process_group("
                                "timeout=timedelta(hours=2)) / --ddp_timeout), or shard the work across ranks."
                    if work is not None else  # unknown work may be a hang: a longer timeout is no fix for that
                    "Find out what the busy rank was doing (py-spy dump of every rank on the next stall, or run the "
                    "job under `postmortem collect`): long legitimate work belongs outside the collective's window "
                    "(offline, before init_process_group, or sharded); a rank stuck in a loop or a lock needs a fix, "
                    "not a longer timeout.",
                    culprit_ranks=[culprit] if culprit is not None else [], affected_ranks=sorted(waiting),
                    evidence=evidence, order=(1, float("inf")), explains=("collective_timeout", "rank_crash"))]


def _dumped_waiting(tables, rank: int) -> bool:
    """A stack dump (py-spy, gdb; not a traceback) of the rank's main thread shows it waiting in a collective."""
    from postmortem.ranks.sequences import sites
    st = tables.stacks
    if st.empty:
        return False
    dumps = st[~st["dump"].fillna("").astype(str).str.startswith("traceback:")]
    if dumps.empty:
        return False
    view = type("T", (), {"stacks": dumps})()
    return rank in sites(view)


def _timeout_s(waits: pd.DataFrame) -> float | None:
    for attrs in waits["details"]:
        for key in ("timeout_ms",):
            if attrs.get(key):
                return int(attrs[key]) / 1000
    return None


WORK_KINDS = ("checkpoint_save", "checkpoint_load", "eval_start", "sample_start")
_WORK_WORDS = {"checkpoint_save": "saving a checkpoint", "checkpoint_load": "loading a checkpoint",
               "eval_start": "evaluation", "sample_start": "sampling/generation"}


def _started_with(tables, waits: pd.DataFrame):
    """Work announced when the timed-out collective started (its timeout's time minus how long it ran): with
    timestamps, the line that coincides with the start of the wait is what the missing rank went to do."""
    work = facts.ev(tables, WORK_KINDS + ("before_wait",))
    if work.empty or waits.empty:
        return None
    wait_ts = pd.to_datetime(waits["ts"], utc=True, errors="coerce").tolist()
    i = _nearest_work(pd.to_datetime(work["ts"], utc=True, errors="coerce"), wait_ts, waits["details"].tolist())
    if i is None:
        return None
    row = work.iloc[i]
    what = _WORK_WORDS.get(row["kind"], f"'{clip(str(row['message']), 80)}'")
    return (Evidence(row["source"], facts._int(row["line"]), facts._int(row["rank"]), str(row["message"])[:200]),
            f"{what}, announced when the collective that timed out began")


def _nearest_work(work_ts: pd.Series, wait_ts: list, details: list) -> int | None:
    """Position of the work line nearest to the start of any wait (within its slack; the first such line and wait
    on ties), or None. Times are integer ns and the work times one sorted list: a wait costs two bisections, not a
    pass over the work lines (thousands of waits on a big job)."""
    valid = work_ts.notna().to_numpy()
    ns = work_ts.dt.as_unit("ns").array.asi8[valid]
    order = np.argsort(ns, kind="stable")  # stable: among equal times the first line comes first
    times, positions = ns[order].tolist(), np.flatnonzero(valid)[order].tolist()
    windows: dict[int, tuple[int, int]] = {}
    best = None  # (distance, position)
    for t, d in zip(wait_ts, details):
        d = d or {}
        ran_ms = d.get("elapsed_ms") or d.get("timeout_ms")
        if not ran_ms or t is pd.NaT:
            continue
        ran_ms = int(ran_ms)
        if ran_ms not in windows:  # (how long it ran, how far off a line may be), once per distinct duration
            windows[ran_ms] = (pd.Timedelta(milliseconds=ran_ms).value,
                               pd.Timedelta(seconds=max(60.0, ran_ms / 1000 * 0.05)).value)
        ran, slack = windows[ran_ms]
        start = t.value - ran
        k = bisect.bisect_left(times, start)
        near = min(abs(times[j] - start) for j in (k - 1, k) if 0 <= j < len(times)) if times else None
        if near is not None and near <= slack and (best is None or near < best[0]):
            at = [_first_at(times, positions, v) for v in (start - near, start + near)]
            best = (near, min(p for p in at if p is not None))
    return best[1] if best is not None else None


def _first_at(times: list, positions: list, v: int) -> int | None:
    """The first position whose time is exactly `v` (times sorted, positions ascending among equal times)."""
    k = bisect.bisect_left(times, v)
    return positions[k] if k < len(times) and times[k] == v else None


def _work_evidence(tables, waits: pd.DataFrame):
    """What the missing rank was doing: work announced when the timed-out collective began (timestamps), else
    the last non-training progress (data prep / eval / sampling) or data-prep line, else the last ordinary line
    printed before the first timeout by a rank that is not among the waiting ones."""
    timed = _started_with(tables, waits)
    if timed is not None:
        return timed
    st = tables.steps
    going = _progress_after_wait(st, waits)
    if going is not None:
        return going
    work = st[st["phase"].isin(["data", "eval", "sample"])]
    # Work that was over before the wait is not what the others waited for: a bar that reached its total, or one
    # followed by training progress in the same file (start-up shard loading, an earlier evaluation).
    work = work[work["total"].isna() | (work["step"] < work["total"])] if len(work) else work
    last_train = _last_train_line(st)
    work = work[[not (pd.notna(ln) and ln < last_train.get(src, -1)) for src, ln in zip(work["source"], work["line"])]]
    work = _outlasts(work, _timeout_s(waits))
    if work.empty:
        return None
    w = work.sort_values("step").iloc[-1]
    desc = str(w["desc"] or w["phase"])
    frac = f" ({int(w['step'])}/{int(w['total'])})" if pd.notna(w["total"]) else ""
    return (Evidence(w["source"], facts._int(w["line"]), facts._int(w["rank"]), f"{desc}{frac}"), f"'{desc}'{frac}")


# A bar whose own estimate of what is left is under this share of the timeout would have ended long before it fired.
_SHORT_WORK = 0.1


def _outlasts(work: pd.DataFrame, timeout_s: float | None) -> pd.DataFrame:
    """Progress rows whose remaining work, by the bar's own rate ((total - step) x seconds per item), could have
    kept a rank away for a good part of the timeout: a shard-loading bar 10 s from its end does not explain a
    30-minute wait (if such a bar froze, that is a hang, not long work)."""
    if work.empty or not timeout_s or "step_time" not in work:
        return work
    left = (work["total"] - work["step"]) * work["step_time"]
    return work[~(left.notna() & (left < _SHORT_WORK * timeout_s))]


def _progress_after_wait(st: pd.DataFrame, waits: pd.DataFrame):
    """Progress a rank that is not waiting kept reporting after the first timeout in the same file: it was busy
    (whatever its bar says) while the others gave up waiting for it."""
    if st.empty or waits.empty:
        return None
    waiting = set(facts.ranks_of(waits))
    first = waits.groupby("source")["line"].min().to_dict()
    after = st[[src in first and pd.notna(ln) and ln > first[src] and (pd.isna(r) or int(r) not in waiting)
                for src, ln, r in zip(st["source"], st["line"], st["rank"])]]
    # A bar at 0 has only started (often a fresh bar glued to a timeout line): it shows no work done since.
    after = after[after["step"].notna() & (after["step"] > 0)
                  & (after["total"].isna() | (after["step"] < after["total"]))]
    if after.empty:
        return None
    w = after.iloc[-1]
    desc = str(w["desc"] or "progress").strip() or "progress"
    frac = f" ({int(w['step'])}/{int(w['total'])})" if pd.notna(w["total"]) else f" (step {int(w['step'])})"
    return (Evidence(w["source"], facts._int(w["line"]), facts._int(w["rank"]), f"{desc}{frac}"),
            f"'{clip(desc, 80)}'{frac}, still reporting progress after the others had timed out")


def _last_train_line(steps: pd.DataFrame) -> dict:
    """Per file, the line of its last training progress row: work announced before it had ended."""
    if steps.empty:
        return {}
    train = steps[(steps["phase"] == "train") & steps["line"].notna()]
    return {k: int(v) for k, v in train.groupby("source")["line"].max().items()}


def _line_before_wait(tables, waits: pd.DataFrame):
    """The last ordinary line printed before the first timeout, by a rank that is not waiting (or unranked)."""
    before = facts.ev(tables, "before_wait")
    if before.empty:
        return None
    waiting = set(facts.ranks_of(waits))
    before = before[before["rank"].isna() | ~before["rank"].isin(list(waiting))]
    if before.empty:
        return None
    b = before.iloc[-1]
    return (Evidence(b["source"], facts._int(b["line"]), facts._int(b["rank"]), str(b["message"])[:200]),
            f"'{clip(str(b['message']).strip(), 80)}' (the last line printed before the timeouts)")


@rule(id="store-barrier-short", title="Ranks never reached a process group's creation", category="straggler",
      severity="error",
      description="torch.distributed's store-based barrier at process-group creation: the ranks that arrived report "
                  "`worker_count` below `world_size` and the log ends there (no `Completed store-based barrier`). "
                  "The missing ranks are still elsewhere before that call (a long rank-0-only step such as "
                  "wandb.init or data preparation, a hang, or a crash whose output is not in the inputs).",
      remediation="Find what the missing rank does before creating the process group (its last lines, a py-spy dump "
                  "of it): move rank-0-only work (wandb.init, downloads, preprocessing) after the group exists or "
                  "give it a timeout; make sure every rank runs the same process-group creation.",
      false_positives=("A start-up that was only slow: the barrier completes later (a `Completed store-based "
                       "barrier` line, or training steps after it).",))
def store_barrier_short(tables):
    ev = facts.ev(tables, "store_wait")
    if ev.empty:
        return []
    waiting = ev[ev["details"].map(lambda d: d.get("count") is not None)]
    if waiting.empty:
        return []
    last = waiting.iloc[-1]
    d = last["details"]
    key, world, count = d.get("key"), int(d["world"]), int(d["count"])
    if count >= world:
        return []
    done = ev[ev["details"].map(lambda x: x.get("done_key") == key or x.get("done_key", "").rstrip(".") == key)]
    later = tables.steps
    if len(done) or (len(later) and (later["line"] > last["line"]).any() and (later["source"] == last["source"]).any()):
        return []  # the barrier completed, or training went on: a slow start
    arrived = sorted({int(x["wait_rank"]) for x in waiting["details"] if x.get("key") == key and x.get("wait_rank")})
    missing = world - count
    return [Finding(rule="store-barrier-short", category="straggler", confidence=0.5, severity="error",
                    title=f"{missing} of {world} ranks never reached the creation of a process group",
                    explanation=(f"The ranks that arrived ({ranks_phrase(arrived, none='some ranks')}) waited in the "
                                 f"store-based barrier for `{key}` with {count} of {world} ranks there, and the log "
                                 f"ends there: {missing} rank{'s' if missing > 1 else ''} never reached this "
                                 "process group's creation. They were busy or stuck in code before it (rank-0-only "
                                 "work such as wandb.init or preprocessing is the usual cause)."),
                    remediation="Find what the missing rank does before the process group is created (its last "
                                "lines, a py-spy dump); move rank-0-only work after it or give it a timeout.",
                    affected_ranks=arrived, evidence=facts.evidence_from(waiting, 3), order=facts.order_key(last),
                    explains=("collective_timeout", "unknown"))]

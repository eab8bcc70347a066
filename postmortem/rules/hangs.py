"""Hang rules from stacks and logger traces: a logger blocking the loop, one rank stuck elsewhere, data-loader hangs."""
from __future__ import annotations

import re
from collections import Counter

import pandas as pd

from postmortem.verdict.findings import Evidence, Finding
from postmortem.verdict.sentences import ranks_phrase, sentence_case
from postmortem.rules import facts, rule
from postmortem.stacks import classify_frames, classify_thread, is_launcher, waits_inside_backward
from postmortem.stacks.classify import STEP_FRAMES

_LOGGING = re.compile(r"wandb/|tensorboard|tensorboardx|tqdm/|rich/|mlflow|comet_ml|neptune")


def _classify(frames) -> str:
    """Class of a stack (collective_wait, data_loading, logging, ...): the one classifier in postmortem.stacks."""
    return classify_frames(frames)


def _main_threads(tables) -> pd.DataFrame:
    st = tables.stacks
    if st.empty:
        return st
    main = st[(st["thread_name"] == "MainThread") |
              st["frames"].map(lambda fr: bool(fr) and str(fr[-1].get("func", "")).endswith("<module>"))]
    return main if len(main) else st


def _innermost_user(frames) -> str:
    from postmortem.stacks.classify import last_user_frame
    user = last_user_frame(frames or [])
    first = next((f for f in frames or [] if not f.get("native")), None)
    if user is not None and first is not None and first is not user:
        # blocked inside a library call: say both where it blocks and which line of the user's code called it
        return (f"{first.get('func')} ({str(first.get('file', '')).rsplit('/', 1)[-1]}:{first.get('line')}) under "
                f"{user.get('func')} ({str(user.get('file', '')).rsplit('/', 1)[-1]}:{user.get('line')})")
    for f in frames or []:
        if f.get("native"):
            continue
        if not facts.LIB_PATH.search(str(f.get("file", ""))) and "python" not in str(f.get("file", "")):
            return f"{f.get('func')} ({str(f.get('file', '')).rsplit('/', 1)[-1]}:{f.get('line')})"
    f = (frames or [{}])[0]
    return f"{f.get('func')} ({str(f.get('file', '')).rsplit('/', 1)[-1]}:{f.get('line')})"


def _stack_ev(row, cls: str) -> Evidence:
    return Evidence(row["source"], facts._int(row["line"]), facts._int(row["rank"]),
                    f"{row['thread_name'] or 'thread'} [{cls}] in {_innermost_user(row['frames'])}")


_MAIN_ELSEWHERE = ("compute", "collective_wait", "data_loading", "checkpoint_io")


def _loop_blocking(st: pd.DataFrame, cls: pd.Series, logging_rows: pd.DataFrame) -> pd.DataFrame:
    """The logging stacks that can be what holds the loop: a main thread's, or a logger's own thread (tqdm's monitor,
    wandb's sender) while its process's main thread is not busy elsewhere. A logger thread resting in its wait beside
    a main thread that computes, waits in a collective or runs the user's code (py-spy: active) blocks nothing."""
    if logging_rows.empty:
        return logging_rows
    main = st[st["thread_name"] == "MainThread"]
    busy = set()
    for key, c, act in zip(zip(main["source"], main["pid"]), cls[main.index], main["active"]):
        if c in _MAIN_ELSEWHERE or act is True:
            busy.add(key)
    keep = [(name == "MainThread") or ((src, pid) not in busy) for name, src, pid in
            zip(logging_rows["thread_name"], logging_rows["source"], logging_rows["pid"])]
    return logging_rows[keep]


@rule(id="logger-blocks-loop", title="A logger blocked the training loop", category="logging_blocking",
      severity="critical",
      description="A stack shows a thread (usually the main one) blocked inside wandb/tensorboard/tqdm/rich — a full "
                  "socket to the wandb service, a network retry loop, wandb.finish() waiting for the service, a tqdm "
                  "lock deadlock — or the logger's own lines show it stuck retrying or finishing.",
      remediation="Log asynchronously and less often (wandb.log(..., commit=False) per batch, commit per N steps), "
                  "WANDB_MODE=offline and sync later, set wandb timeouts, tqdm.monitor_interval = 0 for the tqdm lock "
                  "deadlock; check the network/proxy for retry loops.",
      references=("https://docs.wandb.ai/guides/track/log/",))
def logger_blocks(tables):
    st = tables.stacks
    blocked = pd.DataFrame()
    if len(st):
        cls = st["frames"].map(_classify)
        blocked = _loop_blocking(st, cls, st[cls == "logging"])
    wb = facts.ev(tables, "wandb")
    retry = wb[wb["details"].map(lambda a: "retry" in a)] if len(wb) else wb
    finish = wb[wb["details"].map(lambda a: a.get("exit_ret") in ("None", None) and "exit_ret" in a)] if len(wb) else wb
    if blocked.empty and retry.empty and finish.empty:
        return []
    evidence, why, conf = [], [], 0.0
    if len(blocked):
        main = blocked[blocked["thread_name"] == "MainThread"]
        row = (main if len(main) else blocked).iloc[0]
        conf = 0.88 if len(main) else 0.75
        evidence.append(_stack_ev(row, "logging"))
        why.append(f"the {'main thread' if len(main) else 'thread ' + str(row['thread_name'])} is blocked in "
                   f"{_innermost_logging(row['frames'])}")
    if len(retry):
        evidence += facts.evidence_from(retry, 2)
        why.append("wandb was stuck in a network retry loop")
        conf = max(conf, 0.6) if conf == 0 else min(0.93, conf + 0.05)
    if len(finish):
        evidence += facts.evidence_from(finish, 2)
        why.append("wandb.finish() was polling the wandb service for an exit that never came")
        conf = max(conf, 0.62) if conf == 0 else min(0.93, conf + 0.05)
    others = facts.root_tracebacks(tables)
    if conf < 0.8 and len(others[others["exc_type"] != "<truncated>"]):
        conf -= 0.2
    # wandb says it runs offline ('W&B syncing is set to `offline`', '.../offline-run-...'): no network was involved
    offline = bool(len(wb)) and wb["message"].str.contains("offline", case=False, regex=False).any()
    if offline and len(blocked):
        why.append("wandb ran offline, so the block is its local service (wandb-core) not reading the records "
                   "fast enough or not at all, not the network")
    return [Finding(rule="logger-blocks-loop", category="logging_blocking", confidence=conf, severity="critical",
                    title="Training loop blocked in the logger",
                    explanation=sentence_case("; ".join(why)) + ". While the logger blocks, the rank makes no progress "
                                "and its peers wait in the next collective.",
                    remediation=_OFFLINE_FIX if offline else
                                "wandb.log(..., commit=False) inside the loop and commit every N steps; "
                                "WANDB_MODE=offline + `wandb sync` later; fix proxy/network; for tqdm lock deadlocks "
                                "set tqdm.tqdm.monitor_interval = 0.",
                    culprit_ranks=facts.ranks_of(blocked)[:8] if len(blocked) else [], evidence=evidence[:6],
                    order=(1, float("inf")), explains=("collective_timeout", "straggler", "unknown"))]


_OFFLINE_FIX = ("The run was already offline: log fewer values less often (wandb.log(..., commit=False) per batch, "
                "commit every N steps, no per-parameter statistics every batch), check that the wandb-core service "
                "is alive and not starved of CPU, and confirm with WANDB_MODE=disabled.")


def _innermost_logging(frames) -> str:
    for f in frames or []:
        if _LOGGING.search(str(f.get("file", "")).lower()):
            return f"{f.get('func')} ({str(f.get('file', '')).rsplit('site-packages/', 1)[-1]}:{f.get('line')})"
    return _innermost_user(frames)


@rule(id="odd-rank-out-stack", title="One rank's stack differs from the waiting majority", category="straggler",
      severity="critical",
      description="Stack dumps of a hung job: most ranks wait in a collective while the odd rank(s) are elsewhere "
                  "(compute, a lock, sleep, checkpoint I/O, DataLoader); or ranks wait in different collectives.",
      remediation="Look at the odd rank's innermost user frame: that is where it is stuck; fix that code path (or, "
                  "for different collectives, make every rank call the same collectives).")
def odd_rank_stack(tables):
    main = _main_threads(tables)
    if main.empty:
        return []
    main = main.assign(_unit=[int(r) if pd.notna(r) else f"pid {p}" for r, p in zip(main["rank"], main["pid"])])
    # Several dump rounds (startup, stall): the latest per rank wins; dump folders are named by time, so path order
    # is time order.
    latest = main.sort_values(["source", "line"]).groupby("_unit", sort=False).tail(1)
    # Launchers (torchrun's elastic agent) only supervise; their stacks say nothing about the workers.
    latest = latest[~latest["frames"].map(is_launcher)]
    if len(latest) < 2:
        return _single_process(tables)
    cls = {u: classify_thread(fr, act) for u, fr, act in zip(latest["_unit"], latest["frames"], latest["active"])}
    # A rank in autograd's backward while others wait in collectives, or that reported the timeout itself, waits in
    # DDP's gradient all-reduce there (py-spy without --native shows no frame below backward).
    waited = _reported_waiting(tables)
    # (twice: once a reporter is seen waiting in backward, a silent rank at that same place waits with it)
    for _ in range(2):
        others_wait = any(c == "collective_wait" for c in cls.values())
        for u, fr in zip(latest["_unit"], latest["frames"]):
            if cls[u] == "compute" and (others_wait or u in waited) and waits_inside_backward(fr):
                cls[u] = "collective_wait"
    rows = dict(zip(latest["_unit"], latest.to_dict("records")))
    waiting = [u for u, c in cls.items() if c == "collective_wait"]
    odd = [u for u, c in cls.items() if c != "collective_wait"]

    def ranks(units):
        return [u for u in units if isinstance(u, int)]

    dead = _died(tables)
    if dead and odd and all(u in dead or not isinstance(u, int) for u in odd):
        return []  # the odd stacks are of ranks that died (a fatal error's dump): a crash, not a rank stuck elsewhere
    if waiting and odd and len(odd) < len(waiting) + 1:
        kind = Counter(cls[u] for u in odd).most_common(1)[0][0]
        where = _innermost_user(rows[odd[0]]["frames"])
        category = {"logging": "logging_blocking", "data_loading": "dataloader_failure"}.get(kind, "straggler")
        lag, lag_why, lag_ev = facts.laggards(tables)
        agree = bool(lag) and set(lag) <= set(ranks(odd))
        fr_text = f" Independent confirmation: {lag_why}." if agree else ""
        conf = (0.9 if agree else 0.85) if ranks(odd) else 0.75
        if kind in ("unknown", "idle", "sleep_lock"):
            # where it is says nothing of what it does (py-spy: idle in the user's own line, a lock, a sleep): the
            # rank is the culprit, but whether it computes, logs or waits on I/O is not shown
            conf = min(conf, 0.7)
        return [Finding(rule="odd-rank-out-stack", category=category,
                        confidence=conf,
                        severity="critical",
                        title=f"{_name(odd[0])} stuck in {where} while {len(waiting)} "
                              f"{'process waits' if len(waiting) == 1 else 'processes wait'} in a collective",
                        explanation=(f"In the stack dumps, {_names(waiting)} wait{'s' if len(waiting) == 1 else ''} in a "
                                     f"collective while {_names(odd)} {'is' if len(odd) == 1 else 'are'} in "
                                     f"{kind.replace('_', ' ')}: innermost frame "
                                     f"{where}. The waiting ranks cannot finish until the odd one reaches the same "
                                     "collective." + fr_text),
                        remediation=sentence_case(_KIND_FIX.get(kind, "").format(who=_name(odd[0]), where=where)) or
                                    f"Find out why {_name(odd[0])} is stuck in {where} (lock, sleep, endless loop, "
                                    "slow I/O) and fix it; this is a hang, so a longer timeout would only delay the same failure.",
                        culprit_ranks=ranks(odd), affected_ranks=ranks(waiting),
                        evidence=[_stack_ev(rows[u], cls[u]) for u in odd[:4]] + (lag_ev if agree else []) +
                        [_stack_ev(rows[u], "collective_wait") for u in waiting[:2]],
                        order=(1, float("inf")), explains=("collective_timeout", "rank_crash", "unknown"))]
    if len(waiting) >= 2:
        sites = Counter(_innermost_user(rows[u]["frames"]) for u in waiting)
        if len(sites) > 1:
            minority_site = sites.most_common()[-1][0]
            odd = [u for u in waiting if _innermost_user(rows[u]["frames"]) == minority_site]
            late = _late(tables, ranks(odd), ranks([u for u in waiting if u not in odd]))
            culprit = ranks(odd) if len(odd) * 2 < len(waiting) else []
            left = ""
            if not culprit:
                # no minority (two ranks mirror each other): the side waiting outside the training step (a barrier
                # after the loop, an evaluation's gather) while the other waits in the step's own collective is the
                # one whose sequence left the common path (an extra or a skipped batch, a rank-only branch)
                outside = [u for u in waiting if not _in_step(rows[u]["frames"])]
                if outside and len(outside) * 2 <= len(waiting) and len(outside) < len(waiting):
                    culprit = ranks(outside)
                    left = (f" {sentence_case(_names(outside))} waited outside the training step while the others "
                            "waited in the step's own collective: "
                            f"{'its' if len(outside) == 1 else 'their'} sequence left the common path.")
                div = None if culprit else facts.fr_divergence(tables)
                if div is not None and div.kind == "op" and div.ranks and set(div.ranks) < set(ranks(waiting)):
                    # the flight recorder: at the first differing entry, one side issued an op this group had
                    # never issued before (a barrier after the loop against the loop's all_reduce)
                    culprit = sorted(int(r) for r in div.ranks)
                    left = (f" The flight recorder shows {div.detail}; {_names(culprit)}'s op is one the group had "
                            "never issued before: its sequence left the common path.")
            mirror = "" if culprit or len(sites) != 2 else (
                # the issue's own rule: where the evidence cannot say which side differs, say so and hedge
                " Each side sits at the other's call site and nothing in the logs says which one took the branch; "
                "read the code at both sites for the condition that differs between ranks.")
            return [Finding(rule="odd-rank-out-stack", category="straggler" if late else "barrier_skew",
                            confidence=0.8 if not left else 0.72, severity="critical",
                            title="Ranks wait in different collectives",
                            explanation="The stack dumps show ranks blocked in different collective call sites: "
                                        + "; ".join(f"{n} process(es) at {s}" for s, n in sites.items())
                                        + ". They will never match: the code paths diverged." + left + mirror,
                            remediation="Make every rank call the same collectives in the same order.",
                            culprit_ranks=culprit,
                            affected_ranks=ranks([u for u in waiting if u not in (culprit or odd)]),
                            evidence=[_stack_ev(rows[u], "collective_wait") for u in waiting[:6]],
                            order=(1, float("inf")), explains=("collective_timeout", "straggler"))]
    return _elsewhere_than_reporters(rows, cls, waited, dead)


def _elsewhere_than_reporters(rows: dict, cls: dict, waited: set, dead: set) -> list[Finding]:
    """No dump shows a collective wait (py-spy without native frames, taken between steps), but the ranks dumped
    share one place, a rank that reported the timeout among them, and one rank is elsewhere: the reporters' place
    is where the job waited, the rank elsewhere is what it waited for."""
    units = [u for u in rows if isinstance(u, int)]
    if len(units) < 3 or not waited:
        return []
    site = {u: _innermost_user(rows[u]["frames"]) for u in units}
    common, n = Counter(site.values()).most_common(1)[0]
    odd = [u for u in units if site[u] != common]
    if len(odd) != 1 or n != len(units) - 1 or odd[0] in waited or odd[0] in dead:
        return []
    if not any(u in waited for u in units if site[u] == common):
        return []
    u = odd[0]
    kind = cls[u]
    category = {"logging": "logging_blocking", "data_loading": "dataloader_failure"}.get(kind, "straggler")
    same = [v for v in units if v != u]
    return [Finding(rule="odd-rank-out-stack", category=category, confidence=0.5, severity="critical",
                    title=f"{_name(u)} is elsewhere ({site[u]}) while the others are all at {common}",
                    explanation=(f"In the stack dumps {_names(same)} are all at {common}, and "
                                 f"{_names(sorted(waited & set(same)))} reported the collective timeout; {_name(u)} "
                                 f"is at {site[u]} instead. The dumps show no collective frame (no native frames), "
                                 "so this rests on the odd place alone: the others waited for the rank that was "
                                 "elsewhere."),
                    remediation=sentence_case(_KIND_FIX.get(kind, "").format(who=_name(u), where=site[u])) or
                                f"Find out why {_name(u)} is at {site[u]} (a blocking open or read, a lock, a "
                                "sleep, slow work) and fix it; take the next dump with py-spy dump --native to see "
                                "the collective the others wait in.",
                    culprit_ranks=[u], affected_ranks=same,
                    evidence=[_stack_ev(rows[u], kind)] + [_stack_ev(rows[v], cls[v]) for v in same[:2]],
                    order=(1, float("inf")), explains=("collective_timeout", "rank_crash", "unknown"))]


# What to change, by what the odd rank was doing (postmortem.stacks classes); the generic advice otherwise.
_KIND_FIX = {
    "logging": "{who} is blocked in its logging or metrics call ({where}): a push, upload or write that never "
               "returns stops the loop and strands its peers in the next collective. Give the call a timeout (e.g. "
               "urlopen(..., timeout=5), requests' timeout=), move it to a background thread or queue, and let a "
               "failed push be skipped instead of retried inline.",
    "checkpoint_io": "{who} is stuck writing or reading a checkpoint ({where}): make the save asynchronous or faster "
                     "(local disk, then copy), or raise the collective timeout to cover it; check the storage.",
    "data_loading": "{who} is stuck loading data ({where}): check the DataLoader workers and the storage they read "
                    "from; num_workers=0 reproduces it in the main process.",
}


def _in_step(frames) -> bool:
    """A stack inside the training step: autograd's backward (DDP's gradient all-reduce) or a step frame."""
    return waits_inside_backward(frames) or any(STEP_FRAMES.search(str(f.get("func") or "").rsplit(".", 1)[-1])
                                                for f in frames or [] if not f.get("native"))


def _late(tables, odd: list[int], others: list[int]) -> bool:
    """The odd ranks lost their peer while all the others timed out: they reached their collective late. (With one
    other rank this is only which of two timed out first: no sign of lateness.)"""
    ranks = tables.frames.get("ranks")
    if ranks is None or ranks.empty or not odd or len(others) < 2 or "end" not in ranks.columns:
        return False
    end = dict(zip(ranks["rank"].tolist(), ranks["end"].tolist()))
    return all(end.get(r) == "lost_peer" for r in odd) and all(end.get(r) == "waiting" for r in others)


def _died(tables) -> set:
    """Ranks that ended on their own (an exception, a fatal signal, a kill, an error exit): see postmortem.ranks.ends."""
    from postmortem.ranks.ends import ROOT_ENDS
    ranks = tables.frames.get("ranks")
    if ranks is None or ranks.empty or "end" not in ranks.columns:
        return set()
    return {int(r) for r, e in zip(ranks["rank"].tolist(), ranks["end"].tolist()) if e in ROOT_ENDS}


def _reported_waiting(tables) -> set:
    """Ranks that reported waiting in a collective (a timeout or watchdog line)."""
    ranks = tables.frames.get("ranks")
    if ranks is None or ranks.empty:
        return set()
    return {int(r) for r, w in zip(ranks["rank"].tolist(), ranks["waiting"].tolist()) if w is True}


def _name(unit) -> str:
    return f"rank {unit}" if isinstance(unit, int) else unit


def _names(units) -> str:
    """`ranks 0-2` for ranks, else the processes' names joined."""
    if all(isinstance(u, int) for u in units):
        return ranks_phrase(list(units))
    return ", ".join(map(_name, units))


def _single_process(tables) -> list[Finding]:
    """Dumps without rank (one process): a data-loading hang shows as threads blocked in queue gets."""
    st = tables.stacks
    if st.empty:
        return []
    cls = st["frames"].map(_classify)
    lone = _lone_collective_wait(st, cls)
    if lone:
        return lone
    data = st[cls == "data_loading"]
    if len(data) and (cls == "collective_wait").sum() == 0:
        row = data.iloc[0]
        return [Finding(rule="odd-rank-out-stack", category="dataloader_failure", confidence=0.6, severity="error",
                        title="Process stuck waiting on DataLoader queues",
                        explanation=f"The dumped threads wait in data loading ({_innermost_user(row['frames'])}): the "
                                    "loop is blocked on batches that never arrive (a hung or deadlocked worker, e.g. a "
                                    "lock inherited across fork, or a pin-memory thread stuck).",
                        remediation="Dump the DataLoader worker processes too (py-spy dump --subprocesses); try "
                                    "num_workers=0 to confirm, multiprocessing_context='spawn' or persistent_workers, "
                                    "and update PyTorch (fork-inherited lock deadlocks were fixed in the SharedCache).",
                        evidence=[_stack_ev(row, "data_loading")], order=(1, float("inf")),
                        explains=("collective_timeout", "unknown"))]
    return []


_STEP_FRAMES = STEP_FRAMES


def _lone_collective_wait(st: pd.DataFrame, cls: pd.Series) -> list[Finding]:
    """Only one process's stack is known and it waits in a collective: name where, and what that usually means."""
    waiting = st[cls == "collective_wait"]
    if waiting.empty or (cls != "collective_wait").any():
        return []
    row = waiting.iloc[0]
    funcs = [str(f.get("func", "")).rsplit(".", 1)[-1] for f in row["frames"] or []]
    in_step = any(_STEP_FRAMES.search(fn) for fn in funcs)
    where = _innermost_user(row["frames"])
    callers = " <- ".join(fn for fn in funcs[:8] if fn and not fn.startswith("<"))
    if in_step:
        return [Finding(rule="odd-rank-out-stack", category="collective_timeout", confidence=0.35, severity="error",
                        title=f"A rank waits in the training step's collective ({where})",
                        explanation=f"The only stack shown waits in a collective inside the training step "
                                    f"({callers}); the rank it waits for is not in the inputs.",
                        remediation="Dump every rank (py-spy dump on each pid) to see the one that is elsewhere.",
                        evidence=[_stack_ev(row, "collective_wait")], order=(1, float("inf")),
                        explains=("unknown",))]
    return [Finding(rule="odd-rank-out-stack", category="barrier_skew", confidence=0.45, severity="error",
                    title=f"A rank waits in a collective outside the training step ({where})",
                    explanation=f"The only stack shown waits in a collective called from outside the training step "
                                f"({callers}). Collectives in saving, logging, callback or evaluation code are where "
                                "ranks most often take different paths (a rank-dependent condition, a metric that "
                                "differs per rank), so the peers never call the same collective. Stacks of the "
                                "other ranks would confirm it.",
                    remediation="Make the code path around this collective identical on every rank (sync the values "
                                "that decide it, e.g. log metrics with sync_dist/all ranks, call save helpers on "
                                "every rank); dump the other ranks' stacks to see where they are.",
                    evidence=[_stack_ev(row, "collective_wait")], order=(1, float("inf")),
                    explains=("collective_timeout", "unknown"))]

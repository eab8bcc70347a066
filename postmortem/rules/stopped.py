"""Jobs ended from outside the training script: the scheduler's time limit, preemption, a cancellation, a node
failure, a Kubernetes eviction, or a stop signal whose sender the logs do not name.

A job stopped while it trained normally did not fail: nothing in the code needs to change (the verdict says so, with
the reason and the hosts). A job that was already stuck, or had already failed, when the stop came is the earlier
problem's: then this finding stays below whatever explains it (a hang's rules, a crash's), hedged.
"""
from __future__ import annotations

import re

import pandas as pd

from postmortem.rules import facts, rule
from postmortem.verdict.findings import Evidence, Finding

# What each line says ended the job (DESIGN.md's `reason` values; `terminated`: a stop signal from a sender the logs
# do not name; `requeued`: Slurm requeued the job, an administrator's or the user's `scontrol requeue`).
_SLURM_DUE = {"TIME LIMIT": "time_limit", "PREEMPTION": "preemption", "NODE FAILURE": "node_failure",
              "JOB REQUEUE": "requeued"}
_SIGNAL_REASON = {"SIGTERM": "terminated", "15": "terminated", "SIGINT": "cancelled", "2": "cancelled",
                  "SIGHUP": "cancelled", "1": "cancelled", "SIGQUIT": "cancelled", "3": "cancelled"}
REASON_WORDS = {"time_limit": "the scheduler's time limit", "preemption": "preemption by a higher-priority job",
                "cancelled": "a cancellation (scancel, Ctrl-C or a closed session)",
                "node_failure": "a node failure", "eviction": "an eviction by Kubernetes",
                "requeued": "a requeue of the job", "terminated": "a stop signal (SIGTERM) from outside"}
# Ends that say a rank was stuck or had failed on its own: the stop then cut a job that was no longer healthy.
_TROUBLE_ENDS = ("waiting", "busy", "lost_peer", "exception", "fatal_signal", "killed", "left")
# Event kinds that a stop itself produces on the way down (the launcher's summaries, SIGTERM/SIGKILL reports, peers
# losing each other): no sign of trouble before it.
_STOP_ECHOES = ("signal", "exit", "torchrun_failure", "torchrun_summary", "killed", "collective_error", "teardown",
                "job_stopped", "agent_stopped", "task_signal")
_FAILURE_KINDS = ("oom", "host_oom", "fatal_signal", "dataloader", "checkpoint_error", "enospc", "nccl_error",
                  "gpu_hw", "kernel_xid", "cuda_error", "nan", "ddp_error", "collective_mismatch",
                  "watchdog_timeout", "collective_timeout", "watchdog_status", "store_error", "error")
STALL_MIN_S = 600.0      # silence before a stop shorter than this is never called a stall
STALL_STEPS = 20         # ... nor shorter than this many of the job's own step intervals
_AT_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


def stop_reason(kind: str, details: dict) -> str | None:
    """The `reason` one stop line gives (None: the line is no stop by the scheduler or a person)."""
    d = details or {}
    if kind == "job_stopped":
        if d.get("format") == "slurm-cancelled":
            due = d.get("due")
            if due == "TASK FAILURE":
                return None  # srun's --kill-on-bad-exit after a task failed: the failed task is the story
            return _SLURM_DUE.get(due, "cancelled")  # no DUE (scancel), or DUE to SIGNAL <name>
        if d.get("k8s_critical") or d.get("k8s_preemptor"):
            return "preemption"
        if d.get("k8s_shutdown") or d.get("k8s_pod"):
            return "node_failure"
        return "eviction"
    if kind == "agent_stopped":
        sig = str(d.get("agent_sig") or d.get("ds_sig") or d.get("pl_sig") or "")
        return _SIGNAL_REASON.get(sig)
    return None


def _host(kind: str, details: dict, row_host) -> str | None:
    d = details or {}
    for key in ("host", "k8s_node", "k8s_lost_node"):
        if d.get(key):
            return str(d[key])
    return None if row_host is None or pd.isna(row_host) else str(row_host)


def _stops(tables) -> pd.DataFrame:
    """The stop lines with their reasons, earliest first (by time where known, else by file and line)."""
    ev = facts.ev(tables, ("job_stopped", "agent_stopped"))
    if ev.empty:
        return ev
    reasons = [stop_reason(k, d) for k, d in zip(ev["kind"], ev["details"])]
    ev = ev.assign(reason=reasons)
    ev = ev[ev["reason"].notna()]
    failed = _task_failures(tables)
    if len(ev) and failed:
        # A step that srun itself ended after one of its tasks failed (its --kill-on-bad-exit or the end of the
        # step: `task 0: Exited with exit code 1`, then `*** STEP 4.0 ... CANCELLED AT ... ***`) was no stop from
        # outside: the failed task is the story.
        plain = (ev["kind"] == "job_stopped") & (ev["reason"] == "cancelled")
        after = [p and any(s == src and ln < line for s, ln in failed) for p, src, line in
                 zip(plain, ev["source"], ev["line"].fillna(-1).astype(int))]
        ev = ev[~pd.Series(after, index=ev.index, dtype=bool)]
    return ev


def _task_failures(tables) -> list[tuple[str, int]]:
    """(source, line) of the launcher's reports that a task failed on its own: a non-zero exit or a fatal signal."""
    out = []
    ex = facts.ev(tables, ("exit", "fatal_signal"))
    for src, line, kind, d in zip(ex["source"], ex["line"], ex["kind"], ex["details"]):
        code = str((d or {}).get("code6", (d or {}).get("code", "")))
        if line is not None and not pd.isna(line) and (kind == "fatal_signal" or code not in ("", "0", "None")):
            out.append((src, int(line)))
    return out


def _stop_time(row) -> pd.Timestamp | None:
    if row["ts"] is not None and not pd.isna(row["ts"]):
        return pd.Timestamp(row["ts"])
    m = _AT_RE.search(str((row["details"] or {}).get("at") or ""))
    if m:  # slurmstepd's own time (local, as the log's other naive stamps)
        return pd.Timestamp(m.group(0), tz="UTC")
    return None


def _after_stop(source, line, ts, first_line: dict, first_ts) -> bool:
    """A line that came after the stop: later in a file that printed the stop, or later in time."""
    if source in first_line and line is not None and not pd.isna(line):
        return int(line) > first_line[source]
    if ts is not None and not pd.isna(ts) and first_ts is not None:
        return pd.Timestamp(ts) >= first_ts
    return False


def trouble_before(tables, stops: pd.DataFrame) -> str | None:
    """Why the job was no longer healthy when the stop came (None: nothing says so)."""
    first_line = stops.groupby("source")["line"].min().dropna().astype(int).to_dict()
    times = [t for t in (_stop_time(r) for _, r in stops.iterrows()) if t is not None]
    first_ts = min(times) if times else None
    ranks = tables.frames.get("ranks") if hasattr(tables, "frames") else None
    if ranks is not None and len(ranks):
        for _, r in ranks.iterrows():
            end = r.get("end")
            if end not in _TROUBLE_ENDS:
                continue
            src, _, ln = str(r.get("end_at") or "").rpartition(":")
            if end in ("waiting", "busy") or not _after_stop(src, int(ln) if ln.isdigit() else None, r.get("end_ts"),
                                                             first_line, first_ts):
                return f"rank {int(r['rank'])} {'was ' + end if end in ('waiting', 'busy') else 'ended: ' + end}" \
                       f"{' (' + str(r['end_detail']) + ')' if isinstance(r.get('end_detail'), str) else ''}"
        acts = {a for a in ranks["last_activity"].dropna() if a not in ("unknown", "exiting")}
        if len(acts) > 1:
            return "the ranks were doing different things (" + ", ".join(sorted(acts)) + ")"
    ev = facts.fatal(tables, facts.ev(tables, _FAILURE_KINDS))
    for _, e in ev.iterrows():
        if str(e["level"]).upper()[:1] in ("E", "F") and not _after_stop(e["source"], e["line"], e["ts"],
                                                                         first_line, first_ts):
            return f"{str(e['kind']).replace('_', ' ')} before the stop: {str(e['message'])[:160]}"
    roots = facts.root_tracebacks(tables)
    for _, t in roots.iterrows():
        if not _after_stop(t["source"], t["line"], t["ts"], first_line, first_ts):
            return f"an exception before the stop: {t['exc_type']}: {str(t['exc_message'])[:120]}"
    gap = progress_gap(tables, first_ts)
    if gap is not None and gap[0] > gap[1]:
        return f"no training progress for {int(gap[0].total_seconds() // 60)} min before the stop"
    return None


def progress_gap(tables, stop_ts) -> tuple[pd.Timedelta, pd.Timedelta] | None:
    """(time from the last training progress to the stop, the longest silence that is still normal for this job),
    by the lines' own times; None when the lines carry no times to compare."""
    st = tables.steps
    if stop_ts is None or st.empty:
        return None
    st = st[(st["phase"] == "train") & st["ts"].notna()]
    if len(st) < 3:
        return None
    ts = pd.to_datetime(st["ts"], utc=True).sort_values()
    gap = (stop_ts.tz_localize("UTC") if stop_ts.tzinfo is None else stop_ts) - ts.iloc[-1]
    if not pd.Timedelta(days=-1) < gap < pd.Timedelta(days=30):
        return None  # clocks that do not agree (another time zone): no comparison
    step = ts.diff().dropna().median()
    return max(gap, pd.Timedelta(0)), max(pd.Timedelta(seconds=STALL_MIN_S), STALL_STEPS * step)


def _first_time(stops: pd.DataFrame):
    times = [t for t in (_stop_time(r) for _, r in stops.iterrows()) if t is not None]
    return min(times) if times else None


@rule(id="job-stopped-from-outside", title="The scheduler or a person ended the job", category="job_stopped",
      severity="warning",
      description="Slurm's slurmstepd cancelled the job or step (time limit, preemption, scancel, node failure, "
                  "requeue), Kubernetes evicted or preempted the pod, or the launcher received a stop signal; with "
                  "training healthy up to it this is no failure of the code. A job that was already stuck or had "
                  "already failed when the stop came is that earlier problem's, and this finding stays hedged.",
      remediation="Time limit: request more time (sbatch --time), checkpoint periodically and resume (Slurm "
                  "--signal=USR1@120 to save before the kill); preemption or eviction: resubmit, with requeue and "
                  "resume-from-checkpoint; node failure: resubmit excluding the node (sbatch --exclude).",
      false_positives=("A hang or a crash that the scheduler then ended: the earlier problem's rules decide.",))
def job_stopped(tables):
    stops = _stops(tables)
    if stops.empty:
        return []
    explicit = stops[stops["kind"] == "job_stopped"]
    first = (explicit if len(explicit) else stops).iloc[0]
    reason = first["reason"]
    hosts = sorted({h for k, d, rh in zip(stops["kind"], stops["details"], stops["host"])
                    for h in [_host(k, d, rh)] if h})
    trouble = trouble_before(tables, stops)
    st = tables.steps
    train = st[(st["phase"] == "train") & st["step"].notna()] if len(st) else st
    last = int(train["step"].max()) if len(train) else None  # ranked or not: progress was reported
    world = facts.world_ranks(tables)
    on = f" on {', '.join(hosts[:4])}" if hosts else ""
    what = REASON_WORDS[reason]
    if trouble:
        conf = 0.3
        why = (f"The job was ended by {what}{on}, but it was not healthy by then: {trouble}. The stop only ended "
               "a job that had already stopped making progress or failed; that earlier problem is the one to fix.")
    else:
        # Sure only where the lines' times show training went on right up to the stop: without times a job that
        # hung an hour before its time limit reads the same.
        timed = progress_gap(tables, _first_time(stops)) is not None
        conf = (0.9 if timed else 0.7 if last is not None else 0.6) if len(explicit) else \
            (0.7 if timed else 0.55 if last is not None else 0.45)
        sender = "" if len(explicit) else " The logs do not say who sent it (the scheduler's record does)."
        why = (f"The job was ended by {what}{on} while it was training normally"
               + (f" (last step {last})" if last is not None else "")
               + f": nothing before the stop shows a failure, so the code did not fail.{sender}")
    evidence = facts.evidence_from(stops, 3)
    return [Finding(rule="job-stopped-from-outside", category="job_stopped", confidence=conf, severity="warning",
                    title=f"Job stopped: {reason.replace('_', ' ')}", reason=reason, explanation=why,
                    remediation=_FIX.get(reason, _FIX["terminated"]), culprit_ranks=[],
                    affected_ranks=world, step=None if trouble else last,
                    evidence=evidence, order=facts.order_key(first),
                    explains=() if trouble else ("rank_crash", "collective_timeout", "nccl_error", "unknown"))]


_FIX = {
    "time_limit": "Nothing failed: request more time (sbatch --time / --time-min), or checkpoint periodically and "
                  "resubmit to resume; ask Slurm to warn the job before the kill (sbatch --signal=USR1@120) and "
                  "save a checkpoint on that signal.",
    "preemption": "Nothing failed: resubmit (or let the scheduler requeue it) and resume from the last checkpoint; "
                  "checkpoint often enough that a preemption loses little, or run in a partition/priority class "
                  "that is not preempted.",
    "cancelled": "Nothing failed in the code: the job was cancelled (scancel, Ctrl-C, a closed terminal). Resubmit "
                 "if that was not intended; run under nohup/tmux/sbatch so a closed session does not end it.",
    "node_failure": "Resubmit excluding the node (sbatch --exclude=HOST) and resume from the last checkpoint; report "
                    "the node to the cluster admins (slurmctld log, sinfo -R).",
    "eviction": "The node ran short of a resource (see the eviction message): set the pod's requests equal to its "
                "limits (Guaranteed QoS) so it is evicted last, lower its memory or disk use, then resubmit and "
                "resume from the last checkpoint.",
    "requeued": "Nothing failed: the job was requeued; make sure it resumes from its last checkpoint.",
    "terminated": "Nothing failed in the code: a stop signal ended the job. Check the scheduler's record for who "
                  "sent it (sacct -j JOBID -o State,Reason; kubectl describe pod), then resubmit and resume.",
}

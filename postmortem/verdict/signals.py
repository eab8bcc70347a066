"""Failure signals and normal-end evidence (DESIGN.md): what says a job failed even when no rule names the cause,
and what says it ended normally. `no_failure` is the absence of every signal; it is confident only with a
positive end."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from postmortem.verdict.findings import Evidence

FATAL_EVENT_KINDS = ("oom", "host_oom", "killed", "fatal_signal", "dataloader", "checkpoint_error", "enospc",
                     "nccl_error", "gpu_hw", "kernel_xid", "kernel_gpu_error", "cuda_error", "nan", "ddp_error",
                     "collective_mismatch", "watchdog_timeout", "collective_timeout", "watchdog_status",
                     "store_error", "collective_error", "torchrun_failure", "torchrun_summary", "error")
SHORT_STOP = 0.9  # a progress bar that stops before this share of its total, with no end marker, stopped short


@dataclass
class Signals:
    """What the inputs say about how the job ended."""
    failure: list[tuple[str, Evidence]] = field(default_factory=list)   # (what, where)
    weak: list[tuple[str, Evidence]] = field(default_factory=list)      # hints only (a bar that stopped short)
    normal_end: list[tuple[str, Evidence]] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.failure)


def _ev(row, text: str) -> Evidence:
    line = row.get("line")
    rank = row.get("rank")
    return Evidence(str(row.get("source")), None if line is None or pd.isna(line) else int(line),
                    None if rank is None or pd.isna(rank) else int(rank), text[:300])


def collect(tables) -> Signals:
    """Every failure signal, weak hint and normal-end marker in the tables."""
    out = Signals()
    ev = tables.events
    tb = tables.tracebacks
    if len(tb):
        from postmortem.ranks.ends import handled_tracebacks
        went_on = pd.Series(handled_tracebacks(tables), index=tb.index, dtype=bool)
        real = tb[~tb["exc_type"].astype(str).str.endswith("Warning") & ~went_on]
        for _, row in real.head(3).iterrows():
            out.failure.append(("an exception", _ev(row, f"{row['exc_type']}: {row['exc_message']}")))
    if len(ev):
        bad = ev[ev["kind"].isin(FATAL_EVENT_KINDS) & ev["level"].isin(["E", "F", "e", "error"])]
        bad = pd.concat([bad, ev[ev["kind"].isin(["killed", "fatal_signal", "host_oom"])]]).drop_duplicates(
            subset=["source", "line", "kind"])
        from postmortem.rules.facts import fatal
        bad = fatal(tables, bad)  # an error the stream went on from (a probe that retried smaller) is no failure
        for _, row in bad.head(3).iterrows():
            out.failure.append((str(row["kind"]).replace("_", " "), _ev(row, str(row["message"]))))
        exits = ev[ev["kind"] == "exit"]
        for _, row in exits.iterrows():
            d = row["details"] or {}
            code = str(d.get("code", d.get("code2", d.get("code3", d.get("code4", d.get("code5", "1"))))))
            if code in ("0", "None"):
                out.normal_end.append(("exit code 0", _ev(row, str(row["message"]))))
            else:
                out.failure.append((f"exit {code}", _ev(row, str(row["message"]))))
        ends = ev[ev["kind"] == "end_marker"]
        for _, row in ends.head(3).iterrows():
            out.normal_end.append(("end-of-training marker", _ev(row, str(row["message"]))))
    coll = tables.collectives
    if len(coll) and coll["line"].isna().any():
        out.failure.append(("a flight-recorder dump (written on a timeout)",
                            Evidence(str(coll[coll["line"].isna()].iloc[0]["source"]), None, None, "flight recorder")))
    st = tables.stacks
    if len(st):
        from postmortem.stacks import classify_frames
        # Only the first waiting stack is cited: classifying every stack of a big job would be wasted.
        first = next((i for i, frames in enumerate(st["frames"]) if classify_frames(frames) == "collective_wait"),
                     None)
        if first is not None:
            out.failure.append(("stacks blocked in a collective", _ev(st.iloc[first], "stack in a collective")))
    _progress_signals(tables, out)
    return out


def stopped_short(tables) -> pd.Series | None:
    """The last row of a training progress bar that stopped well short of its total, when no end-of-training
    marker says training was over (a run cut off by a crash whose message is lost), else None."""
    st = tables.steps
    st = st[st["step"].notna() & (st["phase"] == "train")] if len(st) else st
    if st.empty:
        return None
    ev = tables.events
    if len(ev) and (ev["kind"] == "end_marker").any():
        return None
    # the last training progress of each file: earlier bars (an epoch's, a sanity check's) were superseded
    last = st.sort_values(["source", "line"]).groupby("source").tail(1)
    for _, row in last.iterrows():
        total = row["total"]
        if pd.notna(total) and total > 0 and row["step"] < SHORT_STOP * total:
            return row
    return None


def _progress_signals(tables, out: Signals) -> None:
    """Ranks that stopped at different final steps (a failure when ranks also wait); a bar that stopped short."""
    st = tables.steps
    st = st[st["step"].notna() & (st["phase"] == "train")] if len(st) else st
    if st.empty:
        return
    row = stopped_short(tables)
    if row is not None:
        out.weak.append(("progress stopped short of its total",
                         _ev(row, f"{row['desc'] or 'progress'} {int(row['step'])}/{int(row['total'])}")))
    ranked = st[st["rank"].notna()]
    if ranked["rank"].nunique() >= 2:
        per = ranked.groupby("rank")["step"].max()
        if per.nunique() > 1 and not out.normal_end:
            row = ranked.loc[ranked["step"].idxmin()]
            out.weak.append(("ranks stopped at different steps",
                             _ev(row, ", ".join(f"rank {int(r)}: {int(s)}" for r, s in per.head(8).items()))))

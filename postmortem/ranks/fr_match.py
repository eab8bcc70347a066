"""Match flight-recorder entries across ranks, per process group, by collective sequence id (pure; no I/O).

Reports, per group: ranks that never reached a sequence number the others issued (or skipped one inside their
window), entries whose op / size / dtype / state differ between ranks, and the first divergence. A rank's window is
[lowest, highest] seq in its dump: the ring buffer drops old entries, so a seq below a rank's window is unknown,
never "missing". Only rows in a flight-recorder state (scheduled/started/completed) are used; point-to-point ops
(send/recv) have their own numbering and are left out.
"""
from __future__ import annotations

from postmortem.verdict.sentences import ranks_phrase

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Mapping

FR_STATES = ("scheduled", "started", "completed")
_P2P_PREFIXES = ("send", "recv", "isend", "irecv", "batch_isend_irecv")
_UNEVEN_OUTPUT_OPS = ("gather", "scatter", "all_to_all", "alltoall")
_KIND_ORDER = {"op": 0, "size": 1, "dtype": 2, "missing": 3, "state": 4}


def effective_state(state: str | None, seq: int | None, last_completed: int | None,
                    last_started: int | None = None) -> str | None:
    """The entry's state with the group's status applied: gloo never updates entry states, pg_status does."""
    if seq is not None and last_completed is not None and last_completed >= 0 and seq <= last_completed:
        return "completed"
    if state == "scheduled" and seq is not None and last_started is not None and 0 <= seq <= last_started:
        return "started"
    return state


def is_p2p(op: str | None) -> bool:
    """True for send/recv entries (`nccl:send 0->1`), which are numbered separately from collectives."""
    tail = (op or "").split(":", 1)[-1].strip().lower()
    return tail.startswith(_P2P_PREFIXES)


@dataclass(frozen=True)
class Missing:
    """A sequence number some ranks issued and others never reached (or skipped)."""
    pg: str
    seq: int
    op: str | None
    present_ranks: tuple[int, ...]
    missing_ranks: tuple[int, ...]


@dataclass(frozen=True)
class Mismatch:
    """One field that differs between ranks at the same sequence number."""
    pg: str
    seq: int
    field: str                                  # "op" | "size" | "dtype" | "state"
    values: tuple[tuple[int, object], ...]      # (rank, value), by rank
    odd_ranks: tuple[int, ...]                  # ranks outside the majority value; empty on a tie


@dataclass(frozen=True)
class Divergence:
    """The first place where ranks stopped agreeing."""
    pg: str
    seq: int
    kind: str                                   # "missing" | "op" | "size" | "dtype" | "state"
    ranks: tuple[int, ...]                      # the odd ones out (missing ranks, or minority values)
    op: str | None
    detail: str
    ts: object = None


@dataclass(frozen=True)
class PgMatch:
    """Everything found for one process group."""
    pg: str
    ranks: tuple[int, ...]                      # ranks with entries for this group
    no_dump_ranks: tuple[int, ...]              # expected ranks with no entries at all
    last_seq: dict = field(default_factory=dict)   # rank -> highest seq seen
    missing: tuple[Missing, ...] = ()
    mismatches: tuple[Mismatch, ...] = ()
    first_divergence: Divergence | None = None


@dataclass(frozen=True)
class MatchReport:
    """Per-group results and the earliest divergence over all groups."""
    pgs: tuple[PgMatch, ...]
    first_divergence: Divergence | None


@dataclass(frozen=True)
class _Entry:
    rank: int
    op: str | None
    numel_in: int | None
    numel_out: int | None
    dtype: str | None
    state: str | None
    ts: object


def _val(v):
    """None for pandas/NumPy missing values, the plain value otherwise."""
    if v is None:
        return None
    try:
        if v != v:  # NaN
            return None
    except (TypeError, ValueError):
        return None  # pd.NA raises on bool()
    return v.item() if hasattr(v, "item") else v


def _entries(df) -> dict[str, dict[int, dict[int, _Entry]]]:
    """pg -> rank -> seq -> entry, first row wins when one rank has several dumps of the same entry."""
    cols = set(df.columns)
    out: dict[str, dict[int, dict[int, _Entry]]] = {}
    order = df.sort_values(["source"], kind="stable") if "source" in cols and len(df) else df
    for row in order.to_dict("records"):
        state, pg, seq, rank = (_val(row.get("state")), _val(row.get("pg")), _val(row.get("seq")),
                                _val(row.get("rank")))
        if state not in FR_STATES or pg is None or seq is None or rank is None or is_p2p(_val(row.get("op"))):
            continue
        seq, rank = int(seq), int(rank)
        eff = effective_state(state, seq, _val(row.get("last_completed")))
        per_rank = out.setdefault(str(pg), {}).setdefault(rank, {})
        if seq not in per_rank:
            per_rank[seq] = _Entry(rank, _val(row.get("op")), _val(row.get("numel_in")), _val(row.get("numel_out")),
                                   _val(row.get("dtype")) if "dtype" in cols else None, eff, _val(row.get("ts")))
    return out


def _mismatch(pg: str, seq: int, fld: str, values: dict[int, object], seen: set | None = None) -> Mismatch | None:
    """The ranks whose value differs from the majority's; with no majority (two ranks mirroring each other), for
    an op, the side whose op this group never issued before (`seen`: the ops of its earlier entries) left the common
    path: a barrier after the loop, a broadcast in a rank-only branch, against the loop's own all_reduce."""
    if len(set(values.values())) <= 1:
        return None
    counts = Counter(values.values()).most_common()
    odd: tuple[int, ...] = ()
    if len(counts) == 1 or counts[0][1] > counts[1][1]:
        odd = tuple(sorted(r for r, v in values.items() if v != counts[0][0]))
    elif fld == "op" and seen:
        novel = {v for v in set(values.values()) if v not in seen}
        if len(novel) == 1 and len(set(values.values())) == 2:
            odd = tuple(sorted(r for r, v in values.items() if v in novel))
    return Mismatch(pg, seq, fld, tuple(sorted(values.items())), odd)


def _match_pg(pg: str, by_rank: dict[int, dict[int, _Entry]], expected: Iterable[int] | None) -> PgMatch:
    ranks = tuple(sorted(by_rank))
    window = {r: (min(s), max(s)) for r, s in by_rank.items() if s}
    missing: list[Missing] = []
    mismatches: list[Mismatch] = []
    candidates: list[Divergence] = []
    seen_ops: set = set()
    for seq in sorted({s for seqs in by_rank.values() for s in seqs}):
        here = {r: by_rank[r][seq] for r in ranks if seq in by_rank[r]}
        # Below a rank's window the entry may have been evicted: unknown, not missing.
        absent = tuple(r for r in ranks if seq not in by_rank[r] and seq >= window[r][0])
        op = Counter(e.op for e in here.values()).most_common(1)[0][0] if here else None
        ts = min((e.ts for e in here.values() if e.ts is not None), default=None)
        if absent:
            missing.append(Missing(pg, seq, op, tuple(sorted(here)), absent))
            candidates.append(Divergence(pg, seq, "missing", absent, op,
                                         f"{ranks_phrase(list(absent))} never issued #{seq} ({op}) that "
                                         f"{ranks_phrase(sorted(here))} issued", ts))
        # all_to_all / gather / scatter move different amounts per rank (uneven splits, MoE routing): no size check.
        uneven = any(u in (op or "") for u in _UNEVEN_OUTPUT_OPS)
        checks = {"op": {r: e.op for r, e in here.items()},
                  "size": {} if uneven else {r: (e.numel_in, e.numel_out) for r, e in here.items()},
                  "dtype": {r: e.dtype for r, e in here.items() if e.dtype is not None},
                  "state": {r: e.state for r, e in here.items()}}
        for fld, values in checks.items():
            mm = _mismatch(pg, seq, fld, values, seen_ops if fld == "op" else None)
            if mm:
                mismatches.append(mm)
                detail = f"#{seq}: {fld} differs: " + ", ".join(f"rank {r}={v}" for r, v in mm.values)
                candidates.append(Divergence(pg, seq, fld, mm.odd_ranks, op, detail, ts))
        if len(set(checks["op"].values())) == 1:  # (only ops every rank agreed on are the common path)
            seen_ops.update(checks["op"].values())
    hard = [d for d in candidates if d.kind != "state"]
    pool = hard or candidates
    first = min(pool, key=lambda d: (d.seq, _KIND_ORDER[d.kind])) if pool else None
    no_dump = tuple(sorted(set(expected or ()) - set(ranks)))
    return PgMatch(pg, ranks, no_dump, {r: w[1] for r, w in window.items()}, tuple(missing), tuple(mismatches),
                   first)


def match_collectives(collectives_df, expected_ranks: Mapping[str, Iterable[int]] | None = None) -> MatchReport:
    """Match flight-recorder rows of a `collectives` DataFrame across ranks; `expected_ranks` (pg -> ranks, e.g.
    from the dumps' pg_config) also lists ranks that left no dump at all."""
    groups = _entries(collectives_df) if collectives_df is not None and len(collectives_df) else {}
    pgs = tuple(_match_pg(pg, groups[pg], (expected_ranks or {}).get(pg)) for pg in sorted(groups))
    firsts = [p.first_divergence for p in pgs if p.first_divergence is not None]
    hard = [d for d in firsts if d.kind != "state"] or firsts
    first = None
    if hard:
        timed = [d for d in hard if d.ts is not None]
        first = min(timed, key=lambda d: str(d.ts)) if timed else hard[0]
    return MatchReport(pgs, first)

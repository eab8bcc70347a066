"""Who held up whom, from the flight recorder's per-group counters of every rank (pure; no I/O, no pandas).

Each dump gives, per process group, the last collective the rank enqueued (its host issued it) and the last one its
device completed (the watchdog saw it end), and its first entry not completed. Compared within a collective group,
keyed by the group's global name:

- a rank whose first pending collective #s was completed by a peer issued it but its device never finished it
  (a peer can only complete a collective the rank took part in): the rank's device or watchdog stopped (`device`);
- a rank that never enqueued #s that a peer is waiting on (enqueued, not completed, nobody completed it) stopped
  issuing work on the host (`host`): the waiting peer points at it;
- a member with no dump (or no counters for the group) where every peer with counters issued #s and none
  completed it is the one they wait for, as far as the dumps say (`no_dump` / `no_status`).

Point-to-point groups (pipeline send/recv) number their ops per rank, so their counters are not compared: a pending
send/recv only says the rank waits on its peer (propagation, never a culprit by itself). Waits form a graph; the
culprits are the blamed ranks that wait on no other blamed rank (the sinks), plus every `device` rank. When most
of a group never issued a collective that a few ranks are waiting in, and those most are idle, the few ran an extra
collective (`extra`, code paths diverged). Different ops/sizes/dtypes at a seq that every rank issued is `mismatch`.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Mapping

_UNEVEN_OPS = ("all_to_all", "alltoall", "gather", "scatter")


@dataclass(frozen=True)
class RankView:
    """One rank's flight-recorder status of one process group."""
    rank: int
    enq: int | None                      # last enqueued (issued by the host)
    done: int | None                     # last completed (seen ended by the watchdog)
    pending_seq: int | None = None       # first collective not completed
    pending_op: str | None = None
    pending_record: int | None = None
    p2p: bool = False                    # the group carries send/recv: its counters count those
    p2p_peer: int | None = None          # global rank the first pending send/recv waits on
    p2p_op: str | None = None
    p2p_seq: int | None = None
    source: str = ""
    started: int | None = None           # last started on the device (-1 / None when timing is off)
    pending_state: str | None = None     # state of the first pending entry (scheduled / started)

    def has_started(self, seq: int) -> bool | None:
        """Whether the device started `seq`; None when the dump cannot say (timing off, no entry)."""
        if self.started is not None and self.started >= 0:
            return self.started >= seq
        if self.pending_seq == seq and self.pending_state in ("scheduled", "started"):
            return self.pending_state == "started"
        return None


@dataclass(frozen=True)
class Blame:
    """One piece of evidence that `rank` held a group up."""
    rank: int
    kind: str                            # host | device | no_dump | no_status | extra | mismatch
    pg: str
    seq: int                             # the collective concerned
    op: str | None
    value: int | None                    # the rank's own counter (enqueued for host, completed for device)
    peers: tuple[int, ...]               # ranks that waited (host, no_dump) / completed it (device) / the others
    peer_value: int | None               # the peers' highest counter
    detail: str
    source: str = ""
    peer_source: str = ""


@dataclass(frozen=True)
class Wait:
    """`waiter` cannot go on before `target` does its part of `seq` in `pg`."""
    waiter: int
    target: int
    kind: str                            # host | device | unknown | p2p
    pg: str
    seq: int | None


@dataclass
class Attribution:
    """Culprits, their evidence, and the waits that lead to them."""
    culprits: list[int] = field(default_factory=list)
    kind: str | None = None              # host | device | mixed | no_dump | extra | mismatch | stuck | None (no hang)
    blames: dict[int, list[Blame]] = field(default_factory=dict)
    waits: list[Wait] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)        # ranks that wait on someone
    unexplained: list[int] = field(default_factory=list)    # waiting ranks whose waits lead to no culprit
    stuck: list[tuple[str, int, str | None, tuple[int, ...]]] = field(default_factory=list)  # (pg, seq, op, ranks)
    compared_groups: int = 0
    p2p_groups: int = 0


def _label(pg: str, descs: Mapping[str, str]) -> str:
    return f"pg {pg} ({descs[pg]})" if descs.get(pg) else f"pg {pg}"


def _ranks_text(ranks) -> str:
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + (", ".join(map(str, ranks[:8]))
                                                         + (f" (+{len(ranks) - 8})" if len(ranks) > 8 else ""))


def _mismatch(pg: str, seq: int, at: Mapping[int, dict], descs) -> list[Blame]:
    """Different op / size / dtype at a seq every rank issued: the ranks outside a strict majority value."""
    ops = [str(e.get("op")) for e in at.values()]
    op = Counter(ops).most_common(1)[0][0] if ops else None
    for fld in ("op", "numel_in", "dtype"):
        if fld == "numel_in" and any(u in (op or "").lower() for u in _UNEVEN_OPS):
            continue  # all_to_all / gather legitimately move different sizes per rank
        values = {r: e.get(fld) for r, e in at.items() if e.get(fld) is not None and e.get(fld) == e.get(fld)}
        if len(set(values.values())) <= 1:
            continue
        common, n = Counter(values.values()).most_common(1)[0]
        if n * 2 <= len(values):
            return []  # no majority: nobody stands out
        odd = sorted(r for r, v in values.items() if v != common)
        detail = (f"{_label(pg, descs)} collective #{seq}: {fld} differs across ranks ("
                  + ", ".join(f"rank {r}={v}" for r, v in sorted(values.items())[:8]) + ")")
        return [Blame(r, "mismatch", pg, seq, str(at[r].get("op")), None,
                      tuple(sorted(set(values) - set(odd))), None, detail, str(at[r].get("source") or ""))
                for r in odd]
    return []


def attribute(views: Mapping[str, Mapping[int, RankView]], members: Mapping[str, list[int]] | None = None,
              dumped: set[int] | None = None, descs: Mapping[str, str] | None = None,
              entries_at: Callable[[str, int], Mapping[int, dict]] | None = None) -> Attribution:
    """Attribute a hang from per-group views (pg -> rank -> RankView). `members`: pg -> ranks from pg_config (ranks
    without a view are unknown there); `dumped`: ranks that left a dump; `entries_at(pg, seq)`: rank -> entry
    fields (op, numel_in, dtype) for the op/size check."""
    members, descs, dumped = members or {}, descs or {}, set(dumped or ())
    out = Attribution()
    blames: dict[int, list[Blame]] = {}
    waits: list[Wait] = []
    hang = False

    def blame(b: Blame) -> None:
        blames.setdefault(b.rank, []).append(b)

    for pg in sorted(views):
        by_rank = views[pg]
        if any(v.p2p for v in by_rank.values()):
            out.p2p_groups += 1
            for v in by_rank.values():
                if v.p2p_peer is not None and v.p2p_peer != v.rank:
                    waits.append(Wait(v.rank, v.p2p_peer, "p2p", pg, v.p2p_seq))
                    hang = True
            continue
        known = {r: v for r, v in by_rank.items() if v.enq is not None}
        unknown = sorted(set(members.get(pg) or ()) - set(known))
        pending = {r: v for r, v in known.items() if v.done is not None and v.enq > v.done}
        if len(known) + len(unknown) < 2 or not pending:
            continue
        hang = True
        out.compared_groups += 1
        top_done = max((v.done for v in known.values() if v.done is not None), default=None)
        device: dict[int, int] = {}
        stuck_at: dict[int, list[int]] = {}
        for r, v in pending.items():
            s = v.done + 1
            completed_by = [p for p, w in known.items() if p != r and w.done is not None and w.done >= s]
            if completed_by:
                device[r] = s
                op = v.pending_op if v.pending_seq == s else None
                rec = f", entry record {v.pending_record}" if v.pending_seq == s and v.pending_record is not None \
                    else ""
                completed_by = sorted(completed_by)
                blame(Blame(r, "device", pg, s, op, v.done, tuple(completed_by), top_done,
                            f"{_label(pg, descs)}: rank {r} enqueued up to #{v.enq} but completed only #{v.done} "
                            f"(#{s}{' ' + op if op else ''} still {'pending' if not rec else 'scheduled' + rec}); "
                            f"{_ranks_text(completed_by)} completed #{s}"
                            + (f" and on to #{top_done}" if top_done and top_done > s else ""),
                            v.source, known[completed_by[0]].source))
        waiters_of: dict[tuple[str, int], list[int]] = {}
        for r, v in pending.items():
            if r in device:
                continue
            s = v.done + 1
            never = [p for p, w in known.items() if w.enq < s]
            if never:
                for p in never:
                    waits.append(Wait(r, p, "host", pg, s))
                    waiters_of.setdefault(("host", p), []).append(r)
            elif unknown:
                for u in unknown:
                    waits.append(Wait(r, u, "unknown", pg, s))
                    waiters_of.setdefault(("unknown", u), []).append(r)
            elif device:
                for p in device:
                    waits.append(Wait(r, p, "device", pg, s))
            else:
                op = v.pending_op if v.pending_seq == s else None
                out.stuck.append((pg, s, op, (r,)))
                stuck_at.setdefault(s, []).append(r)
        # All issued #s and none completed it. With device timing on, the members whose device never started it
        # (a minority) were still busy with earlier GPU work: the others' kernels wait for them.
        for s, ranks in sorted(stuck_at.items()):
            said = {r: known[r].has_started(s) for r in known}
            if any(v is None for v in said.values()):
                continue
            late = sorted(r for r, v in said.items() if not v)
            if not late or len(late) * 2 > len(said):
                continue
            early = sorted(r for r in said if said[r])
            v0 = known[late[0]]
            op = v0.pending_op if v0.pending_seq == s else None
            for r in late:
                blame(Blame(r, "device", pg, s, op, known[r].done, tuple(early), None,
                            f"{_label(pg, descs)}: every member issued #{s}{' (' + op + ')' if op else ''} and none "
                            f"completed it; {_ranks_text(early)} started it on the device, rank {r} never did",
                            known[r].source, known[early[0]].source))
                for w in early:
                    waits.append(Wait(w, r, "device", pg, s))
        for (how, p), who in sorted(waiters_of.items()):
            who = sorted(who)
            w0 = known[who[0]]
            s = min(known[x].done + 1 for x in who)
            op = w0.pending_op if w0.pending_seq == s else None
            rec = (f" (rank {who[0]}'s entry record {w0.pending_record})"
                   if w0.pending_seq == s and w0.pending_record is not None else "")
            waited_to = max(known[x].enq for x in who)
            if how == "host":
                mine = known[p]
                said = ("it never recorded an op there" if mine.enq < 0 else
                        f"rank {p} last enqueued #{mine.enq}" + (" (nothing pending)" if mine.done is not None
                                                                   and mine.done >= mine.enq else ""))
                blame(Blame(p, "host", pg, s, op, mine.enq, tuple(sorted(who)), waited_to,
                            f"{_label(pg, descs)}: {said}; {_ranks_text(who)} enqueued up to #{waited_to} and wait "
                            f"at #{s}{' (' + op + ')' if op else ''}{rec}", mine.source, w0.source))
            else:
                kind = "no_status" if p in dumped else "no_dump"
                why = ("its dump has no counters for this group" if p in dumped else "it left no dump")
                blame(Blame(p, kind, pg, s, op, None, tuple(sorted(who)), waited_to,
                            f"{_label(pg, descs)}: {_ranks_text(who)} issued #{s}{' (' + op + ')' if op else ''} and "
                            f"wait{rec}; no rank with counters completed it; rank {p} is the member left: {why}",
                            "", w0.source))
        # Every rank issued the first collective not completed everywhere: compare what they issued.
        if entries_at is not None and not unknown and all(v.done is not None for v in known.values()):
            s0 = min(v.done for v in known.values()) + 1
            if all(v.enq >= s0 for v in known.values()):
                at = entries_at(pg, s0)
                if len(at) >= 2:
                    for b in _mismatch(pg, s0, at, descs):
                        blame(b)
    out.waits = waits
    if not hang:
        return out
    _flip_majorities(views, members, blames, waits, descs)
    out.blames = blames
    culprits = _sinks(blames, waits)
    kinds = {b.kind for r in culprits for b in blames[r]}
    if kinds & {"mismatch", "extra"}:
        culprits = [r for r in culprits if any(b.kind in ("mismatch", "extra") for b in blames[r])]
        out.kind = "mismatch" if any(b.kind == "mismatch" for r in culprits for b in blames[r]) else "extra"
    elif culprits:
        kinds = {b.kind for r in culprits for b in blames[r]}
        if kinds <= {"host"}:
            out.kind = "host"
        elif kinds <= {"device"}:
            out.kind = "device"
        elif kinds <= {"no_dump", "no_status"}:
            out.kind = "no_dump"
        else:
            out.kind = "mixed"
    else:
        out.kind = "stuck"
    out.culprits = sorted(culprits)
    waiting = sorted({w.waiter for w in waits})
    out.waiting = waiting
    reach = _reach(waits)
    out.unexplained = [r for r in waiting if r not in culprits and not (reach.get(r, set()) & set(culprits))]
    return out


def _reach(waits: list[Wait]) -> dict[int, set[int]]:
    """rank -> every rank it waits on, directly or through others."""
    adj: dict[int, set[int]] = {}
    for w in waits:
        adj.setdefault(w.waiter, set()).add(w.target)
    out: dict[int, set[int]] = {}
    for start in adj:
        seen, todo = set(), list(adj[start])
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(adj.get(n, ()))
        out[start] = seen
    return out


def _sinks(blames: dict[int, list[Blame]], waits: list[Wait]) -> list[int]:
    """Blamed ranks that wait on no other blamed rank (one that does not wait back on them); `device` and
    `mismatch` blames stand on their own (the rank's own device / its own op)."""
    reach = _reach(waits)
    out = []
    for r, bs in blames.items():
        if any(b.kind in ("device", "mismatch", "extra") for b in bs):
            out.append(r)
            continue
        mine = reach.get(r, set())
        if not any(q != r and q in blames and r not in reach.get(q, set()) for q in mine):
            out.append(r)
    return sorted(out)


def _flip_majorities(views, members, blames, waits, descs) -> None:
    """In a group where most members never issued the collective a few wait in, and those most wait on nothing,
    the few ran a collective the others do not have: blame the few (`extra`) instead of the many (`host`)."""
    idle = {r for r in blames} - {w.waiter for w in waits}
    for pg in sorted(views):
        behind = sorted(r for r, bs in blames.items() if any(b.kind == "host" and b.pg == pg for b in bs))
        size = len(set(members.get(pg) or ()) | set(views[pg]))
        if not behind or len(behind) * 2 <= size or not set(behind) <= idle:
            continue
        ahead = sorted({w.waiter for w in waits if w.pg == pg and w.kind == "host"})
        b0 = next(b for b in blames[behind[0]] if b.kind == "host" and b.pg == pg)
        for r in behind:
            blames[r] = [b for b in blames[r] if not (b.kind == "host" and b.pg == pg)]
            if not blames[r]:
                del blames[r]
        for r in ahead:
            v = views[pg][r]
            blames.setdefault(r, []).append(Blame(
                r, "extra", pg, b0.seq, b0.op, v.enq, tuple(behind), b0.value,
                f"{_label(pg, descs)}: only {_ranks_text(ahead)} issued collective #{b0.seq}"
                f"{' (' + b0.op + ')' if b0.op else ''}; {_ranks_text(behind)} never did and wait on nothing",
                v.source, b0.source))

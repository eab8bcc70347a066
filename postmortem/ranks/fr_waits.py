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
    """`waiter` cannot go on before each of `targets` does its part of `seq` in `pg`."""
    waiter: int
    targets: tuple[int, ...]
    kind: str                            # host | device | unknown | p2p
    pg: str
    seq: int | None


class WaitGraph:
    """Who waits on whom, directly or through others. A wait on several ranks goes through one hub node, so N
    ranks waiting on the same M costs N + M edges, not N * M; reachability is per strongly connected component, as
    bit masks of ranks (Tarjan, iterative: no recursion limit at thousands of ranks)."""

    def __init__(self, waits: list[Wait]):
        self.adj: dict[object, set] = {}
        hubs: dict[tuple[int, ...], tuple[str, int]] = {}
        for w in waits:
            if len(w.targets) == 1:
                self.adj.setdefault(w.waiter, set()).add(w.targets[0])
            elif w.targets:
                hub = hubs.setdefault(w.targets, ("hub", len(hubs)))
                self.adj.setdefault(w.waiter, set()).add(hub)
                self.adj.setdefault(hub, set()).update(w.targets)
        self.comp: dict[object, int] = {}
        self.members: list[int] = []      # component -> bit mask of its ranks
        self.cyclic: list[bool] = []
        self.below: list[int] = []        # component -> ranks reachable from it, outside it
        self._components()

    def _components(self) -> None:
        index: dict[object, int] = {}
        low: dict[object, int] = {}
        stack: list = []
        on: set = set()
        nodes = list(self.adj) + [t for ts in self.adj.values() for t in ts]
        for root in nodes:
            if root in index:
                continue
            work = [(root, iter(self.adj.get(root, ())))]
            index[root] = low[root] = len(index)
            stack.append(root)
            on.add(root)
            while work:
                node, it = work[-1]
                nxt = next(it, None)
                if nxt is not None:
                    if nxt not in index:
                        index[nxt] = low[nxt] = len(index)
                        stack.append(nxt)
                        on.add(nxt)
                        work.append((nxt, iter(self.adj.get(nxt, ()))))
                    elif nxt in on:
                        low[node] = min(low[node], index[nxt])
                    continue
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    cid, mask, nodes_in = len(self.members), 0, []
                    while True:
                        n = stack.pop()
                        on.discard(n)
                        self.comp[n] = cid
                        nodes_in.append(n)
                        if isinstance(n, int):
                            mask |= 1 << n
                        if n == node:
                            break
                    self.members.append(mask)
                    self.cyclic.append(len(nodes_in) > 1 or node in self.adj.get(node, ()))
                    # Tarjan closes a component after every component it reaches: their `below` is known.
                    below = 0
                    for n in nodes_in:
                        for t in self.adj.get(n, ()):
                            ct = self.comp[t]
                            if ct != cid:
                                below |= self.members[ct] | self.below[ct]
                    self.below.append(below)

    def reach(self, rank: int) -> int:
        """Bit mask of the ranks `rank` waits on, directly or through others (itself only on a cycle)."""
        c = self.comp.get(rank)
        if c is None:
            return 0
        return self.below[c] | (self.members[c] if self.cyclic[c] else 0)

    def same_component(self, a: int, b: int) -> bool:
        return a in self.comp and self.comp.get(a) == self.comp.get(b)

    def reach_without(self, start: int, banned: int) -> int:
        """Bit mask of the ranks `start` waits on without passing through `banned`."""
        seen, todo, mask = {start}, [start], 0
        while todo:
            for n in self.adj.get(todo.pop(), ()):
                if n not in seen and n != banned:
                    seen.add(n)
                    todo.append(n)
                    if isinstance(n, int):
                        mask |= 1 << n
        return mask


def _mask(ranks) -> int:
    out = 0
    for r in ranks:
        out |= 1 << r
    return out


def _ranks_of(mask: int) -> list[int]:
    out, r = [], 0
    while mask:
        if mask & 1:
            out.append(r)
        mask >>= 1
        r += 1
    return out


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
                    waits.append(Wait(v.rank, (v.p2p_peer,), "p2p", pg, v.p2p_seq))
                    hang = True
            continue
        known = {r: v for r, v in by_rank.items() if v.enq is not None}
        unknown = sorted(set(members.get(pg) or ()) - set(known))
        pending = {r: v for r, v in known.items() if v.done is not None and v.enq > v.done}
        if len(known) + len(unknown) < 2 or not pending:
            continue
        dones = [v.done for v in known.values() if v.done is not None]
        if dones and max(dones) > min(v.enq for v in known.values()):
            # No collective completes anywhere before every member enqueued it: these counters count something
            # else (send/recv numbered per rank, in a dump that kept no entry to say so).
            out.p2p_groups += 1
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
                rec = f", dump entry {v.pending_record}" if v.pending_seq == s and v.pending_record is not None \
                    else ""
                completed_by = sorted(completed_by)
                # gloo counts a work that ended in an error (a timeout) as completed: say 'finished' for it
                done_word = "finished" if str(op or "").startswith("gloo:") else "completed"
                blame(Blame(r, "device", pg, s, op, v.done, tuple(completed_by), top_done,
                            f"{_label(pg, descs)}: rank {r} enqueued up to #{v.enq} but completed only #{v.done} "
                            f"(#{s}{' ' + op if op else ''} still {'pending' if not rec else 'scheduled' + rec}); "
                            f"{_ranks_text(completed_by)} {done_word} #{s}"
                            + (" (gloo counts a work that ended in an error, such as a timeout, as done)"
                               if done_word == "finished" else "")
                            + (f" and on to #{top_done}" if top_done and top_done > s else ""),
                            v.source, known[completed_by[0]].source))
        waiters_of: dict[tuple[str, int], list[int]] = {}
        for r, v in pending.items():
            if r in device:
                continue
            s = v.done + 1
            never = [p for p, w in known.items() if w.enq < s]
            if never:
                waits.append(Wait(r, tuple(sorted(never)), "host", pg, s))
                for p in never:
                    waiters_of.setdefault(("host", p), []).append(r)
            elif unknown:
                waits.append(Wait(r, tuple(unknown), "unknown", pg, s))
                for u in unknown:
                    waiters_of.setdefault(("unknown", u), []).append(r)
            elif device:
                waits.append(Wait(r, tuple(sorted(device)), "device", pg, s))
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
                waits.append(Wait(w, tuple(late), "device", pg, s))
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
    graph = WaitGraph(waits)
    blames = _keep_needed_unknowns(blames, waits, graph)
    out.blames = blames
    culprits = _sinks(blames, graph)
    kinds = {b.kind for r in culprits for b in blames[r]}
    if kinds & {"mismatch", "extra"}:
        culprits = [r for r in culprits if any(b.kind in ("mismatch", "extra") for b in blames[r])]
        out.kind = "mismatch" if any(b.kind == "mismatch" for r in culprits for b in blames[r]) else "extra"
    elif culprits:
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
    out.waiting = sorted({w.waiter for w in waits})
    found = _mask(culprits)
    out.unexplained = [r for r in out.waiting if r not in culprits and not graph.reach(r) & found]
    return out


def _sinks(blames: dict[int, list[Blame]], graph: WaitGraph) -> list[int]:
    """Blamed ranks that wait on no blamed rank outside their own cycle; `device`, `mismatch` and `extra` blames
    stand on their own (the rank's own device / its own op)."""
    blamed = _mask(blames)
    out = []
    for r, bs in blames.items():
        if any(b.kind in ("device", "mismatch", "extra") for b in bs):
            out.append(r)
            continue
        c = graph.comp.get(r)
        own = graph.members[c] if c is not None else 1 << r
        if not graph.reach(r) & blamed & ~own:
            out.append(r)
    return sorted(out)


def _keep_needed_unknowns(blames: dict[int, list[Blame]], waits: list[Wait],
                          graph: WaitGraph) -> dict[int, list[Blame]]:
    """A rank blamed only for lacking a dump (or counters) stays blamed when some waiter has no other reason to
    wait. A waiter that also waits on a pipeline peer leading (not back through the waiter) to a culprit with
    direct evidence is stuck because of that pipeline, and a rank whose dump was merely not collected is not named
    beside the real culprit. Otherwise a missing dump where the other ranks dumped is evidence on its own: the
    watchdog of a live process writes one."""
    weak = ("no_dump", "no_status")
    strong = {r: [b for b in bs if b.kind not in weak] for r, bs in blames.items()}
    strong = {r: bs for r, bs in strong.items() if bs}
    found = _mask(_sinks(strong, graph))
    p2p: dict[int, list[int]] = {}
    for x in waits:
        if x.kind == "p2p":
            p2p.setdefault(x.waiter, []).extend(x.targets)

    def explained(w: int) -> bool:
        for t in p2p.get(w, ()):
            if found >> t & 1:
                return True
            beyond = graph.reach_without(t, w) if graph.same_component(t, w) else graph.reach(t)
            if beyond & found:
                return True
        return False

    out = dict(strong)
    for r, bs in blames.items():
        unk = [b for b in bs if b.kind in weak]
        waiters = {p for b in unk for p in b.peers}
        if unk and any(not found >> w & 1 and not explained(w) for w in waiters):
            out[r] = out.get(r, []) + unk
    return out


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

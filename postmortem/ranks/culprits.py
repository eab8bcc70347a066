"""Culprits from end-state asymmetry: the ranks whose end is not a consequence of another rank's, found from how
every rank ended (the `end` columns of the `ranks` table), whatever the job printed.

One mechanism for every category, tried in this order:
- the earliest failure a rank came to on its own (an exception that is not a timeout or a closed peer, a fatal
  signal, a kill, an error exit without a message); every rank failing alike names no one;
- the minority that did something else while the rest waited in a collective: busy elsewhere, left (exited), never
  reported waiting (peers timing out means it was alive; peers seeing closed sockets means it was gone);
- the minority still in a collective after the rest had exited normally (it called one the others never did);
- among ranks that all wait: the minority waiting at another call site, or behind on the collective counters;
- the odd lines (postmortem.ranks.odd_lines): templates a minority of ranks printed near their end.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from postmortem.ranks.ends import CONSEQUENCE_ENDS, IN_COLLECTIVE_ENDS, ROOT_ENDS
from postmortem.verdict.findings import Evidence


@dataclass
class Culprits:
    """The ranks end-state asymmetry points at, and why."""
    ranks: list[int] = field(default_factory=list)
    mechanism: str = "none"   # root-failure, alike, busy-while-waited, left-while-waited, never-reached,
                              # extra-collective, other-call-site, lagging, odd-lines, single-rank, none
    reason: str = ""
    strength: float = 0.0     # how well the asymmetry alone supports the culprits (0..1)
    affected: list[int] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)

    @property
    def alike(self) -> bool:
        return self.mechanism == "alike"

    def to_dict(self) -> dict:
        return {"ranks": self.ranks, "mechanism": self.mechanism, "reason": self.reason,
                "strength": self.strength, "affected": self.affected}


def _null(v) -> bool:
    return v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and v != v)


def _ev(rec: dict, text: str) -> Evidence:
    at = rec.get("end_at") or rec.get("stack_at") or "?"
    src, _, line = str(at).rpartition(":")
    if not line.isdigit():
        src, line = str(at), ""
    return Evidence(src, int(line) if line else None, int(rec["rank"]), text[:300])


def _say(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks[:8])) + (" …" if len(ranks) > 8 else "")


def _key(rec: dict) -> str:
    """What failed, for grouping ranks that failed alike: the exception type, or the kind of end."""
    detail = str(rec.get("end_detail") or "")
    if rec["end"] == "exception":
        head = detail.split(":", 1)[0]
        return f"exception:{head}"
    return str(rec["end"])


def _is_root(rec: dict) -> bool:
    """An end the rank came to on its own: a root end, or an exit after logging why it stops (postmortem.ranks.last_words)."""
    return rec["end"] in ROOT_ENDS or (rec["end"] == "exited" and rec.get("end_cause") == "root")


def _order(rec: dict) -> tuple:
    t = rec.get("end_ts")
    kind = ROOT_ENDS.index(rec["end"]) if rec["end"] in ROOT_ENDS else len(ROOT_ENDS)
    if not _null(t):
        return (0, pd.Timestamp(t).value, kind)
    return (1, kind, 0)


def find_culprits(ranks: pd.DataFrame, odd: pd.DataFrame | None = None) -> Culprits:
    """The culprit ranks from the `ranks` table (and the odd lines, when the ends alone name no one)."""
    if ranks is None or ranks.empty or "end" not in ranks.columns:
        return Culprits()
    recs = [r for r in ranks.to_dict("records") if not _null(r.get("end"))]
    if not recs:
        return Culprits()
    known = [int(r["rank"]) for r in recs]
    out = _root_failures(recs) or _asymmetry(recs) or _call_sites(recs)
    failed = any(_is_root(r) or r["end"] in CONSEQUENCE_ENDS for r in recs)
    if failed and (out is None or not out.ranks and not out.alike):
        odd_out = _from_odd(odd, known)  # odd lines name a culprit only where some rank's end says the job failed
        if odd_out.ranks:
            return odd_out
    return out or Culprits()


def _root_failures(recs: list[dict]) -> Culprits | None:
    root = [r for r in recs if _is_root(r)]
    if not root:
        return None
    others = [int(r["rank"]) for r in recs if not _is_root(r)]
    keys = {_key(r) for r in root}
    if not others and len(root) >= 2 and len(keys) == 1:
        return Culprits([], "alike", f"every rank ended alike ({root[0]['end_detail']})", 0.8,
                        affected=[int(r["rank"]) for r in root], evidence=[_ev(root[0], str(root[0]["end_detail"]))])
    root.sort(key=_order)
    first = root[0]
    same = [r for r in root if _key(r) == _key(first)]
    culprits = sorted(int(r["rank"]) for r in same)
    if len(recs) == 1:
        return Culprits(culprits, "single-rank", f"{_say(culprits)} {first['end']}: {first['end_detail']}", 0.6,
                        evidence=[_ev(first, str(first["end_detail"]))])
    strength = 0.9 if len(keys) == 1 else 0.65
    if not others:  # every rank failed on its own, in different ways: the earliest is only a guess
        strength = 0.5
    reason = (f"{_say(culprits)} ended on {'its' if len(culprits) == 1 else 'their'} own "
              f"({first['end'].replace('_', ' ')}: {first['end_detail']})"
              + (f"; {_say(others)} ended as a consequence" if others else ""))
    return Culprits(culprits, "root-failure", reason, strength, affected=others,
                    evidence=[_ev(r, str(r["end_detail"])) for r in same[:3]])


def _asymmetry(recs: list[dict]) -> Culprits | None:
    """No rank failed on its own: the minority that did something else than the rest."""
    by = {}
    for r in recs:
        by.setdefault(r["end"], []).append(r)
    inc = [r for e in IN_COLLECTIVE_ENDS for r in by.get(e, [])]
    exited, busy = by.get("exited", []), by.get("busy", [])
    quiet = by.get("terminated", []) + by.get("running", [])
    ranks_of = lambda rs: sorted(int(r["rank"]) for r in rs)  # noqa: E731
    if inc and busy and len(busy) <= len(inc):
        return Culprits(ranks_of(busy), "busy-while-waited",
                        f"{_say(ranks_of(busy))} {'was' if len(busy) == 1 else 'were'} busy outside collectives "
                        f"({busy[0]['end_detail']}) while {_say(ranks_of(inc))} waited",
                        0.85, affected=ranks_of(inc + exited + quiet),
                        evidence=[_ev(r, str(r["end_detail"])) for r in busy[:3]] + [_ev(inc[0], str(inc[0]["end_detail"]))])
    if inc and exited:
        if len(exited) < len(inc):
            return Culprits(ranks_of(exited), "left-while-waited",
                            f"{_say(ranks_of(exited))} exited normally while {_say(ranks_of(inc))} were still in a "
                            "collective: it ran fewer collectives than its peers", 0.8, affected=ranks_of(inc + quiet),
                            evidence=[_ev(exited[0], str(exited[0]["end_detail"])), _ev(inc[0], str(inc[0]["end_detail"]))])
        if len(inc) < len(exited):
            return Culprits(ranks_of(inc), "extra-collective",
                            f"{_say(ranks_of(inc))} waited in a collective after {_say(ranks_of(exited))} had exited "
                            "normally: it called a collective the others never did", 0.8,
                            affected=ranks_of(exited + quiet),
                            evidence=[_ev(inc[0], str(inc[0]["end_detail"])), _ev(exited[0], str(exited[0]["end_detail"]))])
        return _tie_by_steps(inc, exited) or Culprits(
            [], "none", "as many ranks exited as waited: the asymmetry does not say who diverged", 0.0,
            affected=ranks_of(inc + exited))
    lost_all = bool(inc) and all(r["end"] == "lost_peer" for r in inc)
    # Peers that saw the connection close say the silent rank was gone, however many they are; peers that timed
    # out only say someone was elsewhere: then the silent ranks must be a strict minority.
    if inc and quiet and len(quiet) <= len(inc):
        ev = [_ev(r, str(r["end_detail"] or r["end"])) for r in quiet[:2] if r.get("end_at")] \
            + [_ev(inc[0], str(inc[0]["end_detail"]))]
        if lost_all:
            return Culprits(ranks_of(quiet), "gone",
                            f"{_say(ranks_of(quiet))} left without a word: {_say(ranks_of(inc))} saw "
                            f"{'its' if len(quiet) == 1 else 'their'} connection close in a collective", 0.7,
                            affected=ranks_of(inc), evidence=ev)
        return Culprits(ranks_of(quiet), "never-reached",
                        f"{_say(ranks_of(quiet))} never reported waiting in the collective {_say(ranks_of(inc))} "
                        "waited in; its peers timed out waiting: it was alive, working elsewhere",
                        0.7 if len(quiet) < len(inc) else 0.5, affected=ranks_of(inc), evidence=ev)
    return None


def _tie_by_steps(inc: list[dict], exited: list[dict]) -> Culprits | None:
    """As many ranks exited normally as stayed in a collective: their training steps tell which side diverged. The
    ones that exited had done every step the others had: the ranks still in a collective called one more (a
    rank-0-only save or evaluation that synchronises); the ones that exited had done fewer: they left early."""
    def steps(rs):
        return [r.get("last_step") for r in rs if not _null(r.get("last_step"))]
    a, b = steps(inc), steps(exited)
    if len(a) < len(inc) or len(b) < len(exited) or not a or not b:
        return None
    ranks_of = lambda rs: sorted(int(r["rank"]) for r in rs)  # noqa: E731
    if min(b) >= max(a):
        return Culprits(ranks_of(inc), "extra-collective",
                        f"{_say(ranks_of(inc))} stayed in a collective after {_say(ranks_of(exited))} had done the "
                        "same training steps and exited normally: it called a collective the others never did", 0.6,
                        affected=ranks_of(exited), evidence=[_ev(inc[0], str(inc[0]["end_detail"]))])
    if max(b) < min(a):
        return Culprits(ranks_of(exited), "left-while-waited",
                        f"{_say(ranks_of(exited))} exited after fewer training steps ({max(b)}) than "
                        f"{_say(ranks_of(inc))} ({min(a)}), which were still in a collective", 0.6,
                        affected=ranks_of(inc), evidence=[_ev(exited[0], str(exited[0]["end_detail"]))])
    return None


def _call_sites(recs: list[dict]) -> Culprits | None:
    """Every rank waits: the minority at another call site (from stacks), or behind on the collective counters;
    with no minority, the ranks waiting outside the training step while others wait inside it."""
    inc = [r for r in recs if r["end"] in IN_COLLECTIVE_ENDS]
    if len(inc) < 2 or len(inc) < len(recs):
        return None
    timing = _arrival(inc)
    if timing is not None:
        return timing
    if len(inc) == 2:
        return _off_step(inc)
    sites: dict = {}
    for column in ("stack_where", "last_op"):  # the call site a stack shows, else the op a timeout names
        if all(not _null(r.get(column)) for r in inc):
            for r in inc:
                sites.setdefault(str(r[column]), []).append(int(r["rank"]))
            break
    if len(sites) >= 2:
        groups = sorted(sites.items(), key=lambda kv: len(kv[1]))
        small, big = groups[0], groups[-1]
        if len(small[1]) < len(groups[1][1]) and len(small[1]) * 2 < len(inc):
            return Culprits(sorted(small[1]), "other-call-site",
                            f"{_say(sorted(small[1]))} waited at {small[0]} while {len(big[1])} others waited at "
                            f"{big[0]}: the ranks called different collectives", 0.75,
                            affected=sorted(int(r["rank"]) for r in inc if int(r["rank"]) not in small[1]))
        off = _off_step(inc)
        if off is not None:
            return off
    return _lagging(inc)


def _arrival(inc: list[dict]) -> Culprits | None:
    """Ranks that all ended in collectives, some timing out and some losing a peer. With one timeout for all, a rank
    that lost its peer reached its collective after the others had given up: when those are the minority they
    arrived late (busy elsewhere: a straggler); when the ranks that timed out are the minority, they entered a
    collective first and alone, one the others never joined until it gave up."""
    waited = sorted(int(r["rank"]) for r in inc if r["end"] == "waiting")
    lost = sorted(int(r["rank"]) for r in inc if r["end"] == "lost_peer")
    if not waited or not lost or len(waited) == len(lost):
        return None
    if len(lost) < len(waited):
        rec = next(r for r in inc if int(r["rank"]) == lost[0])
        return Culprits(lost, "late-arrival",
                        f"{_say(lost)} reached {'its' if len(lost) == 1 else 'their'} collective only after "
                        f"{_say(waited)} had timed out waiting in theirs and left (it saw their connections "
                        "close): it was busy elsewhere for longer than the timeout", 0.7, affected=waited,
                        evidence=[_ev(rec, str(rec["end_detail"]))])
    rec = next(r for r in inc if int(r["rank"]) == waited[0])
    return Culprits(waited, "first-to-wait",
                    f"{_say(waited)} timed out in a collective the others never joined: {_say(lost)} were still "
                    "elsewhere and only saw its connection close when it gave up", 0.7, affected=lost,
                    evidence=[_ev(rec, str(rec["end_detail"]))])


def _off_step(inc: list[dict]) -> Culprits | None:
    """Ranks waiting in a collective outside the training step (a barrier after the loop, a gather in evaluation
    or saving) while the others wait in the step's own collective (DDP's gradient all-reduce): the ones outside
    left the sequence of collectives every step runs."""
    known = [r for r in inc if r.get("stack_in_step") in (True, False)]
    if len(known) < len(inc):
        return None
    off = sorted(int(r["rank"]) for r in known if r["stack_in_step"] is False)
    on = sorted(int(r["rank"]) for r in known if r["stack_in_step"] is True)
    if not off or not on:
        return None
    where = next(r for r in known if r["stack_in_step"] is False)
    return Culprits(off, "other-call-site",
                    f"{_say(off)} waited in a collective outside the training step ({where.get('stack_where')}) "
                    f"while {_say(on)} waited in the step's own collective: the ranks' collective sequences "
                    "diverged there", 0.65, affected=on,
                    evidence=[_ev(where, f"stack: {where.get('stack_where')}")])


def _lagging(inc: list[dict]) -> Culprits | None:
    """The minority whose collective counters are behind the rest."""
    done = {int(r["rank"]): int(r["last_completed"]) for r in inc if not _null(r.get("last_completed"))}
    if len(done) < 2:
        return None
    low = min(done.values())
    behind = sorted(r for r, v in done.items() if v == low)
    if max(done.values()) > low and len(behind) * 2 < len(done):
        return Culprits(behind, "lagging", f"{_say(behind)} completed collective #{low} while the others reached "
                                           f"#{max(done.values())}", 0.7,
                        affected=sorted(r for r in done if r not in behind))
    return None


def _from_odd(odd: pd.DataFrame | None, known: list[int]) -> Culprits:
    """Ranks that printed near their end what the others did not, or did not print what the others did
    (postmortem.ranks.odd_lines), when the suspect rows agree on a strict minority."""
    if odd is None or odd.empty or "suspect" not in odd.columns:
        return Culprits()
    sus = odd[odd["suspect"]]
    if sus.empty:
        return Culprits()
    votes: dict = {}
    for rs in sus["ranks"]:
        votes[tuple(sorted(int(r) for r in rs))] = votes.get(tuple(sorted(int(r) for r in rs)), 0) + 1
    best = max(votes.items(), key=lambda kv: (kv[1], -len(kv[0])))[0]
    ranks = list(best)
    seen = set(known) | {int(r) for rs in odd["ranks"] for r in rs}
    if not ranks or len(ranks) * 2 >= max(len(seen), 1):
        return Culprits()
    rows = sus[[tuple(sorted(int(r) for r in rs)) == best for rs in sus["ranks"]]]
    first = rows.iloc[0]
    what = (f"printed near {'its' if len(ranks) == 1 else 'their'} end what no other rank printed: "
            f"`{str(first['example'])[:120]}`" if first["kind"] == "minority" else
            f"did not print what every other rank printed near its end: `{str(first['example'])[:120]}`")
    evidence = []
    for _, row in rows.head(3).iterrows():
        src, _, line = str(row["at"][0]).rpartition(":")
        evidence.append(Evidence(src, int(line) if line.isdigit() else None,
                                 ranks[0] if row["kind"] == "minority" else None, str(row["example"])[:300]))
    return Culprits(ranks, "odd-lines", f"{_say(ranks)} {what}", 0.55,
                    affected=sorted(r for r in seen if r not in ranks), evidence=evidence)

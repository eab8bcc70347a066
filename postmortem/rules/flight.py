"""Flight-recorder rule: over every collective group, which ranks held the others up, and what each of them did."""
from __future__ import annotations

from collections import Counter

import pandas as pd

from postmortem.verdict.sentences import clip
from postmortem.verdict.findings import Evidence, Finding
from postmortem.ranks.fr_waits import Attribution, Blame, RankView, attribute
from postmortem.rules import facts, rule

_CATEGORY = {"host": "straggler", "device": "straggler", "mixed": "straggler", "no_dump": "straggler",
             "extra": "barrier_skew", "mismatch": "barrier_skew", "stuck": "collective_timeout"}
_MAX_EVIDENCE = 10


def _int(v) -> int | None:
    return None if v is None or (isinstance(v, float) and v != v) else int(v)


def group_views(tables) -> tuple[dict[str, dict[int, RankView]], dict[str, list[int]], dict[str, str], set[int]]:
    """pg -> rank -> RankView from the `fr_pg_status` events (groups keyed by their global name; a group whose name
    a dump does not give is left out), pg -> member ranks, pg -> description, ranks that left a dump."""
    ev = facts.ev(tables, "fr_pg_status")
    views: dict[str, dict[int, RankView]] = {}
    members: dict[str, set[int]] = {}
    descs: dict[str, str] = {}
    dumped: set[int] = set()
    for rank, d, source in zip(ev["rank"], ev["details"], ev["source"]):
        if pd.isna(rank) or not isinstance(d, dict):
            continue
        rank = int(rank)
        dumped.add(rank)
        pg = d.get("pg")
        if pg is None:
            continue
        pg = str(pg)
        members.setdefault(pg, set()).update(d.get("ranks") or ())
        if d.get("pg_desc"):
            descs.setdefault(pg, str(d["pg_desc"]))
        views.setdefault(pg, {})[rank] = RankView(
            rank, _int(d.get("last_enqueued")), _int(d.get("last_completed")), _int(d.get("first_pending_seq")),
            d.get("first_pending_op"), _int(d.get("first_pending_record")), bool(d.get("p2p")),
            _int(d.get("p2p_peer")), d.get("p2p_pending_op"), _int(d.get("p2p_pending_seq")), str(source),
            _int(d.get("last_started")), d.get("first_pending_state"))
    coll = tables.collectives
    if len(coll):
        dumped.update(int(r) for r in coll[coll["line"].isna()]["rank"].dropna().unique())
    return views, {pg: sorted(m) for pg, m in members.items()}, descs, dumped


def _entries_at(tables, pg: str, seq: int) -> dict[int, dict]:
    coll = tables.collectives
    fr = coll[coll["line"].isna() & (coll["pg"].astype(str) == pg) & (coll["seq"] == seq)] if len(coll) else coll
    return {int(r["rank"]): r for r in fr.to_dict("records") if pd.notna(r["rank"])}


_KIND_ORDER = {"mismatch": 0, "extra": 0, "host": 1, "device": 1, "no_dump": 2, "no_status": 2}


def _ordered(bs: list[Blame], shared: Counter | None = None) -> list[Blame]:
    """Strongest evidence first: the group where the rank is most alone in being blamed, then most peers."""
    shared = shared or Counter()
    return sorted(bs, key=lambda b: (_KIND_ORDER[b.kind], shared[(b.pg, b.kind)], -len(b.peers), b.pg))


def _best(bs: list[Blame], shared: Counter | None = None) -> Blame:
    return _ordered(bs, shared)[0]


def culprit_sentence(rank: int, bs: list[Blame], shared: Counter | None = None) -> str:
    """What one culprit did, from its strongest evidence of each kind (host first, then device)."""
    parts = []
    for kind in ("mismatch", "extra", "host", "device", "no_dump", "no_status"):
        mine = [b for b in bs if b.kind == kind]
        if not mine:
            continue
        b = _best(mine, shared)
        groups = sorted({x.pg for x in mine})
        more = f" (and in {len(groups) - 1} more group{'s' if len(groups) > 2 else ''})" if len(groups) > 1 else ""
        op = f" ({b.op})" if b.op else ""
        if kind in ("mismatch", "extra"):
            return b.detail
        if kind == "device":
            parts.append(f"enqueued #{b.seq}{op} of pg {b.pg} but never completed it, while "
                         f"{'ranks' if len(b.peers) > 1 else 'rank'} {', '.join(map(str, b.peers[:6]))} did{more}")
        elif kind == "host":
            at = "never enqueued an op" if b.value is not None and b.value < 0 else f"stopped enqueuing at #{b.value}"
            parts.append(f"{at} in pg {b.pg} while peers reached #{b.peer_value}{more}")
        elif not any(p.startswith(("left no dump", "has no counters")) for p in parts):
            what = "left no dump" if kind == "no_dump" else "has no counters for the group"
            parts.append(f"{what}; its peers in pg {b.pg} issued #{b.seq}{op} and wait on it{more}")
    return f"rank {rank} " + ", and ".join(parts)


def confidence(att: Attribution, world: int) -> float:
    """Calibrated from how much the dumps agree: several groups or several waiting peers per culprit, every waiting
    rank explained by a culprit, few culprits."""
    if att.kind in ("mismatch", "extra"):
        return 0.85
    if not att.culprits:
        return 0.4
    per = []
    for r in att.culprits:
        bs = att.blames[r]
        best = 0.0
        for kind in ("host", "device", "no_dump", "no_status"):
            mine = [b for b in bs if b.kind == kind]
            if not mine:
                continue
            groups = len({b.pg for b in mine})
            peers = len({p for b in mine for p in b.peers})
            best = max(best, {"host": 0.8 if groups >= 2 or peers >= 2 else 0.7,
                              "device": 0.75 if groups >= 2 else 0.6,
                              "no_dump": 0.65 if groups >= 2 else 0.55,
                              "no_status": 0.55 if groups >= 2 else 0.5}[kind])
        per.append(best)
    conf = min(per)
    stuck = {r for _, _, _, ranks in att.stuck for r in ranks}
    if any(r in stuck and not any(b.kind == "device" for b in att.blames[r]) for r in att.culprits):
        # A culprit that stopped enqueuing while its own collectives sit issued by every member and completed by
        # none may be blocked on those (a device stall somewhere in that group), not frozen on the host.
        conf = min(conf, 0.6)
    if att.unexplained:
        conf -= 0.1  # some ranks wait on something the dumps do not pin to a culprit
    if world and len(att.culprits) * 2 > world:
        conf = min(conf, 0.5)  # most of the job blamed: more likely a shared cause than that many faults
    return round(max(conf, 0.3), 2)


def _shared(att: Attribution) -> Counter:
    """(pg, kind) -> how many culprits carry that blame."""
    return Counter((b.pg, b.kind) for r in att.culprits for b in {(x.pg, x.kind): x for x in att.blames[r]}.values())


def _evidence(att: Attribution) -> list[Evidence]:
    shared = _shared(att)
    out: list[Evidence] = []
    for r in att.culprits:
        for b in _ordered(att.blames[r], shared)[:2]:
            out.append(Evidence(b.source or b.peer_source or "flight recorder", None, r, b.detail[:400]))
    seen = set()
    for r in att.culprits:
        b = _best(att.blames[r], shared)
        if b.peer_source and b.peers and (b.peer_source, b.pg) not in seen:
            seen.add((b.peer_source, b.pg))
            out.append(Evidence(b.peer_source, None, b.peers[0], f"rank {b.peers[0]}'s side: {b.detail}"[:400]))
    return out[:_MAX_EVIDENCE]


@rule(id="flight-recorder-first-pending", title="The flight recorder shows who held up the collectives",
      category="straggler", severity="critical",
      description="Over every collective process group (keyed by its global name, never a rank's local id), the "
                  "last collective each rank enqueued and completed: a rank that never enqueued what its peers "
                  "wait in stopped on the host; a rank that enqueued a collective its peers completed but never "
                  "completed it stopped on the device; a member without a dump where everyone else waits is the one "
                  "they wait for. Pipeline send/recv only propagate a wait. Different ops or sizes at the same "
                  "sequence number, or a collective only a few ranks issued, mean the code paths diverged.",
      remediation="Look at what the culprit rank was doing at that point (its stack, its last log lines, its GPU); "
                  "for diverged code paths make every rank issue the same collectives in the same order.",
      false_positives=("Dumps taken at different moments (one rank dumped much later) can show progress that is "
                       "not a hang.",
                       "A rank whose dump is missing only because it was not collected looks like a rank that "
                       "died."))
def flight_recorder(tables):
    views, members, descs, dumped = group_views(tables)
    if not views:
        return []
    att = attribute(views, members, dumped, descs, lambda pg, seq: _entries_at(tables, pg, seq))
    if att.kind is None:
        return []
    world = len({r for m in members.values() for r in m} | dumped)
    conf = confidence(att, world)
    if _CATEGORY[att.kind] == "straggler":
        # the counters name the rank that held the others up, not what it did meanwhile (work, a logger, a data
        # loader, a lock): its stack or its last lines say which
        conf = min(conf, 0.75)
    if att.culprits:
        shared = _shared(att)
        sentences = [culprit_sentence(r, att.blames[r], shared) for r in att.culprits]
        title = "Flight recorder: " + "; ".join(sentences)
        waiting = [r for r in att.waiting if r not in att.culprits]
        explanation = (
            "The flight-recorder dumps (each rank's last collectives) compared in " + f"{att.compared_groups} process "
            + ("group" if att.compared_groups == 1 else "groups") + " with unfinished work"
            + (f" ({att.p2p_groups} point-to-point group(s) read as waits only)" if att.p2p_groups else "")
            + ": " + "; ".join(sentences) + ". "
            + {"host": "A rank that never enqueued what its peers wait in was stuck on the host before the call "
                       "(a held GIL, a long CPU step, a dead or frozen process).",
               "device": "A rank that enqueued a collective its peers completed, but never completed it, stopped on "
                         "the device side (a GPU error or hang, or its watchdog stopped).",
               "mixed": "Host-side ranks never enqueued what the others wait in; device-side ranks enqueued "
                        "collectives their peers completed but never completed them (a GPU error or hang).",
               "no_dump": "Ranks that left no dump while their peers wait on them most likely died or froze before "
                          "the dumps were written.",
               "extra": "The ranks followed different code paths: a few issued a collective the others never do.",
               "mismatch": "The ranks followed different code paths: they issued different collectives at the same "
                           "point."}[att.kind]
            + (f" {len(waiting)} other rank(s) wait on them." if waiting else "")
            + (f" Ranks {att.unexplained[:8]} wait on something the dumps do not pin down." if att.unexplained
               else ""))
    else:
        pg, seq, op, _ = min(att.stuck, key=lambda t: (t[0], t[1])) if att.stuck else ("?", 0, None, ())
        stuck_ranks = sorted({r for t in att.stuck for r in t[3]})
        title = (f"Flight recorder: ranks are stuck in collectives every member issued and none completed "
                 f"(e.g. pg {pg} #{seq}{' ' + op if op else ''})")
        explanation = (f"{len(stuck_ranks)} rank(s) wait in collectives that every member issued and none "
                       "completed; no rank is behind the others in any group, so the dumps single out nobody "
                       "(a device-side stall on every member, or a cause outside these groups).")
    ev = _evidence(att) if att.culprits else []
    remediation = ("Make every rank issue the same collectives in the same order."
                   if att.kind in ("mismatch", "extra") else
                   "Find out what the culprit rank was doing at that point (its stack, its last log lines, "
                   "nvidia-smi / dmesg for its GPU).")
    return [Finding(
        rule="flight-recorder-first-pending", category=_CATEGORY[att.kind], confidence=conf, severity="critical",
        title=clip(title, 200), explanation=explanation, remediation=remediation, culprit_ranks=att.culprits,
        affected_ranks=[r for r in att.waiting if r not in att.culprits], evidence=ev, order=(1, float("inf")),
        explains=("collective_timeout", "rank_crash", "unknown"))]

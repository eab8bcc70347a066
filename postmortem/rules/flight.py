"""Flight-recorder rule: per process group, the first collective some rank did not complete, and who held it up."""
from __future__ import annotations

from collections import Counter

import pandas as pd

from postmortem.sentences import clip
from postmortem.findings import Evidence, Finding
from postmortem.rules import facts, rule

_UNEVEN_OPS = ("all_to_all", "alltoall", "gather", "scatter")


def _status(tables) -> dict[str, dict[int, dict]]:
    """pg -> rank -> the dump's status of that group (last enqueued/started/completed, first pending entry)."""
    ev = facts.ev(tables, "fr_pg_status")
    out: dict[str, dict[int, dict]] = {}
    for rank, d, source in zip(ev["rank"], ev["details"], ev["source"]):
        if pd.isna(rank) or not isinstance(d, dict):
            continue
        out.setdefault(str(d.get("pg")), {})[int(rank)] = {**d, "source": source}
    return out


def _entries_at(tables, pg: str, seq: int) -> dict[int, dict]:
    coll = tables.collectives
    fr = coll[coll["line"].isna() & (coll["pg"].astype(str) == pg) & (coll["seq"] == seq)] if len(coll) else coll
    return {int(r["rank"]): r for r in fr.to_dict("records") if pd.notna(r["rank"])}


def judge_group(pg: str, ranks: dict[int, dict], entries_at) -> dict | None:
    """The verdict for one group: the first collective not completed by every rank and the ranks responsible.

    Returns {seq, kind: missing|mismatch|device, culprits, waiting, op, detail} or None when every rank completed
    everything it recorded. Peers that completed the collective are never culprits; a peer that never issued it is
    (host side); when all issued and none completed, the ranks whose device never started it are (device side)."""
    done = {r: s.get("last_completed") for r, s in ranks.items()}
    enq = {r: s.get("last_enqueued") for r, s in ranks.items()}
    if any(v is None for v in done.values()):
        return None
    target = min(int(v) + 1 for v in done.values())
    if all(enq.get(r) is not None and int(enq[r]) < target for r in ranks):
        return None  # nobody issued anything past what everybody completed
    completed = [r for r in ranks if int(done[r]) >= target]
    never = [r for r in ranks if r not in completed and (enq.get(r) is None or int(enq[r]) < target)]
    issued = [r for r in ranks if r not in completed and r not in never]
    at = entries_at(pg, target)
    op = Counter(str(e.get("op")) for e in at.values()).most_common(1)[0][0] if at else None
    if never and len(never) * 2 > len(ranks):
        # Most ranks never issued it: the few that did ran a collective the others do not have (rank-conditional
        # code, an extra batch), so they are the odd ones out.
        return {"seq": target, "kind": "mismatch", "culprits": sorted(issued), "waiting": sorted(issued),
                "op": op, "detail": f"only ranks {sorted(issued)} issued collective #{target} ({op}); ranks "
                                    f"{sorted(never)} never did"}
    if never:
        return {"seq": target, "kind": "missing", "culprits": sorted(never), "waiting": sorted(issued),
                "op": op, "detail": f"ranks {sorted(never)} never issued collective #{target} ({op}) that ranks "
                                    f"{sorted(issued + completed)} issued"}
    # Every rank issued it. Different ops/sizes/dtypes at the same seq: the code paths diverged.
    for fld in ("op", "numel_in", "dtype"):
        values = {r: e.get(fld) for r, e in at.items() if e.get(fld) is not None and e.get(fld) == e.get(fld)}
        if fld == "numel_in" and any(u in str(op or "").lower() for u in _UNEVEN_OPS):
            continue  # all_to_all / gather legitimately move different sizes per rank
        if len(set(values.values())) > 1:
            common, n = Counter(values.values()).most_common(1)[0]
            odd = sorted(r for r, v in values.items() if v != common) if n * 2 > len(values) else []
            return {"seq": target, "kind": "mismatch", "culprits": odd, "waiting": sorted(issued),
                    "op": op, "detail": f"collective #{target}: {fld} differs across ranks ("
                                        + ", ".join(f"rank {r}={v}" for r, v in sorted(values.items())[:8]) + ")"}
    started = {r: ranks[r].get("last_started") for r in issued}
    if completed or any(v is None or int(v) < 0 for v in started.values()):
        return {"seq": target, "kind": "stuck", "culprits": [], "waiting": sorted(issued), "op": op,
                "detail": f"collective #{target} ({op}) was issued by every rank and completed by "
                          f"{sorted(completed) or 'none'}"}
    not_started = [r for r, v in started.items() if int(v) < target]
    culprits = not_started if 0 < len(not_started) * 2 <= len(issued) else []
    return {"seq": target, "kind": "device", "culprits": sorted(culprits), "waiting": sorted(issued),
            "op": op, "detail": f"every rank issued collective #{target} ({op}) and none completed it; "
                                + (f"ranks {sorted(culprits)} never started it on the device" if culprits
                                   else "no rank stands out")}


@rule(id="flight-recorder-first-pending", title="The flight recorder shows who held up a collective",
      category="straggler", severity="critical",
      description="Per process group, the first collective that not every rank completed: ranks that never issued "
                  "it were stuck before the call (host side); if every rank issued it and none completed it, the "
                  "ranks whose device never started it were behind (device side); different ops or sizes at the "
                  "same sequence number mean the ranks' code paths diverged.",
      remediation="Look at what the culprit rank was doing before that collective (its stack, its last log lines); "
                  "for diverged code paths make every rank issue the same collectives in the same order.",
      false_positives=("Dumps taken at different moments (one rank dumped much later) can show progress that is "
                       "not a hang.",))
def flight_recorder(tables):
    groups = _status(tables)
    if not groups:
        return []

    def entries_at(pg, seq):
        return _entries_at(tables, pg, seq)

    out = []
    for pg, ranks in sorted(groups.items()):
        if len(ranks) < 2:
            continue
        j = judge_group(pg, ranks, entries_at)
        if j is None:
            continue
        cat = {"missing": "straggler", "mismatch": "barrier_skew", "device": "straggler"}.get(j["kind"],
                                                                                            "collective_timeout")
        conf = {"missing": 0.8, "mismatch": 0.85, "device": 0.7}.get(j["kind"], 0.4)
        if not j["culprits"]:
            conf = min(conf, 0.45)
        ev = [Evidence(str(ranks[r]["source"]), None, r,
                       f"flight recorder pg {pg}: last enqueued {ranks[r].get('last_enqueued')}, last completed "
                       f"{ranks[r].get('last_completed')}") for r in (j["culprits"] + j["waiting"])[:4]]
        out.append(Finding(
            rule="flight-recorder-first-pending", category=cat, confidence=conf, severity="critical",
            title=clip(("Flight recorder: " + j["detail"]), 200),
            explanation=(f"In process group {pg} the flight recorder shows that {j['detail']}. "
                         + {"missing": "The ranks that never issued it were stuck before the call (host side): "
                                       "the others wait for them.",
                            "mismatch": "The ranks followed different code paths.",
                            "device": "The ranks that never started it were still busy with earlier GPU work "
                                      "(device side).",
                            "stuck": "Nothing in the dumps singles out a rank."}[j["kind"]]),
            remediation=("Make every rank issue the same collectives in the same order."
                         if j["kind"] == "mismatch" else
                         "Find out what the culprit rank did before that collective (its stack, its last lines)."),
            culprit_ranks=j["culprits"], affected_ranks=j["waiting"], evidence=ev, order=(1, float("inf")),
            explains=("collective_timeout", "rank_crash", "unknown")))
    return sorted(out, key=lambda f: -f.confidence)[:1]

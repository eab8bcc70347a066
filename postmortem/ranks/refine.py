"""The culprit's own evidence, weighed after the end-state asymmetry (postmortem.ranks.culprits): the ranks a library
names as absent (named_ranks), then the rank whose collective sequence diverged first (sequences, with the data
counts of counts). Each can confirm the asymmetry's culprit, or replace one that only guessed."""
from __future__ import annotations

import pandas as pd

from postmortem.ranks.culprits import Culprits, _say
from postmortem.ranks.ends import ROOT_ENDS
from postmortem.ranks.last_words import last_own_line

# Mechanisms of postmortem.ranks.culprits that rest on a rank's own failure: the evidence here does not overrule them.
_OWN_FAILURE = ("root-failure", "single-rank", "alike")
NAMED_STRENGTH = 0.85


def refine(c: Culprits, tables) -> Culprits:
    """The culprits after the evidence that names a rank: the library's word, then the collective sequences."""
    from postmortem.ranks import sequences
    ranks = tables.frames.get("ranks")
    named = _named(c, tables, ranks)
    if named is not None:
        return named
    seq = sequences.diverged(tables, c)
    return _with_own_line(seq if seq is not None else c, tables)


def _with_own_line(c: Culprits, tables) -> Culprits:
    """The culprits, with the first culprit's own last line among the evidence when none of its lines is yet: the
    verdict then cites what the culprit itself printed, not only its peers' errors."""
    if not c.ranks or any(e.rank in c.ranks for e in c.evidence):
        return c
    own = last_own_line(tables, c.ranks[0])
    if own is not None:
        c.evidence = list(c.evidence) + [own]
    return c


def _rows(ranks) -> dict:
    if ranks is None or ranks.empty:
        return {}
    return {int(r["rank"]): r for r in ranks.to_dict("records")}


def _named(c: Culprits, tables, ranks) -> Culprits | None:
    """The ranks a monitored_barrier or desync report named, unless a rank failed on its own elsewhere."""
    from postmortem.ranks.named_ranks import named_absent
    named = named_absent(tables)
    if named is None:
        return None
    rows = _rows(ranks)
    world = sorted(rows) or sorted(set(named.ranks))
    if not set(named.ranks) < set(world) and rows:
        return None  # every rank named: no one stands out
    if c.mechanism in _OWN_FAILURE and c.ranks and not set(c.ranks) & set(named.ranks):
        if any(rows.get(r, {}).get("end") in ROOT_ENDS for r in c.ranks):
            return None  # a rank failed on its own: the named ones are late because of it
    # a named rank in a collective at another call site than its peers was elsewhere (diverged); at the same call
    # site it only came late (it saw its peers gone when it got there)
    theirs = {str(rows[r].get("stack_where")) for r in rows if r not in named.ranks and rows[r].get("stack_where")}
    elsewhere = [r for r in named.ranks if (rows.get(r, {}).get("stack_class") == "collective_wait"
                                            or rows.get(r, {}).get("end") in ("waiting", "lost_peer"))
                 and rows.get(r, {}).get("stack_where") and str(rows[r].get("stack_where")) not in theirs]
    mechanism = "named-elsewhere" if elsewhere and len(elsewhere) == len(named.ranks) else "named-absent"
    said = f"{named.what} named {_say(named.ranks)} as {'the rank' if len(named.ranks) == 1 else 'the ranks'} " \
           f"that never arrived"
    if named.timeout_s:
        said += f" within its {named.timeout_s:g} s timeout"
    said += f" (`{named.evidence[0].text[:160]}`)" if named.evidence else ""
    if mechanism == "named-elsewhere":
        said += "; it was waiting in another collective"
    if sorted(c.ranks) == named.ranks:
        said = f"{said}; how the ranks ended agrees: {c.reason}"
    affected = [r for r in world if r not in named.ranks]
    last = last_own_line(tables, named.ranks[0])
    if last is not None:
        said += f"; {_say(named.ranks[:1])}'s last line was `{last.text[:140]}`"
    return Culprits(list(named.ranks), mechanism, said, NAMED_STRENGTH, affected=affected,
                    evidence=([last] if last is not None else []) + list(named.evidence)
                    + [e for e in c.evidence if e not in named.evidence][:2])


def _null(v) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and v != v)

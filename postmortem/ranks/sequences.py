"""Who diverged first in the ranks' collective sequences, from where each rank waited (stack dumps, and the
tracebacks of collectives that timed out or lost a peer) and what the ranks said just before.

Ranks that wait at different call sites issued different collective sequences. Which side diverged:
- a strict minority at its own call site, as the end-state asymmetry already says (nothing to add here);
- a rank that announced the branch it took (its last non-cascade line is one no other rank printed: `step 41: no
  utterance in batch, skipping ctc loss`) while the others wait where its skipped collective left them: its own
  words name it, even when the rank left behind is the minority (a sub-group collective its partner skipped);
- two sides of equal size (each the other's mirror): the side that stands later in the same function (its next
  collective is further on) skipped the collective the other side still waits in; hedged, since the other side
  may instead have called one more.
A rank that aborted on a size or type mismatch (gloo's `op.preamble.length <= op.nbytes`) took part in the mismatch;
it is not by itself the rank that diverged.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from postmortem.ranks.culprits import Culprits, _say
from postmortem.verdict.findings import Evidence
from postmortem.stacks import classify_thread, is_launcher, waits_inside_backward
from postmortem.stacks.frames import bare_name, is_native, short_file

ANNOUNCE_NEAR = 3      # an announcing line is at most this many lines before its rank's end
# Two mirrored sides: the one further on is only the likelier culprit (an if/else whose branches call different
# collectives puts the culprit on either side of the other), so it names the culprit only where nothing else does
# and is never lent to a finding (below verdict.LEND_STRENGTH), unless its steps show it further on too.
AHEAD_STRENGTH = 0.45
AHEAD_BY_STEPS_STRENGTH = 0.6
ANNOUNCED_STRENGTH = 0.8  # its own words and the call sites agree
# End-state mechanisms that rest on how a rank failed by itself; a divergence replaces them only when that failure
# was the mismatch (the abort of a rank that received another collective's data).
_WEAK = ("none", "gone", "late-arrival", "first-to-wait", "other-call-site", "never-reached", "odd-lines", "lagging",
         "busy-while-waited")


@dataclass(frozen=True)
class Site:
    """Where one rank waited: its Python frames outermost first, as (file, function, line)."""
    rank: int
    path: tuple
    at: str
    where: str


def _frame_key(f: dict) -> tuple:
    return (short_file(f.get("file")), bare_name(f.get("func")).rsplit(".", 1)[-1], f.get("line"))


def sites(tables) -> dict[int, Site]:
    """Per rank, the latest stack of its main thread that waits in a collective (dumps and collective tracebacks)."""
    st = tables.stacks
    if st is None or st.empty:
        return {}
    st = st[st["rank"].notna()]
    main = st[(st["thread_name"] == "MainThread") |
              st["frames"].map(lambda fr: bool(fr) and str(fr[-1].get("func", "")).endswith("<module>"))]
    latest = main.sort_values(["source", "line"]).groupby("rank", sort=False).tail(1)
    out = {}
    for rank, frames, active, src, line in zip(latest["rank"], latest["frames"], latest["active"], latest["source"],
                                               latest["line"]):
        frames = frames or []
        if not frames or is_launcher(frames):
            continue
        cls = classify_thread(frames, active)
        if cls != "collective_wait" and not waits_inside_backward(frames):
            continue
        py = [f for f in frames if not is_native(f)]
        path = tuple(_frame_key(f) for f in reversed(py))  # outermost first
        if not path:
            continue
        inner = next((f for f in py if "torch/distributed" not in short_file(f.get("file"))), py[0])
        out[int(rank)] = Site(int(rank), path, f"{src}:{int(line)}" if pd.notna(line) else str(src),
                              f"{bare_name(inner.get('func'))} ({short_file(inner.get('file'))}:{inner.get('line')})")
    return out


def _user_path(path: tuple) -> tuple:
    """The frames above the collective's own library frames: where in the program the collective was called."""
    keep = list(path)
    while keep and keep[-1][0].startswith(("torch/distributed/", "torch/nn/parallel/", "torch/autograd/",
                                           "torch/_tensor", "torch/utils/_contextlib")):
        keep.pop()
    return tuple(keep) or path


def order(a: tuple, b: tuple) -> int:
    """+1 when call path `a` stands later in the program than `b` (same function, a later line at the first frame
    where they part), -1 when earlier, 0 when they do not part inside one function."""
    for fa, fb in zip(a, b):
        if fa == fb:
            continue
        if fa[:2] == fb[:2] and isinstance(fa[2], int) and isinstance(fb[2], int):
            return 1 if fa[2] > fb[2] else -1
        return 0
    return 0


def parting(a: tuple, b: tuple) -> tuple[str, str]:
    """Where two call paths part, said for each: the shared function's line and the call made there."""
    for i, (fa, fb) in enumerate(zip(a, b)):
        if fa != fb:
            def say(p, j):
                nxt = f"{p[j + 1][1]} <- " if j + 1 < len(p) else ""
                return f"{nxt}{p[j][1]} ({p[j][0]}:{p[j][2]})"
            return say(a, i), say(b, i)
    return "", ""


def _groups(s: dict[int, Site]) -> dict[tuple, list[int]]:
    g: dict = {}
    for r, site in s.items():
        g.setdefault(_user_path(site.path), []).append(r)
    return g


def _said_after(tables, rank: int, source: str, line: int) -> int:
    """How many of the rank's lines after `line` in `source` say something of its own (not a traceback, a peer's
    error or the launcher's lines: postmortem.ranks.last_words.after_words)."""
    from postmortem.ranks.last_words import after_words
    ll = tables.frames.get("last_lines")
    if ll is None or ll.empty:
        return 0
    later = ll[(ll["rank"] == rank) & (ll["source"] == source) & (ll["line"] > line)]
    return sum(1 for m in later["message"].tolist() if not after_words(str(m)))


def _announcers(tables, candidates: set[int]) -> dict[int, Evidence]:
    """Ranks whose last lines hold one no other rank printed (not a cascade), just before their end: at most
    ANNOUNCE_NEAR lines of their own after it (a traceback that follows does not count)."""
    odd = tables.frames.get("odd_lines")
    if odd is None or odd.empty:
        return {}
    out = {}
    rows = odd[(odd["kind"] == "minority") & ~odd["cascade"]]
    for ranks, dist, at, example in zip(rows["ranks"], rows["distance"], rows["at"], rows["example"]):
        ranks = [int(r) for r in ranks]
        if len(ranks) != 1 or ranks[0] not in candidates or pd.isna(dist):
            continue
        src, _, line = str(at[0]).rpartition(":")
        if int(dist) > ANNOUNCE_NEAR and not (line.isdigit() and
                                              _said_after(tables, ranks[0], src, int(line)) <= ANNOUNCE_NEAR):
            continue
        prev = out.get(ranks[0])
        if prev is None or int(dist) < prev[0]:
            out[ranks[0]] = (int(dist), Evidence(src, int(line) if line.isdigit() else None, ranks[0],
                                                 str(example)[:300]))
    return {r: e for r, (_, e) in out.items()}


def _mismatch_end(rows: dict, ranks: list[int]) -> bool:
    """The ranks' ends are the abort of a collective that received another collective's data (or no end of
    their own at all)."""
    from postmortem import catalog
    for r in ranks:
        detail = str(rows.get(r, {}).get("end_detail") or "")
        fam = catalog.family_of(detail.split(": ", 1)[-1]) if detail else None
        if fam is None or "collective_mismatch" not in fam.implies:
            return False
    return True


def mismatch_seen(tables) -> bool:
    """Some line says the ranks' collectives did not match (gloo's size check, a DETAIL fingerprint)."""
    from postmortem import catalog
    ev = tables.events
    if ev is None or ev.empty:
        return False
    rows = ev[ev["kind"].isin(("error", "collective_mismatch"))]
    for msg in rows["message"].tolist()[:200]:
        fam = catalog.family_of(str(msg))
        if fam is not None and "collective_mismatch" in fam.implies:
            return True
    return False


def diverged(tables, c: Culprits) -> Culprits | None:
    """A better-founded culprit from the ranks' call sites and last words than `c`, or None to keep `c`."""
    ranks_tab = tables.frames.get("ranks")
    rows = {int(r["rank"]): r for r in ranks_tab.to_dict("records")} if ranks_tab is not None else {}
    weak = c.mechanism in _WEAK or not c.ranks or _received_mismatch(tables, rows, c.ranks)
    if not weak:
        return None
    sized_by = _odd_size(tables, c, rows)
    if sized_by is not None:
        return sized_by
    s = sites(tables)
    groups = _groups(s) if len(s) >= 2 else {}
    if len(groups) < 2:
        return _receiver_only(c, rows, tables)
    sized = sorted(groups.items(), key=lambda kv: len(kv[1]))
    small, big = sized[0], sized[-1]
    world = sorted(rows) or sorted(s)
    mirrored = len(sized) == 2 and len(small[1]) == len(big[1])
    said = _announcers(tables, set(world))
    behind = ahead = None
    if len(sized) == 2:
        o = order(small[0], big[0])
        behind, ahead = (small, big) if o < 0 else (big, small) if o > 0 else (None, None)
    # the culprit's own words: one rank announced a branch, and the ranks left behind wait where it left them
    if said and behind is not None:
        speakers = [r for r in said if r in ahead[1]]
        if len(speakers) == 1 and not any(r in said for r in behind[1]):
            r = speakers[0]
            ev = said[r]
            at_r, at_b = parting(ahead[0], behind[0])
            reason = (f"{_say([r])} said `{ev.text[:140]}` just before it moved on to a later collective "
                      f"({at_r}), while {_say(sorted(behind[1]))} still waited in an earlier one ({at_b}): "
                      f"{_say([r])} skipped the collective its partners were in")
            return Culprits([r], "announced-divergence", reason, ANNOUNCED_STRENGTH,
                            affected=[x for x in world if x != r],
                            evidence=[ev] + _site_ev(s, [r] + sorted(behind[1])[:2]))
    if mirrored and ahead is not None and not (c.ranks and set(c.ranks) <= set(ahead[1])):
        who = sorted(ahead[1])
        at_a, at_b = parting(ahead[0], behind[0])
        reason = (f"{_say(who)} had moved on to a later collective ({at_a}) while "
                  f"{_say(sorted(behind[1]))} still waited in an earlier one ({at_b}) of the same "
                  f"code path: {_say(who)} most likely skipped the collective the others were in (or they called "
                  "one more); the two sides mirror each other, so this is a hedge")
        steps_ahead = _steps_ahead(rows, who, sorted(behind[1]))
        if steps_ahead:
            reason += f"; its last training step is later too ({steps_ahead})"
        return Culprits(who, "ahead-of-peers", reason, AHEAD_BY_STEPS_STRENGTH if steps_ahead else AHEAD_STRENGTH,
                        affected=[x for x in world if x not in who], evidence=_site_ev(s, who + sorted(behind[1])[:1]))
    return None


def _receiver_only(c: Culprits, rows: dict, tables) -> Culprits | None:
    """The only rank the ends name aborted because its collective received another collective's data: it took part
    in the mismatch but nothing shows that it diverged (the sender did, or the receiver's own sequence; the logs do
    not say which). Name no one rather than the receiver."""
    if c.mechanism not in ("root-failure", "single-rank") or not c.ranks:
        return None
    if not _received_mismatch(tables, rows, c.ranks):
        return None
    world = sorted(rows) or sorted(set(c.ranks) | set(c.affected))
    reason = (f"{_say(c.ranks)} aborted because a collective received data of another size than it expected: the "
              "ranks' collectives did not match, but no stack, count or line shows which rank's sequence diverged")
    return Culprits([], "mismatch-unresolved", reason, 0.0, affected=world, evidence=list(c.evidence[:2]))


def _received_mismatch(tables, rows: dict, ranks: list[int]) -> bool:
    """The ranks' ends are a collective's abort on receiving another collective's data: their end or their own lines
    say so, or they died of SIGABRT where an unranked line (a console without prefixes) says a collective did."""
    if _mismatch_end(rows, ranks) or _said_mismatch(tables, ranks):
        return True
    aborted = all(rows.get(r, {}).get("end") == "fatal_signal" and "SIGABRT" in str(rows[r].get("end_detail") or "")
                  for r in ranks)
    return bool(ranks) and aborted and mismatch_seen(tables)


def _said_mismatch(tables, ranks: list[int]) -> bool:
    """Every one of `ranks` printed a line saying its collective received another collective's data."""
    from postmortem import catalog
    ev = tables.events
    if not ranks or ev is None or ev.empty:
        return False
    rows = ev[ev["kind"].isin(("error", "collective_mismatch")) & ev["rank"].isin(ranks)]
    said = set()
    for r, msg in zip(rows["rank"].tolist(), rows["message"].tolist()):
        fam = catalog.family_of(str(msg))
        if fam is not None and "collective_mismatch" in fam.implies:
            said.add(int(r))
    return said >= set(ranks)


def _odd_size(tables, c: Culprits, rows: dict) -> Culprits | None:
    """A collective reported a size mismatch, and one rank stated a data count no other rank did: its tensors (or
    its number of batches) were the odd ones; the rank that aborted only received them."""
    from postmortem.ranks.counts import odd_count
    if not mismatch_seen(tables):
        return None
    odd = odd_count(tables)
    if odd is None or (c.ranks and c.ranks == [odd.rank] and c.mechanism not in _WEAK):
        return None
    world = sorted(rows) or sorted({odd.rank} | set(c.ranks) | set(c.affected))
    aborted = f"; {_say(c.ranks)} only received its data and aborted on the mismatch" if c.ranks and \
        odd.rank not in c.ranks else ""
    reason = (f"a collective received data of another size than it expected, and {_say([odd.rank])} stated "
              f"{odd.count} {odd.unit} where every other rank stated {odd.usual} (`{odd.evidence[0].text[:120]}`): "
              f"tensors sized from its data did not match its peers'{aborted}")
    return Culprits([odd.rank], "odd-size", reason, 0.75, affected=[r for r in world if r != odd.rank],
                    evidence=list(odd.evidence) + [e for e in c.evidence[:1]])


def _steps_ahead(rows: dict, ahead: list[int], behind: list[int]) -> str:
    """`step 16 vs 15` when every rank of `ahead` reported a later last training step than every rank of `behind`."""
    def steps(rs):
        return [rows.get(r, {}).get("last_step") for r in rs]
    a, b = steps(ahead), steps(behind)
    if any(v is None or v is pd.NA or v != v for v in a + b):
        return ""
    return f"step {min(a)} vs {max(b)}" if min(a) > max(b) else ""


def _site_ev(s: dict[int, Site], ranks: list[int]) -> list[Evidence]:
    out = []
    for r in ranks:
        src, _, line = s[r].at.rpartition(":")
        out.append(Evidence(src or s[r].at, int(line) if line.isdigit() else None, r,
                            f"rank {r} waits in a collective at {s[r].where}"))
    return out

"""The wait graph over flight-recorder counters (postmortem.ranks.fr_waits): each mechanism with a case where it names a
rank and one where it must not. Views are built here from counters alone (what a dump's pg_status holds)."""
from __future__ import annotations

import time

from postmortem.ranks.fr_waits import RankView, Wait, WaitGraph, attribute


def v(rank, enq, done, pending_op="nccl:all_reduce", **kw) -> RankView:
    pending = done + 1 if enq > done else None
    return RankView(rank, enq, done, pending, pending_op if pending else None, source=f"_dump_{rank}", **kw)


def test_host_behind_rank_is_the_sink():
    att = attribute({"37": {8: v(8, 110, 100), 9: v(9, 100, 100), 10: v(10, 110, 100)}})
    assert att.culprits == [9] and att.kind == "host" and att.waiting == [8, 10]
    (b,) = att.blames[9]
    assert (b.pg, b.seq, b.value, b.peer_value, b.peers) == ("37", 101, 100, 110, (8, 10))


def test_a_rank_behind_because_it_waits_elsewhere_is_not_named():
    # rank 8 never issued #51 in group 0 (rank 0 waits there), but rank 8 itself waits in group 37 on rank 9.
    views = {"0": {0: v(0, 51, 50), 8: v(8, 50, 50)},
             "37": {8: v(8, 110, 100), 9: v(9, 100, 100)}}
    att = attribute(views)
    assert att.culprits == [9] and set(att.blames) == {8, 9}
    # without group 37, rank 8 is the one behind
    assert attribute({"0": views["0"]}).culprits == [8]


def test_pipeline_wait_only_propagates():
    # rank 4 is behind in its tensor group, but it waits on a recv from rank 12 whose own group waits on rank 13.
    views = {"tp": {4: v(4, 10, 10), 5: v(5, 12, 10)},
             "pp": {4: RankView(4, 7, 6, p2p=True, p2p_peer=12, p2p_op="nccl:recv 0<-1", p2p_seq=7),
                    12: RankView(12, 9, 9, p2p=True)},
             "tp2": {12: v(12, 30, 20), 13: v(13, 20, 20)}}
    att = attribute(views)
    assert att.culprits == [13] and att.p2p_groups == 1
    assert not any(b.pg == "pp" for bs in att.blames.values() for b in bs)  # counters of send/recv not compared


def test_device_behind_rank_is_named_even_when_it_also_waits():
    # rank 14 enqueued #43 that rank 15 completed; rank 14 also waits on a pipeline peer.
    views = {"tp": {14: v(14, 50, 42), 15: v(15, 50, 45)},
             "pp": {14: RankView(14, 3, 2, p2p=True, p2p_peer=2, p2p_seq=3)}}
    att = attribute(views)
    assert att.culprits == [14] and att.kind == "device"
    (b,) = att.blames[14]
    assert (b.seq, b.value, b.peers, b.peer_value) == (43, 42, (15,), 45)


def test_counters_that_are_not_collective_counts_are_not_compared():
    # rank 4 "completed" #13695 while rank 0 enqueued only #11986: a send/recv group whose dump kept no entry.
    att = attribute({"43": {0: v(0, 11986, 11983), 4: v(4, 13698, 13695), 8: v(8, 13698, 13693)}})
    assert att.culprits == [] and att.compared_groups == 0 and att.p2p_groups == 1


def test_most_ranks_never_issued_it_and_wait_on_nothing_is_an_extra_collective():
    views = {"0": {r: v(r, 100, 100) for r in range(7)} | {7: v(7, 101, 100, "nccl:barrier")}}
    att = attribute(views)
    assert att.culprits == [7] and att.kind == "extra"
    # half and half is not a majority: the ranks behind are named
    views = {"0": {0: v(0, 100, 100), 1: v(1, 101, 100)}}
    assert attribute(views).culprits == [0]


def test_member_without_a_dump():
    views = {"37": {8: v(8, 110, 100), 10: v(10, 110, 100), 11: v(11, 110, 100)}}
    att = attribute(views, members={"37": [8, 9, 10, 11]}, dumped={8, 10, 11})
    assert att.culprits == [9] and att.kind == "no_dump"
    # not blamed when every waiter waits on a pipeline peer that leads to a rank with direct evidence
    views["pp"] = {r: RankView(r, 5, 4, p2p=True, p2p_peer=20, p2p_seq=5) for r in (8, 10, 11)}
    views["tp"] = {20: v(20, 9, 9), 21: v(21, 12, 9)}
    att = attribute(views, members={"37": [8, 9, 10, 11]}, dumped={8, 10, 11, 20, 21})
    assert att.culprits == [20]


def test_stuck_together_names_nobody_unless_device_timing_says():
    views = {"0": {r: v(r, 100, 99) for r in range(4)}}
    att = attribute(views)
    assert att.culprits == [] and att.kind == "stuck" and att.stuck
    started = {r: RankView(r, 100, 99, 100, "nccl:all_reduce", started=99 if r == 2 else 100) for r in range(4)}
    att = attribute({"0": started})
    assert att.culprits == [2] and att.kind == "device"


def test_nothing_pending_is_no_hang():
    att = attribute({"0": {r: v(r, 100, 100) for r in range(4)}})
    assert att.kind is None and att.culprits == []


def test_wait_graph_scales_with_hubs():
    n = 4096
    waits = [Wait(r, tuple(range(n - 8, n)), "host", "0", 5) for r in range(n - 8)]
    waits += [Wait(r, (r - 1,), "p2p", "pp", 1) for r in range(1, n - 8)]
    t = time.perf_counter()
    g = WaitGraph(waits)
    assert g.reach(0) == sum(1 << r for r in range(n - 8, n))
    assert g.reach(5) >> (n - 1) & 1 and not g.reach(n - 1)
    assert time.perf_counter() - t < 2.0

"""Host-memory snapshots: repeated `free` (new, old, human units) and `vmstat -t`; discovery of the kind."""
from __future__ import annotations

import os

import pytest

from postmortem.parsers.base import parse_source
from postmortem.parsers.host_memory import parse_host_memory, to_kib
from postmortem.ingest.discover import Source, discover, sniff_kind

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "host_memory")


def snaps(name: str) -> list[dict]:
    (src,) = discover(os.path.join(FIX, name))
    assert src.kind == "host_memory", name
    result = parse_source(src)
    assert not result.problems
    rows = result.rows["events"]
    assert all(r["kind"] == "host_mem" for r in rows)
    return rows


def test_corpus_free_every_60s_shows_growth():
    rows = snaps("free_every_60s_dataloader_growth.log")
    used = [r["details"]["used_kb"] for r in rows]
    assert used == [5909424, 9803196, 12532152, 14393964, 15684068, 16577944]
    assert [r["details"]["snapshot"] for r in rows] == list(range(6))
    a = rows[0]["details"]
    assert (a["total_kb"], a["available_kb"], a["swap_used_kb"], a["unit_assumed"]) == (62880028, 56381080, 0, True)
    assert rows[0]["line"] == 3


def test_old_procps_free_m_with_date_lines():
    rows = snaps("free_m_old_procps_with_date.log")
    assert [r["ts"] for r in rows] == ["2022-11-21T13:51:00", "2022-11-21T13:56:00"]
    a = rows[1]["details"]
    assert a["used_kb"] == 15588 * 1024 and a["used_with_cache_kb"] == 15901 * 1024  # -/+ buffers/cache line
    assert a["available_kb"] == 359 * 1024 and a["swap_used_kb"] == 4010 * 1024 and a["unit_assumed"] is False
    assert a["buff_cache_kb"] == (12 + 301) * 1024


def test_free_h_human_units():
    rows = snaps("free_h_human.log")
    a = rows[1]["details"]
    assert a["total_kb"] == 62 * 1024 ** 2 and a["used_kb"] == 59 * 1024 ** 2
    assert a["swap_used_kb"] == round(1.9 * 1024 ** 2) and rows[0]["details"]["swap_used_kb"] == 0


def test_vmstat_with_timestamps():
    rows = snaps("vmstat_t_5s.log")
    assert [r["ts"] for r in rows] == ["2024-05-01T12:00:00", "2024-05-01T12:00:05", "2024-05-01T12:00:10"]
    a = rows[2]["details"]
    assert (a["free_kb"], a["swap_used_kb"], a["si"], a["so"], a["b"], a["wa"]) == (81220, 2096000, 5120, 9840, 6, 50)


def test_vmstat_units_from_command(tmp_path):
    p = tmp_path / "vm.log"
    p.write_text("$ vmstat -S M 5\nprocs -----------memory---------- ---swap-- -----io---- -system-- ------cpu-----\n"
                 " r  b   swpd   free   buff  cache   si   so    bi    bo   in   cs us sy id wa st\n"
                 " 1  0      2    100     10    300    0    0     0     0    1    1  1  1 98  0  0\n")
    (row,) = parse_host_memory(Source(path=str(p), source="vm.log", kind="host_memory")).rows["events"]
    assert row["details"]["free_kb"] == 100 * 1024 and row["details"]["unit_assumed"] is False


@pytest.mark.parametrize("tok,factor,want", [("62Gi", None, 62 * 1024 ** 2), ("0B", None, 0), ("5.6G", None, 5.6 * 1024 ** 2),
                                             ("100", 1024.0, 102400), ("100", None, 100), ("x1", None, None)])
def test_to_kib(tok, factor, want):
    assert to_kib(tok, factor) == (pytest.approx(want) if want is not None else None)


def test_sniff_host_memory_but_not_a_log_that_prints_free_once():
    free = b"              total        used        free      shared  buff/cache   available\nMem:  1 2 3 4 5 6\nSwap: 0 0 0\n"
    assert sniff_kind(b"$ while true; do free; sleep 60; done\n" + free * 3, "mem.log") == "host_memory"
    assert sniff_kind(b" r  b   swpd   free   buff  cache   si   so    bi    bo   in   cs us sy id wa st\n"
                      b" 1  0      0 100 10 300 0 0 0 0 1 1 1 1 98 0 0\n", "vm") == "host_memory"
    log = b"".join(b"epoch 1 step %d loss 0.5\n" % i for i in range(20)) + free
    assert sniff_kind(log, "rank0.log") == "rank_log"


def test_long_loops_are_thinned_keeping_the_last(tmp_path, monkeypatch):
    import postmortem.parsers.host_memory as hm
    monkeypatch.setattr(hm, "MAX_SNAPSHOTS", 8)
    block = "              total        used        free      shared  buff/cache   available\nMem: 100 {u} 1 1 1 1\n"
    p = tmp_path / "free.log"
    p.write_text("".join(block.format(u=i) for i in range(30)))
    result = hm.parse_host_memory(Source(path=str(p), source="free.log", kind="host_memory"))
    used = [r["details"]["used_kb"] for r in result.rows["events"]]
    assert len(used) <= 9 and used[0] == 0 and used[-1] == 29 and result.problems

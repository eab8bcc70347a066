"""Kernel-log parser: timestamp prefixes, wrapped lines, OOM kills with context, Xid meanings, GPU/PCIe errors."""
from __future__ import annotations

import os

import pytest

from postmortem.parsers.base import parse_source
from postmortem.parsers.dmesg import iso_to_utc, logical_lines, parse_dmesg, parse_prefix
from postmortem.parsers.xid import xid_info
from postmortem.ingest.discover import Source, discover

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "dmesg")


def events(name: str, kind: str | None = None) -> list[dict]:
    (src,) = discover(os.path.join(FIX, name))
    assert src.kind == "dmesg", name
    rows = parse_source(src).rows.get("events", [])
    return [r for r in rows if r["kind"].startswith("kernel_") and (kind is None or r["kind"] == kind)]


@pytest.mark.parametrize("line,facts,message", [
    ("[2059991.491542] Out of memory", {"uptime_s": 2059991.491542}, "Out of memory"),
    ("[  518.050606] x", {"uptime_s": 518.050606}, "x"),
    ("[Sun Mar 30 08:24:00 2025] NVRM: y", {"ts": "2025-03-30T08:24:00"}, "NVRM: y"),
    ("2024-04-29T14:55:41,678628+02:00 pool invoked oom-killer", {"ts": "2024-04-29T12:55:41.678628"},
     "pool invoked oom-killer"),
    ("May 15 23:09:30 host7 kernel: [  518.05] z", {"syslog_time": "May 15 23:09:30", "host": "host7",
                                                      "uptime_s": 518.05}, "z"),
    ("May  5 23:09:30 host7 kernel: z", {"syslog_time": "May  5 23:09:30", "host": "host7"}, "z"),
    ("kern  :err   : [  1.5] w", {"level": "err", "uptime_s": 1.5}, "w"),
    ("<3>[  1.5] w", {"uptime_s": 1.5}, "w"),
    ("no prefix here", {}, "no prefix here"),
])
def test_prefix_forms(line, facts, message):
    assert parse_prefix(line) == (facts, message)


def test_iso_offsets_convert_to_utc():
    assert iso_to_utc("2024-04-29T14:55:41+0200") == "2024-04-29T12:55:41"
    assert iso_to_utc("2024-04-29T14:55:41Z") == "2024-04-29T14:55:41"
    assert iso_to_utc("2024-04-29T14:55:41") == "2024-04-29T14:55:41"


def test_padding_runs_and_hard_wraps_rejoined():
    long = "[100.000001] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,me"
    lines = [(1, long), (2, "ms_allowed=0,global_oom,task=python3,pid=7,uid=0"), (3, "[100.2] next"),
             (4, "[100.3] a" + " " * 60 + "b")]
    assert list(logical_lines(lines)) == [
        (1, long + "ms_allowed=0,global_oom,task=python3,pid=7,uid=0"), (3, "[100.2] next"), (4, "[100.3] ab")]


def test_corpus_wrapped_global_oom_python3():
    (ev,) = events("raw_wrapped_global_oom_python3.txt", "kernel_oom_kill")
    a = ev["details"]
    assert ev["pid"] == 25315 and a["comm"] == "python3" and a["scope"] == "global"
    assert a["anon_rss_kb"] == 31451456 and a["total_vm_kb"] == 53312244 and a["pgtables_kb"] == 69068
    assert a["constraint"] == "CONSTRAINT_NONE" and a["task_memcg"] == "/user.slice"
    assert a["uptime_s"] == 2059991.491542 and ev["ts"] is None and ev["level"] == "E"


def test_memcg_oom_with_invoker_limit_and_iso_time():
    (ev,) = events("iso_memcg_oom_and_xid79.txt", "kernel_oom_kill")
    a = ev["details"]
    assert a["scope"] == "cgroup" and a["constraint"] == "CONSTRAINT_MEMCG"
    assert a["memcg_limit_kb"] == 8388608 and a["invoker"] == "python" and a["comm"] == "pt_main_thread"
    assert a["oom_memcg"] == "/slurm/uid_1000/job_8538204" and a["uid"] == 1000
    assert ev["ts"] == "2024-04-29T12:55:41.679700"


def test_old_kernel_kill_and_sacrifice_lines():
    evs = events("old_kernel_sacrifice_child.txt", "kernel_oom_kill")
    by_pid = {e["pid"]: e["details"] for e in evs}
    assert by_pid[18694]["score"] == 946 and by_pid[18694]["anon_rss_kb"] == 59953348
    assert by_pid[18694]["invoker"] == "python" and by_pid[18694]["syslog_time"] == "Jun  2 10:11:12"
    assert 18701 in by_pid and evs[0]["host"] == "trainer"  # a Kill line without its Killed line still counts


def test_sacrificed_child_records_the_selected_parent(tmp_path):
    p = tmp_path / "dmesg.txt"
    p.write_text("[1.0] Out of memory: Kill process 100 (python) score 900 or sacrifice child\n"
                 "[1.1] Killed process 101 (python) total-vm:10kB, anon-rss:5kB, file-rss:0kB\n")
    rows = parse_dmesg(Source(path=str(p), source="dmesg.txt", kind="dmesg")).rows["events"]
    assert [(r["pid"], r["details"].get("selected_pid")) for r in rows] == [(101, 100)]


def test_xid_codes_meaning_origin_and_bus():
    evs = events("ctime_xid_app_and_hw.txt", "kernel_xid")
    got = [(e["details"]["xid"], e["details"]["origin"], e["level"]) for e in evs]
    assert got == [(13, "application", "W"), (45, "application", "W"), (63, "hardware", "E"),
                   (48, "hardware", "E"), (32, "driver", "E")]
    assert evs[0]["pid"] == 2096908 and evs[0]["details"]["process_name"] == "python"
    assert evs[2]["details"]["bus_id"] == "00000000:10:1C.0" and evs[4]["pid"] is None
    assert "Out Of Range Address" in evs[0]["details"]["detail"]


def test_xid79_unknown_pid_and_fallen_off_bus_and_uuid_map():
    (src,) = discover(os.path.join(FIX, "iso_memcg_oom_and_xid79.txt"))
    result = parse_source(src)
    (xid,) = [e for e in result.rows["events"] if e["kind"] == "kernel_xid"]
    assert xid["details"]["xid"] == 79 and xid["pid"] is None and "process_name" not in xid["details"]
    assert result.meta["gpu_uuid_by_bus"] == {"00000000:3B:00.0": "GPU-34d7319c-5b19-1e75-186d-c187099e4fe5"}


def test_multiline_fallen_off_bus_aer_nvlink_sxid_edac():
    evs = events("syslog_fallen_off_bus_aer_nvlink.txt")
    types = [(e["kind"], e["details"]["type"]) for e in evs]
    assert types == [("kernel_gpu_error", "pcie_aer"), ("kernel_gpu_error", "pcie_aer"),
                     ("kernel_gpu_error", "pcie_aer"), ("kernel_gpu_error", "fallen_off_bus"),
                     ("kernel_gpu_error", "nvlink"), ("kernel_gpu_error", "sxid"), ("kernel_hw_error", "host_mem_ecc")]
    assert [e["details"].get("severity") for e in evs[:3]] == ["fatal", "fatal", "corrected"]
    assert evs[0]["details"]["bus_id"] == "00000000:B3:00.0" and evs[2]["level"] == "W"
    assert evs[3]["details"]["bus_id"] == "00000000:B3:00.0"  # from the "The NVIDIA GPU" line before it
    assert evs[5]["details"]["sxid"] == 11001 and evs[5]["level"] == "E"
    assert all(e["host"] == "gpu-node-07" for e in evs)


def test_xid_table_lists_hardware_and_application_codes():
    for code in (48, 63, 64, 74, 79, 92, 94, 95, 119, 120):
        assert xid_info(code)[1] == "hardware", code
    for code in (13, 31, 43, 45):
        assert xid_info(code)[1] == "application", code
    assert xid_info(99999) == (None, "unknown")


def test_event_flood_is_capped(tmp_path, monkeypatch):
    import postmortem.parsers.dmesg as dm
    monkeypatch.setattr(dm, "MAX_EVENTS_PER_KIND", 3)
    p = tmp_path / "dmesg"
    p.write_text("".join(f"[{i}.0] NVRM: Xid (PCI:0000:01:00): 13, pid=1, name=x, boom\n" for i in range(10)))
    result = dm.parse_dmesg(Source(path=str(p), source="dmesg", kind="dmesg"))
    assert len(result.rows["events"]) == 3 and any("x7 not kept" in pr for pr in result.problems)


def test_long_hostile_lines_are_handled(tmp_path):
    # Shapes that made lazy or unbounded regexes quadratic; a regression shows as a stuck test, not a timing.
    n = 20000
    p = tmp_path / "dmesg"
    p.write_text("\n".join(["[1.0] oom " + "a" * n, "[1.0] " + "Kill process 1 (" * (n // 16),
                            "[1.0] " + "a" * n + " AER: x", "[1.0] x" + " " * n + "y",
                            "[1.0] " + "x invoked oom-killer:" * 1000, "[1.0] " + "a" * 100]
                           + ["b" * 100] * 5000) + "\n")
    result = parse_dmesg(Source(path=str(p), source="dmesg", kind="dmesg"))
    assert not [e for e in result.rows.get("events", []) if e["kind"] == "kernel_oom_kill"]

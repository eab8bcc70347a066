"""nvidia-smi parser: table layouts, grep excerpts, loops, CSV, -q text, -q -x XML, lost GPUs, hostile XML."""
from __future__ import annotations

import os

import pytest

from postmortem.parsers.base import parse_source
from postmortem.parsers.nvidia_smi import parse_nvidia_smi
from postmortem.ingest.discover import Source, discover

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "nvidia_smi")


def parse(name: str):
    (src,) = discover(os.path.join(FIX, name))
    assert src.kind == "nvidia_smi", name
    return parse_source(src)


def gpus(name: str) -> list[dict]:
    result = parse(name)
    assert not [p for p in result.problems if "failed" in p], result.problems
    return result.rows.get("gpu", [])


def test_grep_excerpt_rows_split_on_dashes_into_snapshots():
    rows = gpus("grep_rows_memory_jump.txt")
    assert [r["snapshot"] for r in rows] == [0, 1, 2]
    assert [r["mem_used_mib"] for r in rows] == [1906, 5202, 8108]
    assert {r["mem_total_mib"] for r in rows} == {8111}
    assert rows[1]["power_w"] == 120 and rows[0]["util_pct"] == 19 and rows[0]["temp_c"] == 70
    assert rows[0]["bus_id"] == "00000000:01:00.0" and rows[0]["gpu_index"] == 0


@pytest.mark.parametrize("name,count,driver", [
    ("table_418_premig_2gpu.txt", 2, "418.67"),
    ("table_470_loop_2snapshots.txt", 2, "470.256.02"),
    ("table_535_h100.txt", 1, "535.129.03"),
    ("table_580_2gpu_no_processes.txt", 2, "580.65.06"),
])
def test_default_table_layouts(name, count, driver):
    result = parse(name)
    rows = result.rows["gpu"]
    assert len(rows) == count
    assert result.meta["nvidia_smi"]["driver_version"] == driver
    assert all(r["mem_total_mib"] and r["temp_c"] is not None and r["ts"] for r in rows)


def test_premig_table_attaches_processes_and_reads_ecc_column():
    rows = gpus("table_418_premig_2gpu.txt")
    assert rows[0]["processes"] == [{"pid": 23410, "type": "C", "name": "python", "used_mib": 15627.0,
                                     "gpu_index": 0}]
    assert rows[1]["processes"][0]["pid"] == 23411
    assert rows[1]["ecc_uncorrected"] == 2 and rows[0]["ecc_uncorrected"] == 0
    assert rows[0]["ts"] == "2019-06-11T10:02:14"


def test_looped_table_gives_one_snapshot_per_timestamp():
    rows = gpus("table_470_loop_2snapshots.txt")
    assert [(r["snapshot"], r["ts"], r["mem_used_mib"]) for r in rows] == [
        (0, "2025-02-03T09:00:00", 1200), (1, "2025-02-03T09:00:10", 22700)]
    assert rows[1]["processes"][0]["used_mib"] == 22698


def test_535_process_row_with_gi_ci_columns():
    (row,) = gpus("table_535_h100.txt")
    assert row["processes"][0]["pid"] == 255872
    assert row["processes"][0]["name"].endswith("dist_matmul.x")
    assert row["power_w"] == 113 and row["mem_used_mib"] == 72459


def test_580_wide_bus_column_and_ecc():
    rows = gpus("table_580_2gpu_no_processes.txt")
    assert [r["bus_id"] for r in rows] == ["00000000:19:00.0", "00000000:3B:00.0"]
    assert rows[1]["ecc_uncorrected"] == 1 and rows[0]["processes"] == []


def test_lost_gpu_device_handle_error():
    result = parse("lost_gpu_unknown_error.txt")
    (row,) = result.rows["gpu"]
    assert row["lost"] is True and row["bus_id"] == "00000000:03:00.0"
    assert result.meta["nvidia_smi"]["lost_reasons"]["00000000:03:00.0"] == "Unknown Error"


def test_driver_unreachable_is_a_lost_row_without_bus():
    (row,) = gpus("driver_unreachable.txt")
    assert row["lost"] is True and row["bus_id"] is None


def test_csv_loop_with_units_repeated_header_and_not_supported():
    rows = gpus("csv_loop_units_repeated_header.csv")
    assert [r["snapshot"] for r in rows] == [0, 0, 1, 1]
    assert [r["gpu_index"] for r in rows] == [0, 1, 0, 1]
    assert rows[1]["power_w"] is None and rows[1]["ecc_uncorrected"] is None  # [Not Supported], [N/A]
    assert rows[3]["mem_used_mib"] == 32510 and rows[3]["ecc_uncorrected"] == 4
    assert rows[2]["ts"] == "2025-05-22T09:42:38.601000"


def test_headerless_csv_uses_the_echoed_query():
    rows = gpus("csv_noheader_nounits_with_command.log")
    assert [(r["snapshot"], r["gpu_index"], r["mem_used_mib"]) for r in rows] == [
        (0, 0, 1), (0, 1, 1), (1, 0, 16001), (1, 1, 31990)]


def test_headerless_csv_without_query_is_a_problem_not_a_guess(tmp_path):
    p = tmp_path / "smi.csv"
    p.write_text("2025/05/22 09:42:33.587, 0, Tesla V100-SXM2-32GB, 1, 32768\n")
    result = parse_nvidia_smi(Source(path=str(p), source="smi.csv", kind="nvidia_smi"))
    assert not result.rows.get("gpu") and any("columns unknown" in pr for pr in result.problems)


def test_compute_apps_csv_groups_processes_by_bus():
    rows = gpus("csv_compute_apps.csv")
    by_bus = {r["bus_id"]: [p["pid"] for p in r["processes"]] for r in rows}
    assert by_bus == {"00000000:18:00.0": [23410], "00000000:3B:00.0": [23411, 23500]}
    assert rows[1]["processes"][1]["used_mib"] is None


def test_q_text_memory_ecc_remapped_rows_and_processes():
    result = parse("q_a100_ecc_remap_pending.txt")
    rows = result.rows["gpu"]
    assert [r["gpu_index"] for r in rows] == [0, 1]  # full listing: Attached GPUs == sections
    assert rows[0]["mem_used_mib"] == 38123 and rows[0]["power_w"] == 311.25 and rows[0]["util_pct"] == 100
    assert rows[0]["processes"] == [{"pid": 3221, "type": "C", "name": "python", "used_mib": 38100.0}]
    assert rows[1]["ecc_uncorrected"] == 2
    health = {e["details"]["bus_id"]: e for e in result.rows["events"] if e["kind"] == "gpu_health"}
    first, second = health["00000000:10:1C.0"], health["00000000:10:1D.0"]
    assert first["level"] == "W" and first["details"]["remap_pending"] is True
    assert first["details"]["ecc_volatile_corrected"] == 177
    assert second["level"] == "E" and second["details"]["remap_failure"] is True
    assert second["details"]["ecc_aggregate_uncorrected"] == 5


def test_q_text_pre_ampere_single_double_bit_and_retired_pages():
    result = parse("q_v100_single_double_bit.txt")
    (row,) = result.rows["gpu"]
    assert row["ecc_uncorrected"] == 1
    (ev,) = [e for e in result.rows["events"] if e["kind"] == "gpu_health"]
    assert ev["details"]["ecc_aggregate_corrected"] == 12 and ev["details"]["retired_dbe"] == 1
    assert ev["details"]["retired_pending"] is True and ev["level"] == "E"


def test_xml_after_warning_line_with_doctype():
    result = parse("q_x_xml_with_warning.xml")
    rows = result.rows["gpu"]
    assert [r["bus_id"] for r in rows] == ["00000000:18:00.0", "00000000:3B:00.0"]
    assert rows[0]["mem_used_mib"] == 80100 and rows[0]["power_w"] == 240.71 and rows[0]["temp_c"] == 41
    assert rows[0]["processes"][0]["pid"] == 77123
    assert rows[1]["temp_c"] is None and rows[1]["ecc_uncorrected"] == 3
    assert rows[0]["ts"] == "2023-11-21T13:00:00"
    levels = [e["level"] for e in result.rows["events"] if e["kind"] == "gpu_health"]
    assert levels == ["I", "E"]


def test_billion_laughs_xml_is_refused_quickly():
    result = parse("hostile_billion_laughs.xml")
    assert not result.rows.get("gpu")
    assert any("entity" in p for p in result.problems)


def test_internal_dtd_subset_and_external_entity_refused(tmp_path):
    p = tmp_path / "x.xml"
    p.write_text('<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [<!ELEMENT a ANY>]>\n'
                 "<nvidia_smi_log><attached_gpus>1</attached_gpus></nvidia_smi_log>\n")
    result = parse_nvidia_smi(Source(path=str(p), source="x.xml", kind="nvidia_smi"))
    assert any("DTD" in pr for pr in result.problems) and not result.rows.get("gpu")


def test_truncated_xml_is_a_problem():
    result = parse("truncated_xml.xml")
    assert not result.rows.get("gpu") and any("truncated" in p for p in result.problems)


def test_random_bytes_do_not_raise(tmp_path):
    import random
    rng = random.Random(7)
    p = tmp_path / "junk"
    p.write_bytes(bytes(rng.randrange(256) for _ in range(20000)) + b"\n| 0 x On | zz Off | q |\n<?xml")
    result = parse_nvidia_smi(Source(path=str(p), source="junk", kind="nvidia_smi"))
    assert isinstance(result.rows.get("gpu", []), list)


def test_long_junk_lines_parse_in_linear_time(tmp_path):
    # Table rows, lost-GPU text and `-q` keys are free text between whitespace runs; these lines made earlier
    # regex versions backtrack polynomially. Correct output here, no timing: a regression shows as a stuck test.
    p = tmp_path / "junk.txt"
    n = 20000
    p.write_text("\n".join(["|  0 " + " " * n + "|", "| 0 x " + "On " * (n // 3) + "|",
                            "Unable to determine the device handle for GPU" + "0:" * n,
                            "==============NVSMI LOG==============", "    a" + " " * n + " : b"]) + "\n")
    result = parse_nvidia_smi(Source(path=str(p), source="junk.txt", kind="nvidia_smi"))
    assert not result.rows.get("gpu")


def test_long_loops_are_thinned_keeping_the_last_snapshot(tmp_path, monkeypatch):
    import postmortem.parsers.nvidia_smi as smi
    monkeypatch.setattr(smi, "MAX_GPU_ROWS", 10)
    p = tmp_path / "loop.csv"
    p.write_text("index, memory.used [MiB]\n" + "".join(f"{g}, {i} MiB\n" for i in range(25) for g in range(2)))
    result = smi.parse_nvidia_smi(Source(path=str(p), source="loop.csv", kind="nvidia_smi"))
    snaps = sorted({r["snapshot"] for r in result.rows["gpu"]})
    assert len(result.rows["gpu"]) <= 12 and snaps[-1] == 24 and snaps[0] == 0
    assert result.rows["gpu"][-1]["mem_used_mib"] == 24 and any("every" in pr for pr in result.problems)


def test_csv_null_cells_units_duplicate_fields_and_damage(tmp_path):
    # the per-row fast path (split, strip, memoised cell readers) keeps every reading of the plain one
    p = tmp_path / "smi.csv"
    p.write_text(
        "timestamp, index, name, pci.bus_id, memory.used [MiB], memory.total [MiB], utilization.gpu [%], "
        "temperature.gpu, power.draw [W], power.draw.instant [W]\n"
        "2025/06/01 15:03:44.970, 0, NVIDIA H100, 00000000:18:00.0, 61864 MiB, 81559 MiB, 98 %, 61, 488.10 W, 500.5 W\n"
        '2025/06/01 15:03:44.970, 1, "NVIDIA H100, PCIe", 00000000:2A:00.0, [N/A], 81559 MiB, N/A, , [Not Supported], 12 W\n'
        "2025/06/01 15:03:44.970, 2, NVIDIA H100, 00000000:3A:00.0, 100 MiB, 81559 MiB, nan, inf, 42, n/a\n"
        "2025/06/01 15:04:14.970, 0, NVIDIA H100, 00000000:18:00.0,  7 MiB , 81559 MiB, 1e2, -0, 1_0, 3 W\n")
    [src] = discover(str(p))
    rows = parse_source(src).rows["gpu"]
    got = [(r["gpu_index"], r["mem_used_mib"], r["util_pct"], r["temp_c"], r["power_w"], r["snapshot"]) for r in rows]
    # a later column of the same field wins, even when null; nan/inf are damage, not readings
    assert got == [(0, 61864.0, 98.0, 61.0, 500.5, 0), (1, None, None, None, 12.0, 0), (2, 100.0, None, None, None, 0),
                   (0, 7.0, 100.0, 0.0, 3.0, 1)]
    assert rows[1]["bus_id"] == "00000000:2A:00.0" and rows[0]["ts"] == "2025-06-01T15:03:44.970000"

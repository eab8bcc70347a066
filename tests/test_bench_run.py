"""benchmarks/run.py's rank-count table: worst ratio first, and the RSS fit as base + KB per rank."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

import run  # noqa: E402


def _row(ranks: int, ratio: float, rss: float) -> dict:
    return {"spec": f"realistic:{ranks}:1GiB", "ranks": ranks, "bytes": 2**30, "files": 2 * ranks + 8,
            "grep_s": (1.0, 1.0), "json_s": (ratio, ratio), "json_ratio": (ratio, ratio), "json_rss_mb": rss,
            "json_tree_rss_mb": rss + 80, "verdict": {"category": "gpu_oom", "phase": "sample", "culprit_ranks": [3]},
            "planted_found": True}


def test_rss_fit_recovers_base_and_per_rank_constant():
    rows = [_row(n, 1.0, 100 + n * 20 / 1024) for n in (1024, 4096, 16384)]
    base, per_rank = run.rss_fit(rows)
    assert abs(base - 100) < 1e-6 and abs(per_rank - 20) < 1e-6


def test_rank_table_puts_the_worst_ratio_first():
    table = run.rank_table([_row(1024, 3.0, 120), _row(16384, 30.0, 500), _row(4096, 9.0, 200)])
    body = [line for line in table.splitlines() if line.startswith("| ") and "×" in line and "KiB" in line]
    assert [line.split(" × ")[0] for line in body] == ["| 16,384", "| 4,096", "| 1,024"]
    assert "KB per rank" in table

"""Evidence gaps fit the job: the flight-recorder advice follows the backend (gloo does not dump on a timeout),
and a DataLoader worker's death asks for no flight recorder (real runs: samples/ and the report fixtures)."""
from __future__ import annotations

import os

import postmortem

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _gaps(path: str) -> dict:
    a = postmortem.analyze(os.path.join(ROOT, path), quiet=True)
    return {g["missing"]: g for g in a.evidence_gaps}


def test_a_gloo_job_is_told_how_gloo_dumps_its_flight_recorder():
    fr = _gaps("samples/straggler_rank0_tokenizing/logs")["flight-recorder traces"]  # CPU torchrun + gloo, real
    assert "_dump_fr_trace_json" in fr["how"] and "TORCH_NCCL_DUMP_ON_TIMEOUT" not in fr["how"]
    assert "gloo" in fr["why"]


def test_an_nccl_job_is_told_the_nccl_dump_variables():
    fr = _gaps("tests/fixtures/report/watchdog_timeout_tokenization")["flight-recorder traces"]  # a user's NCCL log
    assert "TORCH_NCCL_DUMP_ON_TIMEOUT=1" in fr["how"] and "appends its rank" in fr["how"]


def test_a_dataloader_worker_death_asks_for_no_flight_recorder():
    assert "flight-recorder traces" not in _gaps("samples/dataloader_worker_killed/logs")

"""Dates as the logs wrote them (issue 26, item 4): transformers' `06/12/2025 09:12:05`, glog's year-less
`W1121 14:03:58.073000` dated from the other sources of the same bundle, and a time without a date never read as
today's date."""
from __future__ import annotations

import os
import shutil

import pandas as pd
import pytest

import postmortem
from postmortem.tables import schema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = os.path.join(ROOT, "samples")
TODAY = pd.Timestamp.now(tz="UTC").normalize()


def _ts(values, ref=None):
    return schema.times(pd.Series(values, dtype=object), ref)[0]


def test_month_first_slash_dates_are_read_as_transformers_writes_them():
    got = _ts(["06/12/2025 09:12:05", "13/12/2025 10:00:00", "2025-06-12 09:12:05,123"])
    assert list(got.dt.strftime("%Y-%m-%d %H:%M:%S")) == ["2025-06-12 09:12:05", "2025-12-13 10:00:00",
                                                          "2025-06-12 09:12:05"]


def test_a_time_or_day_without_a_year_is_unknown_not_today():
    got, undated = schema.times(pd.Series(["09:12:05", "Nov 20 16:03:25", "--11-21T14:03:58.073000"], dtype=object))
    assert got.isna().all() and undated == 2   # the time alone says nothing; the other two wait for a year


def test_a_stamp_without_a_year_takes_the_year_nearest_the_bundles_dated_stamps():
    ref = pd.Timestamp("2025-12-31 23:00", tz="UTC")
    got = _ts(["--01-01T00:00:01.5", "--12-31T22:59:00", "Nov 20 16:03:25"], ref)
    assert list(got.dt.strftime("%Y-%m-%d %H:%M:%S")) == ["2026-01-01 00:00:01", "2025-12-31 22:59:00",
                                                          "2025-11-20 16:03:25"]


def test_transformers_log_lines_keep_their_date_in_the_events_and_the_verdict():
    a = postmortem.analyze(os.path.join(SAMPLES, "sampling_oom_logs_lost", "logs"), quiet=True)
    ev = a.tables.events
    dated = ev[ev["source"] == "log.txt"]["ts"].dropna()
    assert len(dated) and (dated.dt.strftime("%Y-%m-%d") == "2025-06-12").all()
    assert "2025-06-12" in a.to_text() and TODAY.strftime("%Y-%m-%d") not in a.to_text()


def test_the_same_format_is_read_where_no_learned_prefix_covers_the_file():
    # train.log mixes these lines with tqdm bars and tracebacks: the fixed prefix reads them
    a = postmortem.analyze(os.path.join(SAMPLES, "sampling_oom_step2000", "logs"), quiet=True)
    ev = a.tables.events
    cfg = ev[ev["message"].str.contains("Training config", regex=False)]
    assert len(cfg) and cfg["ts"].notna().all()
    assert (cfg["ts"].dt.strftime("%Y-%m-%d %H:%M:%S") == "2025-06-12 09:12:05").all()


def test_glog_lines_take_the_year_of_torchruns_error_file(tmp_path):
    """The rank_raises_mid_epoch bundle (the issue's example): agent lines `W1121 14:03:58.073000 ...` have no year;
    torchrun's @record error files carry epoch times (2026-11-21 on the capture machine)."""
    logs = tmp_path / "logs"
    shutil.copytree(os.path.join(SAMPLES, "rank_raises_mid_epoch", "logs"), logs)
    ev = postmortem.analyze(str(logs), quiet=True).tables.events
    agent = ev[ev["message"].str.match(r"[WE]1121 14:03:58")]
    assert len(agent) >= 4 and (agent["ts"].dt.strftime("%Y-%m-%d %H:%M:%S") == "2026-11-21 14:03:58").all()
    # without any dated source, the same lines have no date at all (never this year's, never today's)
    for p in set(logs.rglob("*.json")):
        p.unlink()
    ev = postmortem.analyze(str(logs), quiet=True).tables.events
    agent = ev[ev["message"].str.match(r"[WE]1121 14:03:58")]
    assert len(agent) and agent["ts"].isna().all()

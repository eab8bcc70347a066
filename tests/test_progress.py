"""The stderr progress bar (postmortem/progress.py) and its `quiet` switch in the API and the CLI."""
from __future__ import annotations

import io
import os

import postmortem
from postmortem import api, progress
from postmortem.cli import main as cli_main

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples", "sampling_oom_step2000")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_draws_on_a_terminal_and_erases_itself(monkeypatch):
    monkeypatch.setattr(progress, "SHOW_AFTER", 0.0)
    monkeypatch.setattr(progress, "MIN_INTERVAL", 0.0)
    out = _Tty()
    with progress.make(4, 4 << 30, stream=out) as bar:
        bar.update(1 << 30)
        bar.update(3 << 30, files=3)
    text = out.getvalue()
    assert "1/4 files" in text and "4/4 files" in text and "4.0 GiB/4.0 GiB" in text and "100%" in text
    assert text.endswith("\r")  # the last draw was blanked out


def test_silent_when_quiet_or_not_a_terminal(monkeypatch):
    monkeypatch.setattr(progress, "SHOW_AFTER", 0.0)
    for stream, quiet in ((_Tty(), True), (io.StringIO(), False)):
        with progress.make(2, 100, quiet=quiet, stream=stream) as bar:
            bar.update(50)
            bar.update(50)
        assert stream.getvalue() == ""


def test_short_runs_draw_nothing():
    out = _Tty()
    with progress.make(1, 10, stream=out) as bar:
        bar.update(10)
    assert out.getvalue() == ""


def test_line_shows_eta_midway():
    bar = progress.Progress(10, 1000, stream=io.StringIO(), enabled=False)
    bar.update(250)
    assert "ETA" in bar.line(now=bar.start + 10) and "25%" in bar.line(now=bar.start + 10)


def test_quiet_reaches_parse_all_from_the_api_and_the_cli(monkeypatch):
    seen = []
    real = api.parse_all

    def spy(sources, **kw):
        seen.append(kw.get("quiet"))
        return real(sources, **kw)
    monkeypatch.setattr(api, "parse_all", spy)
    postmortem.analyze(SAMPLE, quiet=True)
    postmortem.analyze(SAMPLE)
    assert cli_main(["analyze", SAMPLE, "--format", "json", "-o", os.devnull, "--quiet"]) == 0
    assert seen == [True, False, True]

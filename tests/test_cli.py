"""The CLI is a thin skin over the API: exit codes, formats that agree, documented options."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from postmortem.cli import build_parser, main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIRE = os.path.join(ROOT, "tests", "rules", "first-exception", "fire")


def _run(*args):
    return subprocess.run([sys.executable, "-m", "postmortem.cli", *args], capture_output=True, text=True, timeout=120)


def test_nonexistent_path_exit_2_one_line():
    r = _run("analyze", "/nonexistent/dir")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_empty_directory_exit_2(tmp_path):
    r = _run("analyze", str(tmp_path))
    assert r.returncode == 2 and "no readable files" in r.stderr


def test_json_contract_keys_and_agreement_with_text(capsys):
    assert main(["analyze", FIRE, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"schema_version", "input", "world_size", "world_size_inferred", "ranks_seen", "verdict",
                         "findings", "evidence_gaps", "sources"}
    assert set(data["verdict"]) == {"category", "phase", "rule", "confidence", "culprit_ranks", "step", "summary"}
    f = data["findings"][0]
    assert set(f) == {"rule", "category", "phase", "confidence", "severity", "title", "culprit_ranks",
                      "affected_ranks", "step", "explanation", "remediation", "cascade_of", "evidence"}
    assert data["findings"] == sorted(data["findings"], key=lambda x: -x["confidence"])
    assert main(["analyze", FIRE]) == 0
    text = capsys.readouterr().out
    assert f"VERDICT  {data['verdict']['category']}" in text and data["verdict"]["summary"] in text


def test_html_output_file(tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["analyze", FIRE, "-o", str(out)]) == 0
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") and "rank_crash" in html


def test_rules_subcommand_lists_every_rule(capsys):
    from postmortem.rules import all_rules
    assert main(["rules"]) == 0
    out = capsys.readouterr().out
    assert all(r.id in out for r in all_rules())


def test_every_option_is_documented_in_readme():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    parser = build_parser()
    missing = []
    for action in parser._subparsers._group_actions[0].choices.values():
        for opt in action._actions:
            long = [s for s in opt.option_strings if s.startswith("--")]
            if long and long[0] != "--help" and long[0] not in readme:
                missing.append(long[0])
    assert not missing, f"undocumented options: {missing}"


def test_json_is_strict_no_nan(capsys):
    nvsmi = os.path.join(ROOT, "tests", "fixtures", "nvidia_smi")
    assert main(["analyze", nvsmi, "--format", "json"]) == 0
    out = capsys.readouterr().out
    json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert "NaN" not in out

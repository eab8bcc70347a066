"""The collector's pure parts: timestamped tee lines, evidence environment, rank/role naming, kernel-log window."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from postmortem.parsers.prefixes import strip_prefixes
from postmortem.cli import build_parser
from postmortem.collect import env as env_mod
from postmortem.collect import procs, runner, system
from postmortem.collect.tee import LineStamper, stamp

T0 = 1795267126.25  # 2026-11-21T13:18:46.250Z


def test_stamp_is_an_iso_utc_prefix_that_the_analyzer_strips_into_ts():
    p = stamp(T0)
    assert p == b"[2026-11-21T13:18:46.250Z] "
    msg, info = strip_prefixes((p + b"[rank3]: RuntimeError: boom").decode())
    assert info["ts"] == "2026-11-21T13:18:46.250Z" and info["rank"] == 3 and msg == "RuntimeError: boom"


def test_line_stamper_marks_each_line_start_across_chunk_boundaries():
    s, p = LineStamper(), stamp(T0)
    out = s.feed(b"one\ntw", T0) + s.feed(b"o\nthree\n", T0) + s.feed(b"\n", T0)
    assert out == p + b"one\n" + p + b"two\n" + p + b"three\n" + p + b"\n"


def test_line_stamper_gives_every_progress_redraw_its_own_line():
    s, p = LineStamper(), stamp(T0)
    out = s.feed(b"bar 1\rbar 2\rbar 3", T0) + s.feed(b"\r\ndone\r\n", T0)
    assert out == p + b"bar 1\r\n" + p + b"bar 2\r\n" + p + b"bar 3" + b"\n" + p + b"done\n"


def test_line_stamper_keeps_bytes_that_are_not_text():
    s = LineStamper()
    assert s.feed(b"\xff\x00\xfe\n", T0).endswith(b"] \xff\x00\xfe\n")


def test_evidence_env_adds_only_what_the_user_did_not_set():
    env, added = env_mod.evidence_env({"PATH": "/bin", "PYTHONUNBUFFERED": ""}, "/ev/n0", torch_version=(2, 13))
    assert env["PATH"] == "/bin" and env["PYTHONUNBUFFERED"] == ""  # set to empty is still the user's choice
    assert added["NCCL_DEBUG"] == "INFO" and added["NCCL_DEBUG_FILE"] == "/ev/n0/nccl/nccl.%h.%p.log"
    assert added["TORCH_FR_BUFFER_SIZE"] == "2000" and "TORCH_NCCL_TRACE_BUFFER_SIZE" not in added
    assert added["TORCH_FR_DUMP_TEMP_FILE"] == "/ev/n0/flight_recorder/nccl_trace_rank_"
    assert added["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1" and added["PYTHONFAULTHANDLER"] == "1"
    assert added["TORCHELASTIC_ERROR_FILE"] == "/ev/n0/error.json" and added["PET_LOG_DIR"] == "/ev/n0/torchrun"
    assert "PYTHONUNBUFFERED" not in added and set(added) <= set(env)


def test_evidence_env_treats_aliases_as_one_setting_and_follows_the_torch_version():
    _, added = env_mod.evidence_env({"TORCH_NCCL_TRACE_BUFFER_SIZE": "0", "NCCL_DEBUG": "WARN"}, "/e",
                                    torch_version=(2, 13))
    assert not {"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE", "NCCL_DEBUG", "NCCL_DEBUG_FILE"} & set(added)
    _, old = env_mod.evidence_env({}, "/e", torch_version=(2, 4))
    assert old["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000" and "TORCH_FR_BUFFER_SIZE" not in old
    assert "TORCH_NCCL_DEBUG_INFO_TEMP_FILE" in old and "TORCH_FR_DUMP_TEMP_FILE" not in old
    _, unknown = env_mod.evidence_env({}, "/e", torch_version=None)
    assert {"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"} <= set(unknown)


def test_evidence_env_asks_torchrun_to_tee_every_rank_with_its_global_rank():
    _, added = env_mod.evidence_env({}, "/e", torch_version=(2, 13), command=["torchrun", "train.py"])
    assert added["PET_TEE"] == "3" and added["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] == "[rank${rank}]:"


@pytest.mark.parametrize("environ, command", [
    ({"PET_TEE": "0"}, ["torchrun", "train.py"]),                  # the user's own tee setting
    ({"PET_REDIRECTS": "3"}, ["torchrun", "train.py"]),            # redirects only: a quiet console was chosen
    ({}, ["torchrun", "--redirects", "3", "train.py"]),            # the flags beat PET_*: chosen on the command line
    ({}, ["torchrun", "--tee=1", "train.py"]),
    ({}, ["python", "-m", "torch.distributed.run", "-t", "3", "train.py"]),
])
def test_evidence_env_leaves_torchruns_output_to_a_user_who_chose(environ, command):
    env, added = env_mod.evidence_env(environ, "/e", torch_version=(2, 13), command=command)
    assert "PET_TEE" not in added and "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE" not in added
    assert {k: env[k] for k in environ} == environ


def test_evidence_env_keeps_the_users_prefix_template():
    env, added = env_mod.evidence_env({"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "[${role_name}${local_rank}]:"},
                                      "/e", torch_version=(2, 13), command=["torchrun", "x.py"])
    assert added["PET_TEE"] == "3" and env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] == "[${role_name}${local_rank}]:"


def test_rank_census_keeps_each_rank_process_once_with_its_first_sighting(monkeypatch):
    tree = [procs.Proc(pid=10, ppid=1, role="launcher"), procs.Proc(pid=11, ppid=10, rank=0, local_rank=0, role="rank"),
            procs.Proc(pid=12, ppid=10, rank=1, local_rank=1, role="rank"), procs.Proc(pid=13, ppid=1, role="proc")]
    monkeypatch.setattr(procs, "job_processes", lambda root, env, light=False: tree)
    census = procs.RankCensus()
    census.look(10, {}, "t1")
    tree[2] = procs.Proc(pid=12, ppid=10, rank=7, role="rank")   # a later look does not rewrite what was seen
    census.look(10, {}, "t2")
    recs = census.records()
    assert [(r["pid"], r["rank"], r["role"], r["first_seen"]) for r in recs] == [
        (10, None, "launcher", "t1"), (11, 0, "rank", "t1"), (12, 1, "rank", "t1")]


def test_manifest_pids_name_the_ranks_of_rankless_stack_dumps(tmp_path):
    import json

    import postmortem
    node = tmp_path / "n0"
    (node / "pyspy").mkdir(parents=True)
    (node / "manifest.json").write_text(json.dumps({
        "collector": "postmortem-collect", "host": "gpu7.example", "exit_code": 1,
        "processes": [{"pid": 5205, "rank": 3, "local_rank": 3, "role": "rank"},
                      {"pid": 5100, "rank": None, "local_rank": None, "role": "launcher"}]}))
    # a dump someone took by hand: py-spy names the process, not the rank
    (node / "pyspy" / "dump.txt").write_text(
        "Process 5205: /usr/bin/python -u train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
        "Thread 5205 (idle): \"MainThread\"\n    load_batch (train.py:18)\n    <module> (train.py:42)\n")
    stacks = postmortem.analyze(str(tmp_path)).tables.stacks
    assert stacks["rank"].tolist() == [3]


def _p(pid, ppid, **env) -> procs.Proc:
    return procs.Proc(pid=pid, ppid=ppid, environ={k: str(v) for k, v in env.items()}, is_python=True)


def test_roles_launcher_ranks_and_forked_workers():
    tree = [_p(10, 1), _p(11, 10, RANK=0, LOCAL_RANK=0), _p(12, 10, RANK=1, LOCAL_RANK=1),
            _p(13, 12, RANK=1, LOCAL_RANK=1)]  # 13: a DataLoader worker forked by rank 1
    procs._assign_roles(tree, {})
    assert [(p.role, p.rank) for p in tree] == [("launcher", None), ("rank", 0), ("rank", 1), ("child", 1)]
    assert [procs.dump_name(p) for p in tree] == ["launcher_pid10", "rank0_pid11", "rank1_pid12",
                                                  "rank1_pid13_child-of-12"]


def test_rank_inherited_from_the_collectors_own_slurm_task_is_not_a_rank():
    # srun (one task per node) -> collector -> python train.py that spawns its ranks without RANK
    tree = [_p(20, 1, SLURM_PROCID=3), _p(21, 20, SLURM_PROCID=3)]
    procs._assign_roles(tree, {"SLURM_PROCID": "3"})
    assert [p.rank for p in tree] == [None, None]
    mpi = [_p(30, 1), _p(31, 30, OMPI_COMM_WORLD_RANK=4)]
    procs._assign_roles(mpi, {})
    assert [(p.role, p.rank) for p in mpi] == [("launcher", None), ("rank", 4)]


def test_local_rank_only_is_not_named_as_a_global_rank():
    p = procs.Proc(pid=5, ppid=1, cmdline=["python", "train.py", "--local_rank=3"])
    procs._assign_roles([p], {})
    assert p.local_rank == 3 and p.rank is None and procs.dump_name(p) == "localrank3_pid5"
    from postmortem.ingest.discover import path_hints
    assert "rank" not in path_hints("n0/pyspy/20261121T131846250Z/localrank3_pid5.txt")
    assert path_hints("n0/pyspy/20261121T131846250Z/rank7_pid5.txt")["rank"] == 7


def test_job_processes_reads_a_real_tree():
    code = ("import subprocess, sys, os; "
            "subprocess.run([sys.executable, '-c', 'import time; time.sleep(30)'], env={**os.environ, 'RANK': '2'})")
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            tree = procs.job_processes(parent.pid, {})
            if len(tree) == 2 and tree[1].cmdline:
                break
            time.sleep(0.05)
        assert [p.pid for p in tree][0] == parent.pid and tree[1].ppid == parent.pid
        assert tree[0].is_python and tree[1].is_python and tree[1].rank == 2 and tree[0].role == "launcher"
        text = procs.format_tree(tree, "now")
        assert f"{tree[1].pid:8d} {parent.pid:7d}" in text and "time.sleep(30)" in text
    finally:
        for p in procs.job_processes(parent.pid, {})[::-1]:
            try:
                os.kill(p.pid, 9)
            except ProcessLookupError:
                pass
        parent.wait()


def test_kernel_log_keeps_only_lines_from_the_job_on():
    iso = [b"2026-11-21T13:00:00,000000+00:00 Out of memory: Killed process 1 (old)\n",
           b"2026-11-21T13:18:50,100000+00:00 NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n",
           b"   continuation of the Xid line\n"]
    assert system._since_iso(iso, T0) == iso[1:]
    mono = [b"[  100.000000] old\n", b"[  500.500000] new\n", b"more\n"]
    assert system._since_mono(mono, 400.0) == mono[1:]


def test_task_subdir_and_lead_task_under_slurm():
    assert runner.task_subdir({}) is None
    one_per_node = {"SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_NUM_NODES": "4", "SLURM_PROCID": "2"}
    assert runner.task_subdir(one_per_node) is None and not runner.is_lead_task(one_per_node)
    per_gpu = {"SLURM_STEP_NUM_TASKS": "16", "SLURM_STEP_NUM_NODES": "2", "SLURM_PROCID": "9"}
    assert runner.task_subdir(per_gpu) == "rank9"
    assert runner.is_lead_task({"SLURM_PROCID": "0"}) and runner.is_lead_task({})


def test_an_earlier_run_is_never_overwritten(tmp_path):
    first, earlier = runner.fresh_node_dir(str(tmp_path), "n0", None)
    assert first == str(tmp_path / "n0") and earlier is None
    (tmp_path / "n0" / "stdout.log").write_text("earlier run\n")
    second, earlier = runner.fresh_node_dir(str(tmp_path), "n0", None)
    assert second == str(tmp_path / "n0.2") and earlier == first
    assert (tmp_path / "n0" / "stdout.log").read_text() == "earlier run\n"


def test_cli_takes_the_command_after_double_dash():
    args = build_parser().parse_args(["collect", "--out", "ev", "--stall-after", "3", "--", "torchrun",
                                      "--nproc-per-node", "2", "train.py", "--out", "x"])
    assert args.out == "ev" and args.stall_after == 3.0
    assert args.cmd == ["--", "torchrun", "--nproc-per-node", "2", "train.py", "--out", "x"]


def test_cli_without_a_command_is_bad_usage(tmp_path, capsys):
    from postmortem.cli import main
    assert main(["collect", "--out", str(tmp_path)]) == 2
    assert "no command given" in capsys.readouterr().err


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_exit_like_re_raises_the_jobs_signal(sig):
    code = f"import signal; from postmortem.collect import exit_like; exit_like(-signal.{sig})"
    assert subprocess.run([sys.executable, "-c", code], timeout=30).returncode == -getattr(__import__("signal"), sig)


def test_stall_is_dumped_once_per_silence_with_a_startup_grace():
    from postmortem.collect.watchdog import STARTUP_GRACE_S, stall_reason
    assert stall_reason(102.9, 100.0, True, 3, None) is None
    assert stall_reason(103.0, 100.0, True, 3, None) == "no output for 3 s"
    assert stall_reason(500.0, 100.0, True, 3, dumped_for=100.0) is None      # same silence: dumped already
    assert stall_reason(504.0, 501.0, True, 3, dumped_for=100.0)               # new output re-armed it
    assert stall_reason(100.0 + STARTUP_GRACE_S - 1, 100.0, False, 3, None) is None  # still starting up
    assert stall_reason(100.0 + STARTUP_GRACE_S, 100.0, False, 3, None) == f"no output for {STARTUP_GRACE_S:g} s"
    assert stall_reason(10_000.0, 100.0, True, 0, None) is None                # 0 turns it off


def test_text_only_streams_get_whole_characters_and_byte_streams_stay_as_they_are():
    import io
    from postmortem.collect.tee import binary_stream
    text = io.StringIO()
    sink = binary_stream(text)
    snow = "❄".encode()
    sink.write(b"a" + snow[:1])
    sink.write(snow[1:] + b"b\n")
    assert text.getvalue() == "a❄b\n"
    raw = io.BytesIO()
    assert binary_stream(raw) is raw


def test_collect_from_python_returns_the_exit_status_and_writes_to_given_streams(tmp_path):
    import io
    from postmortem.collect import collect
    out, err = io.StringIO(), io.BytesIO()
    rc = collect([sys.executable, "-c", "print('héllo'); import sys; sys.exit(4)"], str(tmp_path), analyze=False,
                 node="nb", stdout=out, stderr=err)
    assert rc == 4 and out.getvalue() == "héllo\n"
    assert b"postmortem collect: job ended (exit code 4)" in err.getvalue()
    assert (tmp_path / "nb" / "manifest.json").exists()

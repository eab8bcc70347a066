"""The benchmark's failure-tree generator (benchmarks/make_tree.py) and runner (benchmarks/run.py)."""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys

import pytest

import postmortem

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import make_tree  # noqa: E402
from postmortem.parsers import prefilter  # noqa: E402
from postmortem.parsers import scan_limits

# Every line (or `\r` segment) the generator writes, by file, with the FORMATS.md section that documents its shape.
RANK_LOG_SHAPES = [
    r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] \[INFO\] \[[\w.]+:\d+:\w+\] .+",               # §5 DeepSpeed logging
    r"[\w.-]+:\d+:\d+ \[\d+\] NCCL INFO .+",                                                 # §1.1 INFO
    r"[\w.-]+:\d+:\d+ \[\d+\] [\w./-]+:\d+ NCCL WARN .+",                                    # §1.1 WARN
    r"NCCL version \d+\.\d+\.\d+\+cuda[\d.]+",                                               # §1.3 banner
    r"\[rank\d+\]:\[[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{9} [\w.]+:\d+\] .+",                      # §2.1 c10 prefix
    r"(?:[\w ]+: )?\s*\d+%\|[^|]*\| *\d+/\d+ \[[\d:]+<(?:[\d:]+|\?), *(?:[\d.]+(?:it/s|s/it)|\?it/s)"
    r"(?:, [\w=., -]+)?\]",                                                                    # §9.1 tqdm
    r"\{'loss': [\d.]+, 'grad_norm': [\d.]+, 'learning_rate': [\d.e-]+, 'epoch': [\d.]+\}",  # §9.3 HF dict
    r"\[rank\d+\]: Traceback \(most recent call last\):",                                    # §2.8 excepthook
    r'\[rank\d+\]:   File "[^"]+", line \d+, in \S+',                                        # §2.8
    r"\[rank\d+\]:     \S.*",                                                                 # §2.8 source line
    r"\[rank\d+\]: torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate .+",      # §3.1 (>= 2.4)
    r"ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely\.",
    r"Last error:",                                                                           # §2.6
    r"socketProgress: Connection closed by remote peer \S+",                                  # §1.4 / §2.6
    r"Exception raised from \w+ at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL\.cpp:\d+ "
    r"\(most recent call first\):",                                                           # §2.3 / §2.6
    r"terminate called after throwing an instance of 'c10::DistBackendError'",                # §2.3
    r"  what\(\):  \[PG ID \d+ PG GUID \d+\(default_pg\) Rank \d+\] Process group watchdog thread terminated .+",
]
LAUNCHER_SHAPES = [
    r"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{3}000 \d+ [\w/.]+:\d+\] .*",                            # §4.1 (>= 2.4)
    r"Traceback \(most recent call last\):", r'  File "[^"]+", line \d+, in \S+', r"    \S.*",
    r"torch\.distributed\.elastic\.multiprocessing\.errors\.ChildFailedError: ",              # §4.2 block
    r"=+", r"-+", r"train\.py FAILED", r"Failures:", r"Root Cause \(first observed failure\):", r"\[\d+\]:",
    r"  <NO_OTHER_FAILURES>", r"  time      : \d{4}-\d\d-\d\d_\d\d:\d\d:\d\d", r"  host      : \S+",
    r"  rank      : \d+ \(local_rank: \d+\)", r"  exitcode  : -?\d+ \(pid: \d+\)(?:  \(SIG\w+\)| )",
    r"  error_file: <N/A>", r"  traceback : (?:Signal \d+ \(SIG\w+\) received by PID \d+|To enable traceback see: .+)",
]
PYSPY_SHAPES = [r"Process \d+: .+", r"Python v[\d.]+ \(.+\)", r'Thread \d+ \((?:idle|active|active\+gil)\): ".+"',
                r"    \S+ \([\w/.]+:\d+\)"]                                                   # §6.1
SMI_SHAPES = [r"timestamp, index, name, pci\.bus_id, memory\.used \[MiB\], memory\.total \[MiB\], "
              r"utilization\.gpu \[%\], temperature\.gpu, power\.draw \[W\]",                # §7.2 header
              r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}, \d+, [^,]+, [0-9A-F:.]+, \d+ MiB, \d+ MiB, \d+ %, \d+, "
              r"[\d.]+ W"]
DMESG_SHAPES = [r"\[\s*\d+\.\d+\] NVRM: GPU at PCI:[0-9a-f:]+: GPU-[0-9a-f-]+"]                # §7.4


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("tree") / "t")
    manifest = make_tree.make_tree(out, ranks=16, size=8 * 1024 * 1024, seed=3)
    return out, manifest


def _digests(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def test_same_arguments_give_the_same_bytes(tmp_path):
    a = make_tree.make_tree(str(tmp_path / "a"), ranks=4, size=1 << 20, seed=7)
    b = make_tree.make_tree(str(tmp_path / "b"), ranks=4, size=1 << 20, seed=7)
    c = make_tree.make_tree(str(tmp_path / "c"), ranks=4, size=1 << 20, seed=8)
    assert a == b and _digests(tmp_path / "a") == _digests(tmp_path / "b")
    assert _digests(tmp_path / "a") != _digests(tmp_path / "c")


def test_size_layout_and_planted_failure(tree):
    root, m = tree
    assert abs(m["bytes"] - 8 * 1024 * 1024) < 0.15 * 8 * 1024 * 1024
    assert sorted(os.listdir(root)) == ["gpu-node-000", "gpu-node-001"]
    c = m["culprit_rank"]
    assert 0 < c < 16 and m["fail_step"] % m["sample_every"] == 0
    node = os.path.join(root, m["culprit_host"])
    assert os.path.exists(os.path.join(node, "dmesg.txt"))
    assert not os.path.exists(os.path.join(node, "pyspy", f"rank{c}.txt"))  # the OOM'd process left no dump
    with open(os.path.join(node, f"rank{c}.log"), "rb") as fh:
        tail = fh.read()[-4000:].decode()
    assert "torch.OutOfMemoryError: CUDA out of memory" in tail and f"[rank{c}]: Traceback" in tail
    assert f"sample_every={m['sample_every']}" in open(os.path.join(node, f"rank{c}.log")).read(4000)


def _segments(path):
    with open(path, "rb") as fh:
        for line in fh.read().decode("utf-8").split("\n"):
            for seg in line.split("\r"):
                if seg.strip():
                    yield seg


def _files(root, name):
    for dirpath, _, files in os.walk(root):
        for f in files:
            in_pyspy = os.path.basename(dirpath) == "pyspy"
            if (name == "pyspy" and in_pyspy) or (name == "rank" and not in_pyspy and re.fullmatch(r"rank\d+\.log", f)) \
                    or f == name:
                yield os.path.join(dirpath, f)


@pytest.mark.parametrize("name,shapes", [("rank", RANK_LOG_SHAPES), ("launcher.log", LAUNCHER_SHAPES),
                                         ("pyspy", PYSPY_SHAPES), ("nvidia-smi.csv", SMI_SHAPES),
                                         ("dmesg.txt", DMESG_SHAPES)])
def test_every_line_shape_is_documented(tree, name, shapes):
    root, _ = tree
    rx = re.compile("|".join(f"(?:{s})" for s in shapes))
    checked = 0
    for p in _files(root, name):
        for seg in _segments(p):
            # a traceback glued to the last progress redraw (FORMATS.md §0.2): check both parts
            for part in re.split(r"(?<=\])(?=\[rank\d+\]: )", seg):
                assert rx.fullmatch(part), f"{os.path.relpath(p, root)}: undocumented shape {part[:160]!r}"
                checked += 1
    assert checked >= 8


def test_analyze_finds_the_planted_oom(tree):
    root, m = tree
    a = postmortem.analyze(root, quiet=True)
    v = a.verdict
    assert (v.category, v.phase, list(v.culprit_ranks)) == ("gpu_oom", "sample", [m["culprit_rank"]])
    assert v.step == m["fail_step"]
    assert a.tables.meta["world_size"] == 16
    # the big rank logs were summarised (sampled progress, counted NCCL topology lines), not turned into rows: but
    # for their share of the job's exact budget (a tqdm redraw is at least 80 bytes), a few rows per rank
    assert len(a.tables.steps) < 16 * 4 * prefilter.MAX_SAMPLES + prefilter.EXACT_JOB_BYTES // 80
    assert sum(1 for s in a.tables.meta["summarised"] if re.search(r"/rank\d+\.log$", s)) == 16
    assert sum(c["channel"] for c in a.tables.meta["nccl_counts"].values()) > 16 * 32
    assert len(a.tables.nccl) < 16 * 12


def test_run_py_prints_the_side_by_side_row(tmp_path):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "run.py"), "--rows", "8:2MiB",
                          "--repeats", "1", "--workdir", str(tmp_path), "--json", str(tmp_path / "r.json")],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "| ranks | size |" in out.stdout and "✓" in out.stdout
    assert not any(n.startswith("tree_") for n in os.listdir(tmp_path))  # trees are deleted after measuring


def test_grep_pattern_is_the_prefilter_trigger_set():
    # Load benchmarks/run.py by path: fuzz/ also has a run.py, and both directories end up on sys.path.
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_run", os.path.join(ROOT, "benchmarks", "run.py"))
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    words = run.trigger_set()
    assert "Watchdog caught" in words and "out of memory" in words and "Traceback (most recent call last)" in words
    pat = run.grep_pattern(words)
    assert re.search(pat, "x Watchdog caught y") and re.search(pat, "Root Cause (first observed failure):")
    # grep gets the error triggers the prefilter searches every byte for, not the progress words it samples
    from postmortem.parsers import textlog
    assert set(textlog._prefilter_triggers().pattern_text) <= set(words)
    assert "step" not in words and "{'" not in words
    assert {"step", "Step", "{'"} <= set(run.wide_trigger_set())


@pytest.mark.parametrize("mix", ["realistic", "nccl", "redraw", "hfdict", "warning", "short", "errors"])
def test_every_line_mix_keeps_the_planted_verdict_with_bounded_tables(tmp_path, monkeypatch, mix):
    import mix_tree
    m = mix_tree.make_mix_tree(str(tmp_path / "t"), mix, ranks=4, size=3 * make_tree.MIB)
    a = postmortem.analyze(str(tmp_path / "t"), quiet=True)
    assert (a.verdict.category, a.verdict.culprit_ranks) == ("gpu_oom", [m["culprit_rank"]])
    t = a.tables
    # what the job's exact budget reads line by line (a step row, an event: 60 bytes of text at least) plus a fixed
    # budget per rank: rows follow the ranks, not the ~5,000 lines of each kind every rank printed
    base = prefilter.EXACT_JOB_BYTES // 60
    assert len(t.steps) < 4 * 80 + base and len(t.events) < 4 * 600 + base and len(t.tracebacks) < 4 * 300 + base
    monkeypatch.setattr(scan_limits, "EXACT_JOB_BYTES", 0)  # the per-rank budget alone
    a = postmortem.analyze(str(tmp_path / "t"), quiet=True)
    assert (a.verdict.category, a.verdict.culprit_ranks) == ("gpu_oom", [m["culprit_rank"]])
    t = a.tables
    assert t.steps.groupby("rank").size().max() < 80
    assert len(t.events) < 4 * 600 and len(t.tracebacks) < 4 * 300
    assert len(a.to_json()) < 100_000

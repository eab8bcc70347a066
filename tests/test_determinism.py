"""Identical input gives byte-identical JSON: across runs, processes (hash seeds), worker counts and file orderings."""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

import pytest

import postmortem

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "samples", "*", "logs")))


def _bundle(tmp_path):
    """A mixed bundle: several ranks and kinds, a traceback, timeouts, a gzip file and a skipped binary."""
    import gzip
    root = tmp_path / "bundle"
    src = SAMPLES[0] if SAMPLES else None
    if src:
        shutil.copytree(src, root)
    else:
        root.mkdir()
    (root / "rank7.log.gz").write_bytes(gzip.compress(b"step 3 loss 0.25\nRuntimeError: CUDA out of memory.\n",
                                                      mtime=0))
    (root / "core.bin").write_bytes(bytes(range(256)) * 8)
    (root / "nccl.gpu-1.4242").write_text(
        "gpu-1:4242:4243 [0] NCCL INFO comm 0x1 rank 7 nranks 8 cudaDev 0 busId 1b000 - Init COMPLETE\n"
        "gpu-1:4242:4243 [0] misc/socket.cc:49 NCCL WARN Net : Connection closed by remote peer\n")
    return root


def _json(path, jobs=1) -> str:
    return postmortem.analyze(str(path), jobs=jobs).to_json()


def test_repeated_runs_and_worker_counts_give_identical_json(tmp_path):
    root = _bundle(tmp_path)
    first = _json(root, jobs=1)
    assert first == _json(root, jobs=1)
    assert first == _json(root, jobs=2)  # jobs given: parsed in a process pool even when small
    assert first == _json(root, jobs=3)


def _copy_in_order(src, dst, reverse: bool) -> None:
    """Recreate a tree file by file in a chosen order (directory entry order follows creation order on most fs)."""
    files = sorted(p for p in glob.glob(os.path.join(src, "**", "*"), recursive=True) if os.path.isfile(p))
    for path in (reversed(files) if reverse else files):
        rel = os.path.relpath(path, src)
        os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
        shutil.copy2(path, os.path.join(dst, rel))


def test_file_creation_order_does_not_change_the_output(tmp_path):
    root = _bundle(tmp_path)
    out = tmp_path / "same_path"
    _copy_in_order(root, out, reverse=False)
    forward = _json(out)
    shutil.rmtree(out)
    _copy_in_order(root, out, reverse=True)
    assert _json(out) == forward


def test_discovery_order_does_not_change_the_output(tmp_path, monkeypatch):
    root = _bundle(tmp_path)
    expected = _json(root)
    real_scandir = os.scandir

    class Reversed:
        def __init__(self, path):
            self._it = real_scandir(path)

        def __enter__(self):
            return reversed(list(self._it))

        def __exit__(self, *exc):
            self._it.close()

        def __iter__(self):
            return iter(reversed(list(self._it)))

    monkeypatch.setattr(os, "scandir", Reversed)
    assert _json(root) == expected


@pytest.mark.parametrize("seeds", [("0", "12345")])
def test_separate_processes_with_different_hash_seeds_agree(tmp_path, seeds):
    root = _bundle(tmp_path)
    outs = []
    for seed in seeds:
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run([sys.executable, "-m", "postmortem.cli", "analyze", str(root), "--format", "json",
                               "--jobs", "1"], capture_output=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
        outs.append(proc.stdout)
    assert outs[0] == outs[1]
    assert outs[0] == (_json(root) + "\n").encode()


@pytest.mark.parametrize("bundle", SAMPLES)
def test_samples_are_deterministic_across_worker_counts(bundle):
    assert _json(bundle, jobs=1) == _json(bundle, jobs=2)

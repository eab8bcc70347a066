"""The parse stage on a Dask cluster (postmortem/ingest/engines.py) gives the same JSON as the local engine."""
from __future__ import annotations

import os
import sys

import pytest

import postmortem
from postmortem.ingest import engines
from postmortem.cli import main as cli_main
from postmortem.ingest.discover import Source

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    import make_tree
    out = str(tmp_path_factory.mktemp("dask") / "t")
    make_tree.make_tree(out, ranks=8, size=3 * 1024 * 1024, seed=11, gpus_per_node=4)
    return out


def test_batches_keep_big_files_alone_and_group_small_ones():
    srcs = [Source(path=f"/x/{i}", source=str(i), bytes=b) for i, b in enumerate([10, 900, 10, 10, 500, 10])]
    groups = engines.batches(srcs, max_bytes=600, max_files=3)
    assert sorted(i for g in groups for i in g) == list(range(6))
    assert [1] in groups and [4, 0, 2] in groups           # largest first, small ones packed up to the limits
    assert all(len(g) <= 3 for g in groups)


def test_missing_dask_is_a_clear_error(monkeypatch, tree):
    monkeypatch.setitem(sys.modules, "distributed", None)  # makes `import distributed` fail
    with pytest.raises(engines.EngineError, match=r"pip install 'ddp-postmortem\[dask\]'"):
        postmortem.analyze(tree, engine="dask", quiet=True)
    assert cli_main(["analyze", tree, "--engine", "dask", "--quiet"]) == 2


def test_local_cluster_with_two_workers_gives_byte_identical_json(tree, tmp_path):
    distributed = pytest.importorskip("distributed")
    local = postmortem.analyze(tree, quiet=True).to_json()
    import dask
    with dask.config.set({"temporary-directory": str(tmp_path)}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                     silence_logs=40, local_directory=str(tmp_path)) as cluster:
        remote = postmortem.analyze(tree, engine="dask", scheduler=cluster.scheduler_address, quiet=True).to_json()
        workers = len(cluster.workers)
    assert workers == 2
    assert remote == local
    assert '"category": "gpu_oom"' in remote


def test_no_scheduler_address_starts_a_local_cluster(tree):
    pytest.importorskip("distributed")
    from postmortem.ingest.discover import discover
    sources = discover(tree)
    results = engines.dask_parse(sources, None, n_workers=2)
    assert len(results) == len(sources) and all(r is not None for r in results)
    assert sum(len(r.rows.get("events", [])) for r in results) > 0


def test_unreachable_scheduler_is_an_engine_error(tree, monkeypatch):
    pytest.importorskip("distributed")
    import distributed

    def refuse(*a, **k):
        raise OSError("connection refused")
    monkeypatch.setattr(distributed, "Client", refuse)
    with pytest.raises(engines.EngineError, match="cannot reach the dask scheduler tcp://10.0.0.1:8786"):
        engines.dask_parse([], "tcp://10.0.0.1:8786")

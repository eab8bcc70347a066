"""Where the per-file parse stage runs beyond this machine: a Dask cluster (`--engine dask [--scheduler ADDRESS]`).

Only parsing is distributed; discovery, table building, rules and rendering stay here, so the result (and the JSON
report) is the same as the local engine's. The workers must see the input files at the same paths (a shared file
system) and have this package installed. Optional dependency: `pip install ddp-postmortem[dask]`.
"""
from __future__ import annotations

import shutil
import tempfile

BATCH_BYTES = 64 * 1024 * 1024   # files are sent to workers in batches of about this much input ...
BATCH_FILES = 256                # ... or this many files, whichever comes first


class EngineError(RuntimeError):
    """The requested engine cannot run (not installed, scheduler unreachable)."""


def batches(sources: list, max_bytes: int = BATCH_BYTES, max_files: int = BATCH_FILES) -> list[list[int]]:
    """Indexes of `sources` grouped into tasks: big files alone, small ones together (one task per file would
    spend more time in the scheduler than in the parser)."""
    out: list[list[int]] = []
    cur: list[int] = []
    size = 0
    for i in sorted(range(len(sources)), key=lambda i: -sources[i].bytes):
        b = max(0, sources[i].bytes)
        if cur and (size + b > max_bytes or len(cur) >= max_files):
            out.append(cur)
            cur, size = [], 0
        cur.append(i)
        size += b
    if cur:
        out.append(cur)
    return out


def parse_batch(sources: list) -> list:
    """Parse a list of sources on a worker (module-level so it pickles by reference)."""
    from postmortem.parsers.base import parse_source_compact
    return [parse_source_compact(s) for s in sources]


def dask_parse(sources: list, scheduler: str | None = None, progress=None, n_workers: int | None = None,
               sink=None) -> list:
    """ParseResults for `sources` (in order), computed on the Dask scheduler at `scheduler`, or on a LocalCluster
    started for this call when no address is given. With `sink`, each result goes to `sink(index, result)` as its
    batch arrives instead (the list returned then holds None)."""
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError as exc:
        raise EngineError("the dask engine needs dask.distributed: pip install 'ddp-postmortem[dask]'") from exc
    cluster = None
    # dask leaves a `dask-scratch-space` folder in the temporary directory; a local cluster gets its own, removed after
    scratch = None if scheduler else tempfile.mkdtemp(prefix="postmortem-dask-")
    try:
        if scheduler:
            client = Client(scheduler, timeout="20s")
        else:
            import dask
            with dask.config.set({"temporary-directory": scratch}):  # the scheduler's scratch folder too
                cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=40, local_directory=scratch)
            client = Client(cluster)
    except (OSError, TimeoutError) as exc:
        if cluster is not None:
            cluster.close()
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
        raise EngineError(f"cannot reach the dask scheduler {scheduler or '(local cluster)'}: {exc}") from exc
    try:
        groups = batches(sources)
        futures = {client.submit(parse_batch, [sources[i] for i in g], pure=False): g for g in groups}
        out: list = [None] * len(sources)
        for fut in as_completed(futures):
            group = futures[fut]
            for i, res in zip(group, fut.result()):
                if sink is None:
                    out[i] = res
                else:
                    sink(i, res)
            if progress is not None:
                progress.update(sum(sources[i].bytes for i in group), files=len(group))
        return out
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)

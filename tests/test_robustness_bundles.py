"""Partial and mixed bundles: missing ranks, stderr-only ranks, two jobs in one directory, mixed versions, skewed
clocks. The analysis says what it could not see and never mixes what does not belong together silently."""
from __future__ import annotations

import glob
import os
import textwrap

import pytest

import postmortem

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.35 GiB"
WATCHDOG = ("[rank{r}]:[E1121 13:18:24.116000 {pid} torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1234] [PG ID 0 "
            "PG GUID 0(default_pg) Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
            "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600123 milliseconds before timing out.")


def _write(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def _analyze(path) -> postmortem.Analysis:
    return postmortem.analyze(str(path), jobs=1)


def _gap(a, word: str) -> dict | None:
    return next((g for g in a.evidence_gaps if word in g["missing"]), None)


def _jobs(a) -> dict:
    return a.tables.meta["jobs"]


def _job_of(a, source: str):
    df = a.tables.sources
    value = df.loc[df["source"] == source, "job"].iloc[0]
    return value if isinstance(value, str) else None


# ------------------------------------------------------------------------------------------------ partial

def test_missing_rank_is_named_and_the_rest_still_analysed(tmp_path):
    files = {f"rank{r}.log": f"WORLD_SIZE=4\nstep 10 loss 0.5\n{WATCHDOG.format(r=r, pid=100 + r)}\n" for r in (0, 1)}
    files["rank3.log"] = f"WORLD_SIZE=4\nstep 10 loss 0.5\n[rank3]: {OOM}\n"
    _write(tmp_path, files)
    a = _analyze(tmp_path)
    meta = a.tables.meta
    assert meta["world_size"] == 4 and not meta["world_size_inferred"]
    assert meta["ranks_seen"] == [0, 1, 3]
    assert meta["ranks_missing"] == [2]
    gap = _gap(a, "logs of ranks")
    assert gap and "[2]" in gap["missing"]
    assert a.verdict.category == "gpu_oom" and a.verdict.culprit_ranks == [3]


def test_ranks_with_only_stderr(tmp_path):
    run = "logs/7a0b1c2d-0000-4000-8000-000000000000_abcd1234/attempt_0"
    _write(tmp_path, {
        f"{run}/0/stdout.log": "step 1\nstep 2\nstep 3\n",
        f"{run}/0/stderr.log": WATCHDOG.format(r=0, pid=11) + "\n",
        # rank 1 left only stderr (stdout was never flushed before the crash)
        f"{run}/1/stderr.log": """\
            [rank1]: Traceback (most recent call last):
            [rank1]:   File "/work/train.py", line 42, in <module>
            [rank1]:     main()
            [rank1]:   File "/work/train.py", line 30, in main
            [rank1]:     batch = next(it)
            [rank1]: ValueError: corrupt sample at step 3
            """,
    })
    a = _analyze(tmp_path)
    assert set(a.tables.meta["ranks_seen"]) == {0, 1}
    assert a.verdict.category == "rank_crash" and a.verdict.culprit_ranks == [1]
    srcs = a.tables.sources
    assert len(srcs) == 3 and srcs["problem"].isna().all()
    assert _jobs(a)["count"] == 1 and _jobs(a)["note"] is None


# ------------------------------------------------------------------------------------------------ two jobs

def test_two_torchrun_runs_in_one_directory_are_told_apart(tmp_path):
    a_run = "logs/aaaaaaaa-1111-4000-8000-000000000000_k2j4h5g6/attempt_0"
    b_run = "logs/bbbbbbbb-2222-4000-8000-000000000000_p9o8i7u6/attempt_0"
    _write(tmp_path, {
        f"{a_run}/0/stderr.log": f"[rank0]: {OOM}\n",
        f"{a_run}/1/stderr.log": WATCHDOG.format(r=1, pid=12) + "\n",
        f"{b_run}/0/stderr.log": "step 100 loss 0.1\n",
        f"{b_run}/1/stderr.log": "step 100 loss 0.1\n",
    })
    a = _analyze(tmp_path)
    jobs = _jobs(a)
    assert jobs["count"] == 2
    assert _job_of(a, f"{a_run}/0/stderr.log") == _job_of(a, f"{a_run}/1/stderr.log") == "job1"
    assert _job_of(a, f"{b_run}/0/stderr.log") == _job_of(a, f"{b_run}/1/stderr.log") == "job2"
    assert "2 different jobs" in jobs["note"] and "torchrun run id" in jobs["note"]
    assert "aaaaaaaa" in jobs["note"] and "bbbbbbbb" in jobs["note"]
    gap = _gap(a, "single job")
    assert gap and "2 different jobs" in gap["why"]


def test_two_jobs_told_apart_by_nccl_world_and_communicators(tmp_path):
    # No run ids: job A ran 8 ranks (NCCL comm 0xaaaa), job B 4 ranks (comm 0xbbbb). Same node, same file names.
    def init(host, pid, rank, n, comm):
        return (f"{host}:{pid}:{pid + 1} [0] NCCL INFO comm 0x55{rank}0 rank {rank} nranks {n} cudaDev 0 nvmlDev 0 "
                f"busId 1b000 commId {comm} - Init COMPLETE\n")
    _write(tmp_path, {
        "jobA/rank0.log": "NCCL version 2.18.1+cuda12.1\n" + init("gpu-1", 100, 0, 8, "0xaaaa"),
        "jobA/rank1.log": init("gpu-1", 101, 1, 8, "0xaaaa") + f"[rank1]: {OOM}\n",
        "old/rank0.log": init("gpu-1", 200, 0, 4, "0xbbbb") + "step 5 loss 0.2\n",
        "old/rank1.log": init("gpu-1", 201, 1, 4, "0xbbbb") + "step 5 loss 0.2\n",
    })
    a = _analyze(tmp_path)
    jobs = _jobs(a)
    assert jobs["count"] == 2, jobs
    assert _job_of(a, "jobA/rank0.log") == _job_of(a, "jobA/rank1.log") != _job_of(a, "old/rank0.log")
    assert _job_of(a, "old/rank0.log") == _job_of(a, "old/rank1.log")
    assert "world size" in jobs["note"]


def test_restarts_of_one_job_are_not_two_jobs(tmp_path):
    run = "logs/cccccccc-3333-4000-8000-000000000000_q1w2e3r4"

    def init(pid, rank, comm):
        return (f"gpu-1:{pid}:{pid + 1} [0] NCCL INFO comm 0x5{rank} rank {rank} nranks 2 cudaDev {rank} "
                f"busId 1b000 commId {comm} - Init COMPLETE\n")
    _write(tmp_path, {
        f"{run}/attempt_0/0/stderr.log": init(10, 0, "0x1111") + WATCHDOG.format(r=0, pid=10) + "\n",
        f"{run}/attempt_0/1/stderr.log": init(11, 1, "0x1111") + f"[rank1]: {OOM}\n",
        f"{run}/attempt_1/0/stderr.log": init(20, 0, "0x2222") + WATCHDOG.format(r=0, pid=20) + "\n",
        f"{run}/attempt_1/1/stderr.log": init(21, 1, "0x2222") + f"[rank1]: {OOM}\n",
    })
    a = _analyze(tmp_path)
    assert _jobs(a)["count"] == 1 and _jobs(a)["note"] is None
    assert set(a.tables.sources["job"]) == {"job1"}
    assert _gap(a, "single job") is None


@pytest.mark.parametrize("bundle", sorted(glob.glob(os.path.join(ROOT, "samples", "*", "logs"))))
def test_real_single_job_samples_are_one_job(bundle):
    a = _analyze(bundle)
    assert _jobs(a)["count"] <= 1, _jobs(a)["note"]
    assert "version_note" not in a.tables.meta


# ------------------------------------------------------------------------------------------------ versions

def test_mixed_nccl_and_pytorch_versions_are_parsed_and_reported(tmp_path):
    _write(tmp_path, {
        # an old node: NCCL 2.10 without commId, pre-2.3 c10 log prefix, torch 1.13
        "rank0.log": """\
            PyTorch version: 1.13.1+cu117
            NCCL version 2.10.3+cuda11.3
            node-old:300:310 [0] NCCL INFO comm 0x7f00 rank 0 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE
            [E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600456 milliseconds before timing out.
            """,
        # a new node: NCCL 2.21 with commId and Init START, torch 2.3 c10 prefix with rank and PG
        "rank1.log": """\
            PyTorch version: 2.3.0+cu121
            node-new:400:410 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
            node-new:400:410 [0] NCCL INFO ncclCommInitRank comm 0x5600 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 3b000 commId 0x9f3e - Init START
            node-new:400:410 [0] NCCL INFO ncclCommInitRank comm 0x5600 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 3b000 commId 0x9f3e - Init COMPLETE
            """ + WATCHDOG.format(r=1, pid=400) + "\n",
    })
    a = _analyze(tmp_path)
    versions = a.tables.meta["versions"]
    assert set(versions["nccl"]) == {"2.10.3", "2.21.5"}
    assert set(versions["torch"]) == {"1.13.1+cu117", "2.3.0+cu121"}
    note = a.tables.meta["version_note"]
    assert "NCCL 2.10.3" in note and "2.21.5" in note and "PyTorch" in note
    # Both dialects parsed: NCCL init rows and watchdog timeouts from each file.
    nccl = a.tables.nccl
    assert set(nccl.loc[nccl["nranks"].notna(), "source"]) == {"rank0.log", "rank1.log"}
    wd = a.tables.events[a.tables.events["kind"] == "watchdog_timeout"]
    assert set(wd["source"]) == {"rank0.log", "rank1.log"} and set(wd["rank"]) == {0, 1}


# ------------------------------------------------------------------------------------------------ clocks

def test_skewed_clocks_between_hosts_are_said_and_estimated(tmp_path):
    # pdsh-style console of two nodes; node-b's clock runs one hour ahead. Node-b really failed first.
    _write(tmp_path, {"console.log": """\
        node-a: [2024-01-02 03:04:05,100] [INFO] step 10 loss 0.5
        node-b: [2024-01-02 04:04:06,000] [INFO] step 10 loss 0.5
        node-a: [2024-01-02 03:04:07,100] [INFO] step 11 loss 0.5
        node-b: [2024-01-02 04:04:08,000] [INFO] step 11 loss 0.5
        node-a: [2024-01-02 03:04:09,100] [INFO] step 12 loss 0.5
        node-b: [2024-01-02 04:04:10,000] [INFO] step 12 loss 0.5
        node-b: [2024-01-02 04:04:11,000] [ERROR] RuntimeError: CUDA error: an illegal memory access was encountered
        node-a: [2024-01-02 03:34:12,000] [ERROR] RuntimeError: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800328 milliseconds before timing out.
        """})
    a = _analyze(tmp_path)
    meta = a.tables.meta
    note = meta["clock_note"]
    assert "2 hosts" in note and "node-a" in note and "node-b" in note
    assert "node-b's clock reads 1.0 h ahead of node-a's" in note
    assert 3590 < meta["clock_offsets_s"]["node-b"] < 3610
    gap = _gap(a, "clocks")
    assert gap and "node-b" in gap["why"]


def test_one_host_needs_no_clock_note(tmp_path):
    _write(tmp_path, {"rank0.log": "[2024-01-02 03:04:05,100] step 1 loss 0.5\n"
                                   f"[2024-01-02 03:04:09,100] {OOM}\n"})
    a = _analyze(tmp_path)
    assert "clock_note" not in a.tables.meta
    assert _gap(a, "clocks") is None

"""How every rank ended, and the culprits that follows from it, on real runs of several launchers (the fault lab,
benchmarks/lab/cases: torchrun with and without tee, --redirects, restarts, mp.spawn, Slurm-style files, JSON lines,
accelerate, the collector). Each test takes every lab case of a mechanism, whatever its launcher, and checks the
mechanism's defect is gone on each; it asks for at least three launchers, so a fix that holds in one shape only
fails here."""
from __future__ import annotations

import json
import os
import re

import pytest

import postmortem

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = os.path.join(ROOT, "benchmarks", "lab", "cases")


def _cases(*mechanisms: str) -> list[tuple[str, dict]]:
    out = []
    if not os.path.isdir(CASES):
        return out
    for name in sorted(os.listdir(CASES)):
        path = os.path.join(CASES, name, "case.json")
        if os.path.isfile(path):
            case = json.load(open(path, encoding="utf-8"))
            if case.get("mechanism") in mechanisms:
                out.append((name, case))
    return out


def _launchers(cases) -> set:
    return {c["launcher"] for _, c in cases}


def _analyze(name: str):
    return postmortem.analyze(os.path.join(CASES, name), quiet=True)


def _ends(a) -> dict:
    return {int(r): (e, d) for r, e, d in zip(a.ranks["rank"], a.ranks["end"], a.ranks["end_detail"])}


SEGFAULT = _cases("segfault-ctypes")
ALLOC = _cases("torch-alloc-fail", "numpy-memory-error")
UNEVEN = _cases("uneven-shards")
HANDLED = _cases("max-steps", "oom-probe-recover", "loss-scale-recovers", "store-retry-clean")
EXITED_WHILE_WAITING = _cases("rank0-only-barrier", "early-stop-unsynced")


def test_the_lab_covers_each_defect_in_three_launchers():
    for cases in (SEGFAULT, ALLOC, UNEVEN, HANDLED):
        assert len(_launchers(cases)) >= 3, [n for n, _ in cases]


@pytest.mark.parametrize("name,case", SEGFAULT, ids=[n for n, _ in SEGFAULT])
def test_a_fatal_signal_is_the_culprits_end_and_its_crash(name, case):
    """Defect 2: faulthandler's `Fatal Python error: Segmentation fault` and torchrun's `exitcode: -11` make the rank's
    end a fatal signal (not an error that hides it), and that rank is the crash's culprit."""
    a = _analyze(name)
    culprit = case["expect"]["culprit_ranks"][0]
    end, detail = _ends(a)[culprit]
    assert end == "fatal_signal" and "SIGSEGV" in detail, (end, detail)
    assert a.verdict.category == "rank_crash" and a.verdict.culprit_ranks == [culprit]


@pytest.mark.parametrize("name,case", ALLOC, ids=[n for n, _ in ALLOC])
def test_memory_refused_inside_the_process_is_host_memory_on_its_rank(name, case):
    """Defect 4: a MemoryError / `DefaultCPUAllocator: can't allocate memory` is host memory refused inside the
    process (not the kernel's OOM killer), and the rank of the line is the culprit."""
    a = _analyze(name)
    culprit = case["expect"]["culprit_ranks"]
    assert a.verdict.category == "host_oom" and a.verdict.culprit_ranks == culprit
    assert "SIGKILL" not in a.verdict.summary and "OOM killer" not in a.verdict.summary


# Lab cases this test fails on today, with the cause (strict: one that starts passing must be taken off the list)
_KNOWN_GAPS: dict[str, str] = {}  # (Ray Train's truncated error snippets: read as each listed rank's ending since)


def _with_gaps(cases):
    return [pytest.param(n, c, id=n, marks=pytest.mark.xfail(strict=True, reason=_KNOWN_GAPS[n]))
            if n in _KNOWN_GAPS else pytest.param(n, c, id=n) for n, c in cases]


@pytest.mark.parametrize("name,case", _with_gaps(UNEVEN))
def test_ranks_in_ddp_backward_wait_in_its_all_reduce(name, case):
    """Defect 5: a rank whose stack ends in autograd's backward while the others wait in collectives (or that reported
    the timeout itself) waits in DDP's gradient all-reduce; the rank at the other call site is the culprit."""
    a = _analyze(name)
    culprit = case["expect"]["culprit_ranks"]
    others = [r for r in range(case["world_size"]) if r not in culprit]
    ranks = a.ranks.set_index("rank")
    for r in others:
        assert ranks.loc[r, "end"] in ("waiting", "lost_peer") or ranks.loc[r, "stack_class"] == "collective_wait", r
    assert a.verdict.category == "barrier_skew" and a.verdict.culprit_ranks == culprit


@pytest.mark.parametrize("name,case", HANDLED, ids=[n for n, _ in HANDLED])
def test_handled_exceptions_in_a_run_that_finished_are_no_failure(name, case):
    """Handled versus fatal: tracebacks logged and skipped, allocation probes that retry smaller, loss-scale skips
    that recover, in runs that then end normally, are never the verdict."""
    a = _analyze(name)
    assert a.verdict.category == "no_failure", (a.verdict.category, a.verdict.summary)


@pytest.mark.parametrize("name,case", EXITED_WHILE_WAITING, ids=[n for n, _ in EXITED_WHILE_WAITING])
def test_a_rank_alone_in_a_collective_after_the_others_left(name, case):
    """Defect 3: ranks that exit 0 have an end too (absent from torchrun's failure list, an end line, exit 0); the
    one left in a collective, or the one that left first, is told apart from its peers."""
    a = _analyze(name)
    assert a.verdict.culprit_ranks == case["expect"]["culprit_ranks"]
    assert a.verdict.category in case["expect"]["categories"]


# ---- Defect 1: any exception class closes a traceback (tested on every lab case that printed one)

_ODD_CLASS = re.compile(r"^(?:\[[^\]]*\]:?\s*)*(?P<type>(?:[\w]+\.)*(?:_\w+|StopIteration|Empty))(?::|$)", re.M)


def _odd_class_cases():
    out = []
    for name, case in _cases(*{c["mechanism"] for _, c in _all()}):
        for dirpath, _, files in os.walk(os.path.join(CASES, name)):
            for f in files:
                if f.endswith((".log", ".out", ".err", ".jsonl")):
                    text = open(os.path.join(dirpath, f), encoding="utf-8", errors="replace").read()
                    m = _ODD_CLASS.search(text)
                    if m and "Traceback (most recent call last)" in text:
                        out.append((name, case, m.group("type")))
                        break
            else:
                continue
            break
    return out


def _all():
    return _cases(*{json.load(open(os.path.join(CASES, n, "case.json")))["mechanism"]
                    for n in os.listdir(CASES) if os.path.isfile(os.path.join(CASES, n, "case.json"))}) \
        if os.path.isdir(CASES) else []


ODD = _odd_class_cases()


@pytest.mark.parametrize("name,case,exc", ODD, ids=[n for n, _, _ in ODD])
def test_an_exception_class_without_capital_or_error_suffix_closes_its_traceback(name, case, exc):
    """Defect 1: `numpy._core._exceptions._ArrayMemoryError`, `StopIteration`, `queue.Empty` end the traceback as
    that exception (not `<truncated>`), so the rank has its error."""
    a = _analyze(name)
    types = set(a.tables.tracebacks["exc_type"])
    assert any(t.endswith(exc.rsplit(".", 1)[-1]) for t in types), (exc, types)


SAMPLES = os.path.join(ROOT, "samples")


def test_a_watchdog_abort_after_a_timeout_is_the_wait_not_a_crash():
    """A user's real 8-rank log (samples/sampling_oom_step2000): rank 3 runs out of GPU memory; the other seven time
    out in all_reduce, and ProcessGroupNCCL's watchdog aborts them (torchrun: exitcode -6, SIGABRT). Their SIGABRT
    is the wait's end: they are waiting (consequence), rank 3 alone ended on its own."""
    a = postmortem.analyze(os.path.join(SAMPLES, "sampling_oom_step2000", "logs"), quiet=True)
    ends = dict(zip(a.ranks["rank"], a.ranks["end"]))
    assert ends[3] == "exception"
    assert {ends[r] for r in ends if r != 3} == {"waiting"}
    c = a.tables.meta["culprits"]
    assert (c.ranks, c.mechanism) == ([3], "root-failure")
    # the findings about the waits follow from rank 3's failure, none names the bystanders
    assert all(f.cascade_of or f is a.finding_list[0] for f in a.finding_list)
    assert all(set(f.culprit_ranks) <= {3} for f in a.finding_list)


def test_the_ranks_table_says_which_ranks_the_verdict_names():
    """verdict_role: culprit for the verdict's ranks, affected for those that ended as its consequence, null in a
    run that did not fail (real runs: samples/uneven_batches_barrier, samples/clean_run)."""
    a = postmortem.analyze(os.path.join(SAMPLES, "uneven_batches_barrier", "logs"), quiet=True)
    roles = dict(zip(a.ranks["rank"], a.ranks["verdict_role"]))
    assert roles == {0: "culprit", 1: "affected", 2: "affected", 3: "affected"}
    clean = postmortem.analyze(os.path.join(SAMPLES, "clean_run", "logs"), quiet=True)
    assert clean.verdict.category == "no_failure" and clean.ranks["verdict_role"].isna().all()


THREAD_DIED = _cases("queue-dead-producer")


@pytest.mark.parametrize("name,case", THREAD_DIED, ids=[n for n, _ in THREAD_DIED])
def test_an_exception_in_a_thread_ends_the_thread_not_the_rank(name, case):
    """A prefetch thread dies of an exception (threading.excepthook prints it; the outermost frame is threading's
    _bootstrap_inner), the main thread waits on its queue forever: the rank did not end by the exception, it hangs,
    and it is the one the others wait for (real runs of four launchers)."""
    assert len(THREAD_DIED) >= 3
    a = _analyze(name)
    culprit = case["expect"]["culprit_ranks"]
    ranks = a.ranks.set_index("rank")
    assert all(ranks.loc[r, "end"] != "exception" for r in culprit)
    assert a.verdict.culprit_ranks == culprit and a.verdict.category in case["expect"]["categories"]

"""The message catalog (postmortem/catalog): families against the source strings they were built from (the saved
extract, offline), against real lines of the corpus, captured outputs and real runs, and the exception taxonomy."""
from __future__ import annotations

import gzip
import json
import os
import re
from functools import lru_cache
from pathlib import Path

import pytest

from postmortem import catalog
from postmortem.catalog import assemble, curated
from postmortem.catalog.extract import PLACEHOLDER_RE

ROOT = Path(__file__).resolve().parent.parent
EXTRACT = ROOT / "tests" / "catalog_data" / "extract.jsonl.gz"
SHARED = Path("/work/shared")
CATEGORIES = {"gpu_oom", "host_oom", "dataloader_failure", "barrier_skew", "straggler", "logging_blocking",
              "checkpoint_corruption", "nccl_error", "gpu_hardware", "nan_inf", "ddp_usage_error", "rank_crash",
              "collective_timeout", "no_failure", "unknown"}
# Pairs (family, other) where other's pattern also matches family's source strings on purpose; catalog order
# decides which one family_of returns (the first listed in curated.FAMILIES).
INTENDED_OVERLAPS = {
    ("checkpoint-path-missing", "resume-checkpoint-missing-warning"),   # DS's warning names a checkpoint path
    ("resume-checkpoint-missing-warning", "checkpoint-path-missing"),
    ("cuda-out-of-memory", "nccl-cuda-failure"),        # NCCL's "Cuda failure 'out of memory'"
    ("dataloader-worker-bus-error", "shm-exhausted"),   # the worker's bus error names insufficient shm
    ("gloo-enforce-fail", "gloo-size-mismatch"), ("gloo-size-mismatch", "gloo-enforce-fail"),
    ("loss-scale-overflow-note", "loss-scale-overflow-skip"),
    ("nccl-net-socket-error", "peer-connection-closed"), ("peer-connection-closed", "nccl-net-socket-error"),
    ("gloo-connect-failed", "connection-refused"),
}


@lru_cache(maxsize=1)
def saved() -> tuple[list[dict], list[dict]]:
    msgs, classes = [], []
    with gzip.open(EXTRACT, "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            (classes if r.get("class") else msgs).append(r)
    return msgs, classes


def family_sources(f: dict) -> list[tuple[str, str | None, dict]]:
    """(template, sample value, record) of every source string a curated family was built from."""
    msgs, _ = saved()
    out = [(r["text"], v, r) for r, v in assemble.select(msgs, f["evidence"])]
    joins = {(r["lib"], r["text"]): r for r in msgs if r["kind"] == "join"}
    for j in f["joins"]:
        t = assemble.join_template(j[1])
        out.append((t, j[2] if len(j) > 2 else None, joins.get((j[0], t), {"versions": [], "lib": j[0]})))
    return out


def test_families_json_is_built_from_curated():
    data = json.loads((ROOT / "postmortem" / "catalog" / "families.json").read_text())
    built = [(f["id"], f["pattern"], f["category"], f["role"], f["implies"], f["needs"]) for f in data["families"]]
    src = [(f["id"], f["pattern"], f["category"], f["role"], f["implies"], f["needs"]) for f in curated.FAMILIES]
    assert built == src, "families.json is stale: re-run `python -m postmortem.catalog.build assemble` (README)"


def test_family_metadata_is_valid():
    ids = [f.id for f in catalog.families()]
    assert len(ids) == len(set(ids))
    for f in catalog.families():
        assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", f.id), f.id
        assert f.category in CATEGORIES, (f.id, f.category)
        assert f.role in catalog.ROLES, (f.id, f.role)
        assert f.implies and set(f.implies) <= set(catalog.IMPLIES), (f.id, f.implies)
        assert f.description and len(f.description) > 30
        assert f.needs and all(re.fullmatch(r"[a-z0-9_]+", w) for w in f.needs), (f.id, f.needs)


@pytest.mark.parametrize("fam", curated.FAMILIES, ids=lambda f: f["id"])
def test_family_matches_every_source_string_it_came_from(fam):
    rx = assemble.compile_family(fam)
    sources = family_sources(fam)
    if not fam["external"]:
        assert sources or assemble.select(saved()[0], fam["parts"]), f"{fam['id']} has no source strings"
    for text, value, rec in sources:
        assert assemble.matches(rx, text, value), f"{fam['id']} misses {rec.get('lib')}: {text[:200]!r}"
    for lib, j, *_ in fam["joins"]:
        t = assemble.join_template(j)
        rec = next(r for r in saved()[0] if r["kind"] == "join" and r["lib"] == lib and r["text"] == t)
        assert rec["versions"], f"{fam['id']}: join {j!r} was found in no release of {lib}"


@pytest.mark.parametrize("fam", [f for f in curated.FAMILIES if f["parts"]], ids=lambda f: f["id"])
def test_cxx_fragments_are_parts_of_a_join_or_match(fam):
    """C++ keeps a message's literal pieces apart; each piece the family claims is inside an assembled join (or the
    pattern matches the piece by itself)."""
    msgs, _ = saved()
    rx = assemble.compile_family(fam)
    joins = [assemble.fill(assemble.join_template(j[1]), "word") for j in fam["joins"]]
    parts = assemble.select(msgs, fam["parts"])
    assert parts, f"{fam['id']}: no fragment found"
    for r, _v in parts:
        lit = PLACEHOLDER_RE.sub("", r["text"]).strip()
        assert any(lit in j for j in joins) or assemble.matches(rx, r["text"]), (fam["id"], r["text"])


def test_every_source_string_resolves_to_its_family_or_an_intended_overlap():
    for fam in curated.FAMILIES:
        for text, value, _rec in family_sources(fam):
            got = None
            for t in assemble.fills(text, value):
                got = catalog.family_of(t)
                if got is not None and got.id == fam["id"]:
                    break
            assert got is not None, (fam["id"], text[:160])
            assert got.id == fam["id"] or (fam["id"], got.id) in INTENDED_OVERLAPS, (fam["id"], got.id, text[:160])


def test_no_family_matches_another_roles_strings_unless_intended():
    rx = {f["id"]: assemble.compile_family(f) for f in curated.FAMILIES}
    role = {f["id"]: f["role"] for f in curated.FAMILIES}
    for fam in curated.FAMILIES:
        for text, value, _rec in family_sources(fam):
            filled = assemble.fills(text, value)
            for other, orx in rx.items():
                if other == fam["id"] or role[other] == fam["role"]:
                    continue
                if any(orx.search(t) for t in filled):
                    assert (fam["id"], other) in INTENDED_OVERLAPS, (fam["id"], other, text[:160])


def test_sampled_strings_no_family_was_built_for_stay_unmatched():
    """The saved extract's sample of uncovered library strings (negative material): no family matches them."""
    msgs, _ = saved()
    rest = [r for r in msgs if not r.get("family") and r["kind"] != "join"]
    assert len(rest) > 1000
    for r in rest:
        assert catalog.family_of(assemble.fill(r["text"], "neutral")) is None, r["text"][:200]


def test_needs_are_in_every_line_a_pattern_matches():
    """family_of looks only at families whose needed words occur: every string a pattern matches contains one."""
    msgs, _ = saved()
    words = re.compile(r"[a-z0-9_]+")
    lines = [assemble.fill(r["text"], s) for r in msgs for s in ("smart", "neutral")]
    lines += [line for case in _corpus_lines() for line in case]
    for fam in catalog.families():
        need = set(fam.needs)
        for line in lines:
            if fam.regex.search(line[:catalog.MAX_LINE]):
                assert need & set(words.findall(line.lower())), (fam.id, line[:200])


def test_hyperscan_and_token_prefilters_agree():
    """The two ways of finding candidate families give the same first match on every line."""
    from postmortem.catalog import _candidates, _hyperscan
    if _hyperscan() is None:
        pytest.skip("hyperscan not installed")
    msgs, _ = saved()
    lines = [assemble.fill(r["text"], "smart") for r in msgs] + [x for c in _corpus_lines() for x in c]
    fams = catalog.families()

    def first(line, fast):
        return next((fams[i].id for i in _candidates(line, fast) if fams[i].regex.search(line)), None)
    for line in lines:
        line = line[:catalog.MAX_LINE]
        assert first(line, True) == first(line, False), line[:200]


def test_families_cover_the_why_list():
    ids = {f.id for f in catalog.families()}
    for fid in ("checkpoint-path-missing", "hf-cant-load-pretrained", "torch-load-corrupt-archive",
                "store-based-barrier-wait", "store-based-barrier-timeout", "store-wait-timeout",
                "nccl-watchdog-frames", "tcpstore-address-in-use", "monitored-barrier-rank-failed",
                "collective-fingerprint-mismatch", "python-memory-error", "cpu-allocator-refused", "std-bad-alloc",
                "kernel-oom-killer", "ray-memory-monitor-kill", "slurm-oom-kill", "process-killed-signal",
                "loss-scale-overflow-skip", "loss-scale-at-minimum", "loss-scale-change", "cuda-oom-retry",
                "tcpstore-client-connect-retry", "resume-checkpoint-missing-warning"):
        assert fid in ids, fid
    cons = {f.id for f in catalog.consequence_families()}
    assert {"nccl-watchdog-timeout", "peer-connection-closed", "elastic-sigterm-workers", "elastic-child-failed",
            "store-wait-timeout", "gloo-timeout"} <= cons
    assert catalog.family("cuda-oom-retry").role == "benign"


# ------------------------------------------------------------------------------------------- real lines

def _text_files(d: Path):
    for p in sorted(d.rglob("*")):
        if p.is_file() and p.suffix not in (".json", ".py", ".png", ".gz") and p.stat().st_size < 32 << 20:
            yield p


@lru_cache(maxsize=1)
def _corpus_lines() -> tuple[tuple[str, ...], ...]:
    out = []
    for base in ("corpus", "realruns", "captured"):
        d = SHARED / base
        if not d.is_dir():
            continue
        for p in _text_files(d):
            out.append(tuple(p.read_text(errors="replace").splitlines()))
    return tuple(out)


needs_shared = pytest.mark.skipif(not (SHARED / "corpus").is_dir(), reason="needs /work/shared (the real corpus)")


def _first_line(path: Path, needle: str) -> str:
    for line in path.read_text(errors="replace").splitlines():
        if needle in line:
            return line
    raise AssertionError(f"{needle!r} not in {path}")


REAL = [  # (file under /work/shared, a literal of the line, expected family)
    ("captured/torchrun_gloo_timeout.txt", "Timed out waiting", "gloo-timeout"),
    ("captured/torchrun_gloo_peer_closed.txt", "Connection closed by peer", "peer-connection-closed"),
    ("captured/torch_cpu_alloc_fail.txt", "DefaultCPUAllocator", "cpu-allocator-refused"),
    ("captured/torch_load_truncated_checkpoint.txt", "PytorchStreamReader", "torch-load-corrupt-archive"),
    ("captured/torchrun_distributed_debug_detail_mismatch.txt", "Detected mismatch", "collective-fingerprint-mismatch"),
    ("captured/dataloader_worker_killed.txt", "is killed by signal", "dataloader-worker-killed"),
    ("captured/dataloader_worker_killed.txt", "Unexpected bus error", "dataloader-worker-bus-error"),
    ("captured/torchrun_sigkill.txt", "exitcode: -9", "elastic-child-failed"),
    ("captured/torchrun_gloo_timeout.txt", "closing signal SIGTERM", "elastic-sigterm-workers"),
    ("captured/torchrun_hang_sigterm_loglevel_info.txt", "death signal", "elastic-signal-received"),
    ("captured/torchrun_max_restarts1_console.txt", "willRetry=1", "gloo-connect-retry"),
    ("captured/torchrun_max_restarts1_console.txt", "willRetry=0", "gloo-connect-failed"),
    ("captured/torchrun_max_restarts1_console.txt", "connectFullMesh failed", "gloo-connect-failed"),
    ("realruns/host_oom__memoryerror-rank1-eval-step150-3ranks/console.log", "_ArrayMemoryError:",
     "numpy-array-memory-error"),
    ("realruns/ddp_usage_error__unused-aux-head-2ranks-gloo/console.log", "Expected to have finished",
     "ddp-unfinished-reduction"),
    ("corpus/nan_inf__firefly-ziya13b-8gpu-fp16-loss-scale-minimum/console.log", "already at minimum",
     "loss-scale-at-minimum"),
    ("corpus/no_failure__cogvideox-deepspeed-fp16-loss-scale-calibration-overflow/console.log", "OVERFLOW!",
     "loss-scale-overflow-skip"),
    ("corpus/nan_inf__swin-benign-dynamic-loss-scale-overflow/console.log", "Gradient overflow",
     "loss-scale-overflow-skip"),
    ("corpus/logging_blocking__open-llama-wandb-init-rank0-store-barrier-7-of-8/console.log",
     "Waiting in store based barrier", "store-based-barrier-wait"),
    ("corpus/collective_timeout__chatglm-tuning-tokenizer-barrier-store-timeout/console.log", "ncclUniqueId",
     "store-wait-timeout"),
    ("corpus/checkpoint_corruption__fms-hf-tuning-restart-picks-incomplete-checkpoint/console.log",
     "No such file or directory", "checkpoint-path-missing"),
    ("corpus/checkpoint_race__apex-ddp-multiple-ranks-write-same-checkpoint/console.log", "storage has wrong size",
     "torch-load-corrupt-archive"),
    ("corpus/checkpoint_race__dddd-trainer-disk-full-truncated-checkpoint-resume/run1_save_crash.log",
     "No space left", "disk-full"),
    ("corpus/host_oom__qwen-vl-finetune-oom-killer-after-checkpoint-save/dmesg.txt", "Out of memory: Killed",
     "kernel-oom-killer"),
    ("corpus/host_oom__tranx-dmesg-global-oom-python3/dmesg.txt", "oom-kill:constraint", "kernel-oom-killer"),
    ("corpus/host_oom__hedwig-word2vec-load-killed/console.log", "Killed", "process-killed-signal"),
    ("corpus/gpu_hardware__jade-hpc-node-dgk713-uncorrectable-ecc/console.log", "uncorrectable ECC",
     "cuda-ecc-error"),
    ("corpus/straggler__particleflow-rank0-end-of-epoch-predictions/console_part2_watchdog_frames.log",
     "checkTimeout", "nccl-watchdog-frames"),
    ("corpus/nccl_error__roce-ib-completion-error-12-gid-index/error_line_from_title.txt", "Got completion",
     "nccl-net-ib-completion-error"),
    ("corpus/nccl_error__docker-default-64mb-dev-shm-posix-fallocate/nccl_debug.log", "posix_fallocate",
     "nccl-shm-failure"),
    ("corpus/gpu_oom_periodic__nonlocal-test-volatile-pytorch04/console.log", "out of memory", "cuda-out-of-memory"),
    ("corpus/no_failure__pytorchocr-7gpu-ddp-find-unused-parameters-warning/console.log", "find_unused_parameters",
     "ddp-find-unused-no-unused"),
]


@needs_shared
@pytest.mark.parametrize("rel,needle,expected", REAL, ids=[f"{e}:{r.split('/')[1][:40]}" for r, _, e in REAL])
def test_real_lines(rel, needle, expected):
    line = _first_line(SHARED / rel, needle)
    got = catalog.family_of(line)
    assert got is not None and got.id == expected, (got and got.id, line[:200])


@needs_shared
def test_clean_runs_print_no_root_or_consequence_line():
    """Captured healthy runs (HF Trainer, Lightning, single process) match no failure family."""
    for p in _text_files(SHARED / "captured"):
        if not p.name.startswith(("hf_trainer_", "lightning_")):
            continue
        for line in p.read_text(errors="replace").splitlines():
            f = catalog.family_of(line)
            assert f is None or f.role == "benign", (p.name, f.id, line[:200])


def test_negative_lines():
    for line in ["", "Epoch 3: 100%|##########| 50/50 [00:03<00:00, loss=0.412]",
                 "NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>", "Saving checkpoint to /ckpt/checkpoint-500",
                 "Loading checkpoint shards: 100%|#####| 4/4", "{'loss': 0.51, 'learning_rate': 1e-05, 'epoch': 0.3}",
                 "[INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, lr=[1e-05], mom=[(0.9, 0.95)]",
                 "wandb: Run summary:", "torch.distributed.init_process_group(backend='nccl')"]:
        assert catalog.family_of(line) is None, line


# ------------------------------------------------------------------------------------------- exception lines

def test_exception_line_reads_any_class_name():
    cases = {
        "StopIteration": ("StopIteration", None),
        "queue.Empty": ("queue.Empty", None),
        "_queue.Empty": ("_queue.Empty", None),
        "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 3.00 GiB for an array with shape (1,) and "
        "data type float64": ("numpy.core._exceptions._ArrayMemoryError", "Unable to allocate 3.00 GiB for an array "
                                                                          "with shape (1,) and data type float64"),
        "torch.OutOfMemoryError: CUDA out of memory.": ("torch.OutOfMemoryError", "CUDA out of memory."),
        "torch.distributed.DistBackendError: NCCL error": ("torch.distributed.DistBackendError", "NCCL error"),
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ":
            ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError", ""),
        "zipfile.BadZipFile: File is not a zip file": ("zipfile.BadZipFile", "File is not a zip file"),
        "KeyboardInterrupt": ("KeyboardInterrupt", None),
        "socket.timeout: timed out": ("socket.timeout", "timed out"),
        "MemoryError": ("MemoryError", None),
        "Exception: Current loss scale already at minimum": ("Exception", "Current loss scale already at minimum"),
        "SystemExit: 1": ("SystemExit", "1"),
        "RuntimeError:": ("RuntimeError", None),
    }
    for line, want in cases.items():
        got = catalog.exception_line(line)
        assert got is not None, line
        assert got[0] == want[0] and (got[1] or None) == (want[1] or None), (line, got)


def test_exception_line_rejects_other_lines():
    for line in ['  File "/x/train.py", line 3, in <module>', "    raise KeyError('x')", "Traceback (most recent "
                 "call last):", "Epoch 1: loss 0.3", "loss: 0.5", "INFO: starting", "Note: something", "Killed",
                 "During handling of the above exception, another exception occurred:", "hello world",
                 "warning: unused", "    ^^^^^^^^^^"]:
        assert catalog.exception_line(line) is None, line


@needs_shared
def test_exception_line_finds_every_exception_the_current_parser_finds():
    """A superset of postmortem.parsers.textlog.EXC_RE on the real tracebacks (the line after the last frame)."""
    from postmortem.parsers.prefixes import strip_prefixes
    from postmortem.parsers.textlog import EXC_RE
    seen = extra = 0
    for lines in _corpus_lines():
        after_frame = False
        for raw in lines:
            line = strip_prefixes(raw)[0]
            if re.match(r'\s*File "', line):
                after_frame = True
                continue
            if after_frame and line and not line[0].isspace():
                old = EXC_RE.match(line)
                new = catalog.exception_line(line)
                if old and not old.group("type").endswith("Warning"):
                    seen += 1
                    assert new is not None and new[0] == old.group("type"), line
                elif new:
                    extra += 1
                after_frame = False
    assert seen > 50


# ------------------------------------------------------------------------------------------- taxonomy

def test_memory_error_subclasses_come_from_the_sources():
    assert "_ArrayMemoryError" in catalog.memory_error_subclasses()
    assert "MemoryError" in catalog.ancestors("numpy._core._exceptions._ArrayMemoryError")
    assert "RuntimeError" in catalog.ancestors("torch.distributed.DistStoreError")
    assert "RuntimeError" in catalog.ancestors("torch.OutOfMemoryError")   # torch's is no MemoryError


TAXONOMY = [  # (type, message, frames (innermost first), category, role, implies)
    ("MemoryError", "", [], "host_oom", "root", "memory_refused"),
    ("numpy._core._exceptions._ArrayMemoryError",
     "Unable to allocate 10.0 TiB for an array with shape (32, 335544320, 256) and data type float32", [],
     "host_oom", "root", "memory_refused"),
    ("_ArrayMemoryError", "", [], "host_oom", "root", "memory_refused"),
    ("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB", [], "gpu_oom", "root",
     "memory_refused"),
    ("torch.cuda.OutOfMemoryError", "", [], "gpu_oom", "root", "memory_refused"),
    ("ray.exceptions.OutOfMemoryError", "Task was killed due to the node running low on memory.", [], "host_oom",
     "root", "killed_from_outside"),
    ("RuntimeError", "DefaultCPUAllocator: can't allocate memory: you tried to allocate 1099511627776 bytes. "
                     "Error code 12 (Cannot allocate memory)", [], "host_oom", "root", "memory_refused"),
    ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError", "", [], "rank_crash", "consequence",
     "launcher_summary"),
    ("torch.distributed.elastic.multiprocessing.api.SignalException", "Process 4 got signal: 15", [], "rank_crash",
     "consequence", "launcher_terminated"),
    ("torch.distributed.DistStoreError", "Timed out after 901 seconds waiting for clients. 1/2 clients joined.", [],
     "collective_timeout", "consequence", "store_wait"),
    ("torch.distributed.DistNetworkError", "Connection reset by peer", [], "nccl_error", "consequence", "peer_gone"),
    ("ConnectionResetError", "[Errno 104] Connection reset by peer", [], "nccl_error", "consequence", "peer_gone"),
    ("RuntimeError", "[../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
                     "[127.0.0.1]:2887", [], "nccl_error", "consequence", "peer_gone"),
    ("torch.distributed.DistBackendError", "NCCL error in: ProcessGroupNCCL.cpp:1691, invalid usage", [],
     "nccl_error", "root", "crashed"),
    ("KeyError", "'input_ids'", [{"file": "/home/u/train.py"},
                                {"file": "/v/site-packages/torch/utils/data/_utils/fetch.py"}],
     "rank_crash", "root", "crashed"),
    ("queue.Empty", None, [{"file": "/usr/lib/python3.11/queue.py"},
                           {"file": "/v/site-packages/torch/utils/data/dataloader.py"}, {"file": "/h/train.py"}],
     "dataloader_failure", "root", "data_loading_failed"),
    ("EOFError", "", [{"file": "/usr/lib/python3.11/pickle.py"},
                      {"file": "/v/site-packages/torch/serialization.py"}, {"file": "/h/train.py"}],
     "checkpoint_corruption", "root", "checkpoint_io_failed"),
    ("_pickle.UnpicklingError", "invalid load key, '\\x00'.", [], "checkpoint_corruption", "root",
     "checkpoint_io_failed"),
    ("RuntimeError", "Expected to have finished reduction in the prior iteration before starting a new one.", [],
     "ddp_usage_error", "root", "ddp_misuse"),
    ("RuntimeError", "some new message", [{"file": "/v/site-packages/torch/nn/parallel/distributed.py"},
                                          {"file": "/h/train.py"}], "ddp_usage_error", "root", "ddp_misuse"),
    ("requests.exceptions.ConnectionError", "HTTPSConnectionPool(host='api.wandb.ai')",
     [{"file": "/v/site-packages/requests/adapters.py"}, {"file": "/v/site-packages/wandb/sdk/internal/x.py"},
      {"file": "/h/train.py"}], "logging_blocking", "root", "crashed"),
    ("requests.exceptions.ConnectionError", "HTTPSConnectionPool(host='huggingface.co')",
     [{"file": "/v/site-packages/requests/adapters.py"}, {"file": "/v/site-packages/huggingface_hub/x.py"},
      {"file": "/h/train.py"}], "rank_crash", "root", "crashed"),
    ("Exception", "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.", [],
     "nan_inf", "root", "numeric_failure"),
    ("FloatingPointError", "Minimum loss scale reached (0.0001).", [], "nan_inf", "root", "numeric_failure"),
    ("KeyboardInterrupt", None, [], "rank_crash", "consequence", "launcher_terminated"),
    ("StopIteration", None, [{"file": "/h/train.py"}], "rank_crash", "root", "crashed"),
    ("SystemExit", "0", [], "no_failure", "benign", "handled"),
    ("ValueError", "bad value", [], "rank_crash", "root", "crashed"),
    ("FileNotFoundError", "[Errno 2] No such file or directory: '/out/checkpoint-25/trainer_state.json'", [],
     "checkpoint_corruption", "root", "checkpoint_io_failed"),
]


@pytest.mark.parametrize("etype,msg,frames,cat,role,implies", TAXONOMY,
                         ids=[f"{t[0].split('.')[-1]}-{i}" for i, t in enumerate(TAXONOMY)])
def test_classify_exception(etype, msg, frames, cat, role, implies):
    info = catalog.classify_exception(etype, msg, frames)
    assert (info.category, info.role) == (cat, role), info
    assert implies in info.implies, info
    assert info.reason


@needs_shared
def test_classify_real_tracebacks():
    """Every exception line of the real runs gets a category; the known ones the expected class."""
    import collections
    got = collections.Counter()
    for lines in _corpus_lines():
        for line in lines:
            text = re.sub(r"^(?:\[default\d+\]:)?(?:\[rank\d+\]:\s?)?", "", line)
            e = catalog.exception_line(text)
            if e and (e[1] or e[0].endswith(("Error", "Exception", "Interrupt", "Exit", "Iteration"))):
                info = catalog.classify_exception(e[0], e[1], [])
                assert info.category in CATEGORIES and info.role in catalog.ROLES
                got[(e[0].split(".")[-1], info.category, info.role)] += 1
    assert got[("ChildFailedError", "rank_crash", "consequence")] > 0
    assert got[("_ArrayMemoryError", "host_oom", "root")] > 0
    assert got[("KeyError", "rank_crash", "root")] > 0
    assert any(k[1:] == ("nccl_error", "consequence") for k in got)


def test_family_of_cost_is_small():
    """family_of costs a few microseconds a line (README, benchmarks/catalog_family_of.py); relative to running
    every pattern on the same lines in the same process (load-independent), it must stay several times cheaper."""
    import time
    msgs, _ = saved()
    lines = [assemble.fill(r["text"], "smart") for r in msgs][:2000]
    lines += ["Epoch 3: 100%|##########| 50/50 [00:03<00:00, it/s, loss=0.412, lr=1e-4, grad_norm=0.93]"] * 2000
    fams = catalog.families()
    catalog.family_of("warm")

    def run(fn) -> float:
        best = 1e9
        for _ in range(3):
            t = time.perf_counter()
            for line in lines:
                fn(line)
            best = min(best, time.perf_counter() - t)
        return best
    fast = run(catalog.family_of)
    naive = run(lambda line: next((f for f in fams if f.regex.search(line)), None))
    assert fast * 5 < naive, (fast, naive)
    assert fast / len(lines) < 500e-6

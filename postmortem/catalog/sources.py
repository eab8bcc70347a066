"""Where the build reads each library's sources (build time only): which files of a release are in scope, and
readers for a git mirror at a tag, a wheel (zip) and an unpacked torch wheel (Python files plus `strings` dumps)."""
from __future__ import annotations

import gzip
import os
import re
import subprocess
import zipfile
from collections.abc import Iterator

# Files whose messages matter for training failures, per library (paths as they appear in the release).
SCOPE = {
    "torch": re.compile(
        r"^torch/(distributed/|utils/data/|serialization\.py|_utils\.py|storage\.py|_tensor\.py|"
        r"cuda/(memory|__init__|amp/|random|streams)|amp/|nn/parallel/|autograd/(anomaly_mode|__init__|graph)\.py|"
        r"multiprocessing/|_weights_only_unpickler\.py|_C/[^/]*\.pyi$|__init__\.pyi?$|_C/__init__\.pyi$|"
        r"optim/optimizer\.py|nn/modules/module\.py)"),
    "transformers": re.compile(
        r"^transformers/(trainer[^/]*\.py|training_args\.py|modeling_utils\.py|configuration_utils\.py|"
        r"utils/hub\.py|deepspeed\.py|integrations/(deepspeed|integration_utils|fsdp|accelerate)\.py|"
        r"tokenization_utils_base\.py|file_utils\.py|utils/import_utils\.py)$"),
    "numpy": re.compile(r"^numpy/(_core|core)/_exceptions\.py$"),
    "deepspeed": re.compile(
        r"^deepspeed/(runtime/(?!.*(?:kernels|csrc))|launcher/|comm/|checkpoint/|elasticity/|utils/|"
        r"accelerator/|__init__\.py|nebula/)"),
    "lightning": re.compile(
        r"^(?:src/)?(?:pytorch_lightning|lightning/pytorch|lightning/fabric|lightning_fabric)/"
        r"(trainer/|strategies/|plugins/|callbacks/(model_checkpoint|early_stopping)\.py|"
        r"utilities/(distributed|seed|rank_zero|cloud_io|data|exceptions|memory|apply_func|warnings|imports)\.py|"
        r"overrides/|loops/|tuner/|core/(saving|module|lightning)\.py|accelerators/|connector\.py|fabric\.py|"
        r"utilities/(launcher|types|device_parser)\.py|profiler/)"),
    "accelerate": re.compile(
        r"^src/accelerate/(state|checkpointing|accelerator|data_loader|optimizer|scheduler|launchers|"
        r"utils/(operations|other|memory|fsdp_utils|deepspeed|launch|environment|modeling|dataclasses)|"
        r"commands/launch)\.py$"),
    "apex": re.compile(r"^apex/(amp|fp16_utils|optimizers|parallel|transformer/amp|contrib/optimizers)/.*\.py$"),
    "megatron": re.compile(
        r"^megatron/(core/optimizer/|core/dist_checkpointing/(?!.*test)|core/distributed/|"
        r"training/(training|checkpointing|utils|initialize|global_vars)\.py|training\.py|checkpointing\.py|"
        r"optimizer/|fp16/|mpu/|initialize\.py|utils\.py)"),
    "fairseq": re.compile(
        r"^fairseq/(optim/(dynamic_loss_scaler|fp16_optimizer|amp_optimizer)\.py|trainer\.py|checkpoint_utils\.py|"
        r"distributed/|distributed_utils\.py|nan_detector\.py|file_io\.py|utils\.py)"),
    "ray": re.compile(r"^ray/exceptions\.py$"),
    "cpython": re.compile(
        r"^(pickle|zipfile|subprocess|shutil|tempfile)\.py$|^zipfile/__init__\.py$|"
        r"^multiprocessing/(resource_tracker|queues|connection|process|popen_fork)\.py$|"
        r"^concurrent/futures/(process|_base)\.py$"),
    "nccl": re.compile(r"^src/(?!.*(?:test|/ext-))[\w/.-]+\.(?:cc|cu|h|c|cpp)$"),
    "gloo": re.compile(r"^gloo/(?!test|benchmark|examples)[\w/.-]+\.(?:cc|h|cpp)$"),
}
SKIP = re.compile(r"(?:^|/)(?:tests?|testing|benchmarks?|examples?)/|_test\.py$|/test_[^/]*\.py$")
SHARED_LIBS = ("libtorch_cpu.so", "libtorch_cuda.so", "libtorch_cuda_cpp.so", "libtorch_cuda_cu.so", "libc10.so",
               "libc10_cuda.so", "libtorch_python.so")


def in_scope(lib: str, path: str) -> bool:
    """Whether this file of this library is read."""
    return bool(SCOPE[lib].search(path)) and not SKIP.search(path)


def git_files(git_dir: str, rev: str, lib: str) -> Iterator[tuple[str, str]]:
    """(path, text) of the in-scope files of a git mirror at a revision."""
    names = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", rev],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    wanted = [n for n in names if in_scope(lib, n)]
    if not wanted:
        return
    # one cat-file process for all blobs
    proc = subprocess.Popen(["git", "--git-dir", git_dir, "cat-file", "--batch"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    assert proc.stdin and proc.stdout
    for n in wanted:
        proc.stdin.write(f"{rev}:{n}\n".encode())
        proc.stdin.flush()
        header = proc.stdout.readline().split()
        if len(header) < 3:
            continue
        size = int(header[2])
        data = proc.stdout.read(size)
        proc.stdout.read(1)
        yield n, data.decode("utf-8", "replace")
    proc.stdin.close()
    proc.wait()


def wheel_files(path: str, lib: str) -> Iterator[tuple[str, str]]:
    """(path, text) of the in-scope Python files of a wheel."""
    with zipfile.ZipFile(path) as z:
        for n in z.namelist():
            if n.endswith((".py", ".pyi")) and in_scope(lib, n):
                yield n, z.read(n).decode("utf-8", "replace")


def stdlib_files(root: str) -> Iterator[tuple[str, str]]:
    """(path, text) of the in-scope modules of a CPython standard library directory."""
    for d, _dirs, files in os.walk(root):
        if "site-packages" in d or "test" in d:
            continue
        for f in files:
            if f.endswith(".py"):
                full = os.path.join(d, f)
                rel = os.path.relpath(full, root)
                if in_scope("cpython", rel):
                    with open(full, encoding="utf-8", errors="replace") as fh:
                        yield rel, fh.read()


def blob_strings(path: str) -> str:
    """A `strings` dump (gzip) as one text: join pieces are looked up in it."""
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
        return fh.read()


def torch_tree_files(root: str) -> Iterator[tuple[str, str]]:
    """(path, text) of the in-scope Python files of an unpacked torch release (`<root>/py/torch/...`)."""
    base = os.path.join(root, "py")
    for d, _dirs, files in os.walk(base):
        for f in files:
            if f.endswith((".py", ".pyi")):
                full = os.path.join(d, f)
                rel = os.path.relpath(full, base)
                if in_scope("torch", rel):
                    with open(full, encoding="utf-8", errors="replace") as fh:
                        yield rel, fh.read()


def torch_strings(root: str) -> Iterator[tuple[str, list[str]]]:
    """(library name, strings) of the `strings` dumps of an unpacked torch release (`<root>/strings/*.txt.gz`)."""
    d = os.path.join(root, "strings")
    for lib in SHARED_LIBS:
        p = os.path.join(d, lib + ".txt.gz")
        if os.path.exists(p):
            with gzip.open(p, "rt", encoding="utf-8", errors="replace") as fh:
                yield lib, fh.readlines()

"""Where the build reads each library's sources (build time only): which files of a release are read, with which
reader, and readers for a git mirror at a revision, a wheel (zip), a source tarball, an unpacked torch wheel and
`strings` dumps of binaries. The releases themselves are listed in manifest.json."""
from __future__ import annotations

import gzip
import os
import re
import subprocess
import tarfile
import zipfile
from collections.abc import Iterator

_PY = r"\.pyi?$"
_C = r"\.(?:c|cc|cpp|cxx|cu|cuh|h|hpp|hip)$"
# Files read, per library (paths as they appear in the release). Every raised, logged, warned and printed string of
# these files is extracted; tests, benchmarks, examples, docs and vendored third-party code are not read (SKIP).
SCOPE = {
    "torch": re.compile(r"^torch/(?!testing/).*" + _PY),
    "transformers": re.compile(r"^transformers/.*\.py$"),
    "numpy": re.compile(r"^numpy/(_core|core)/_exceptions\.py$"),
    "deepspeed": re.compile(r"^deepspeed/.*\.py$|^(?:csrc|deepspeed/ops/csrc)/.*" + _C),
    "lightning": re.compile(r"^(?:src/)?(?:pytorch_lightning|lightning/pytorch|lightning/fabric|lightning_fabric)/"
                            r".*\.py$"),
    "accelerate": re.compile(r"^src/accelerate/.*\.py$"),
    "apex": re.compile(r"^apex/.*\.py$|^csrc/.*" + _C),
    "megatron": re.compile(r"^megatron/.*\.py$|^[^/]+\.py$"),
    "nemo": re.compile(r"^nemo/.*\.py$"),
    "trl": re.compile(r"^trl/.*\.py$"),
    "torchtune": re.compile(r"^(?:torchtune|recipes)/.*\.py$"),
    "fairseq": re.compile(r"^(?:fairseq|fairseq_cli)/.*\.py$"),
    "ray": re.compile(r"^ray/(?!rllib/|serve/|dashboard/|workflow/|thirdparty_files/|_private/thirdparty/|"
                      r"cloudpickle/).*\.py$"),
    "horovod": re.compile(r"^horovod/.*(?:\.py|\.cc|\.h)$"),
    "wandb": re.compile(r"^wandb/(?!vendor/|proto/).*\.py$"),
    "mlflow": re.compile(r"^mlflow/(?!protos/|server/js/).*\.py$"),
    "tensorboard": re.compile(r"^tensorboard/(?!compat/proto/|.*_pb2\.py$).*\.py$"),
    "ipython": re.compile(r"^IPython/.*\.py$"),
    "cpython": re.compile(
        r"^(pickle|zipfile|subprocess|shutil|tempfile)\.py$|^zipfile/__init__\.py$|"
        r"^multiprocessing/(resource_tracker|queues|connection|process|popen_fork)\.py$|"
        r"^concurrent/futures/(process|_base)\.py$"),
    "nccl": re.compile(r"^src/(?!.*(?:test|/ext-))[\w/.-]+" + _C),
    "rccl": re.compile(r"^src/(?!.*(?:test|/ext-))[\w/.-]+" + _C),
    "gloo": re.compile(r"^gloo/(?!test|benchmark|examples)[\w/.-]+\.(?:cc|h|cpp)$"),
    "hip": re.compile(r"^(?:hipamd/src|hipamd/include|rocclr)/.*" + _C),
    "rocr": re.compile(r"^(?:src|runtime|libhsakmt/src)/.*" + _C),
    "slurm": re.compile(
        r"^src/(?:slurmd/(?:slurmstepd|common|slurmd)|srun|sbatch|salloc|scancel|"
        r"plugins/(?:task|cgroup|jobacct_gather|proctrack|mpi|prep|job_container)|"
        r"common/(?:slurm_errno|env|proc_args)|api/(?:step_launch|step_io|signal|allocate))/?[\w/.-]*\.c$"),
    "openmpi": re.compile(
        r"^(?:orte|ompi|opal|oshmem|src)/.*help-[\w.-]+\.txt$|"
        r"^orte/(?:mca/(?:plm|odls|errmgr|state|ess|rmaps|ras)|tools/orterun|runtime|util)/.*\.c$|"
        r"^ompi/(?:runtime|errhandler|mpi/c/abort\.c)|"
        r"^src/(?:mca/(?:plm|odls|errmgr|state|rmaps|ras|ess)|tools/prte|runtime|util)/.*\.c$"),
    "kubernetes": re.compile(r"^(?:[^/]+/)?pkg/(?:kubelet|controller/(?:job|podgc|nodelifecycle)|"
                             r"scheduler/framework/plugins/defaultpreemption)/(?!.*_test\.go$).*\.go$"),
    "cudart": re.compile(r"^nvidia/cuda_runtime/include/(?:driver_types|cuda_runtime_api)\.h$"),
    "safetensors": re.compile(r"^safetensors/.*\.py$"),
    "kubeflow": re.compile(r"^(?:pkg|cmd)/(?!.*_test\.go$).*\.go$|^sdk/python/(?!.*test).*\.py$"),
}
SKIP = re.compile(r"(?:^|/)(?:tests?|testing|benchmarks?|examples?|docs?|third_party|3rdparty|vendor|_vendor|"
                  r"thirdparty|thirdparty_files)/|"
                  r"_test\.py$|/test_[^/]*\.py$|_test\.(?:cc|cpp|c|go)$")
# Which reader each library's C/C++ goes through (a key of extract_c.CALLS; others: throws/streams/tables only).
C_DIALECT = {"nccl": "nccl", "rccl": "rccl", "hip": "hip", "rocr": "rocr", "slurm": "slurm", "openmpi": "openmpi",
             "horovod": "horovod"}
TORCH_LIBS = ("libtorch_cpu.so", "libtorch_cuda.so", "libtorch_cuda_cpp.so", "libtorch_cuda_cu.so", "libc10.so",
              "libc10_cuda.so", "libtorch_python.so", "libtorch.so")


def in_scope(lib: str, path: str) -> bool:
    """Whether this file of this library is read."""
    rx = SCOPE.get(lib)
    return bool(rx and rx.search(path)) and not SKIP.search(path)


def reader_of(lib: str, path: str) -> str | None:
    """python | c | help | go for a file in scope, else None."""
    if not in_scope(lib, path):
        return None
    if re.search(_PY, path):
        return "python"
    if path.endswith(".go"):
        return "go"
    if re.search(r"help-[\w.-]+\.txt$", path):
        return "help"
    if re.search(_C, path):
        return "c"
    return None


def git_files(git_dir: str, rev: str, lib: str) -> Iterator[tuple[str, str]]:
    """(path, text) of the in-scope files of a git mirror at a revision."""
    names = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", rev],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    wanted = [n for n in names if reader_of(lib, n)]
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
        if len(header) < 3 or header[1] != b"blob":
            continue
        size = int(header[2])
        data = proc.stdout.read(size)
        proc.stdout.read(1)
        yield n, data.decode("utf-8", "replace")
    proc.stdin.close()
    proc.wait()


def wheel_files(path: str, lib: str) -> Iterator[tuple[str, str]]:
    """(path, text) of the in-scope source files of a wheel."""
    with zipfile.ZipFile(path) as z:
        for n in z.namelist():
            if reader_of(lib, n):
                yield n, z.read(n).decode("utf-8", "replace")


def tarball_files(path: str, lib: str) -> Iterator[tuple[str, str]]:
    """(path, text) of the in-scope files of a source tarball (the top directory stripped)."""
    with tarfile.open(path) as tf:
        for m in tf:
            if not m.isfile():
                continue
            rel = m.name.split("/", 1)[-1]
            if reader_of(lib, rel):
                fh = tf.extractfile(m)
                if fh is not None:
                    yield rel, fh.read().decode("utf-8", "replace")


def wheel_binaries(path: str, pattern: str) -> Iterator[tuple[str, bytes]]:
    """(member name, bytes) of the wheel members whose name matches `pattern` (shared libraries, executables)."""
    rx = re.compile(pattern)
    with zipfile.ZipFile(path) as z:
        for n in z.namelist():
            if rx.search(n):
                yield n, z.read(n)


def strings_of(data: bytes, min_len: int = 6) -> list[str]:
    """Printable ASCII runs of a binary, as `strings -n 6` gives them."""
    return [m.group().decode("ascii") for m in re.finditer(rb"[\x20-\x7e\t]{%d,}" % min_len, data)]


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
    for lib in TORCH_LIBS:
        p = os.path.join(d, lib + ".txt.gz")
        if os.path.exists(p):
            with gzip.open(p, "rt", encoding="utf-8", errors="replace") as fh:
                yield lib, fh.readlines()

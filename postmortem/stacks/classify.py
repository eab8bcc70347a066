"""What a stack is doing (collective wait, data loading, logging, checkpoint I/O, compute, ...): one classifier."""
from __future__ import annotations

import re
import sys
from functools import lru_cache

from postmortem.stacks.frames import _ADDR_ONLY, _PY_VERSION_DIR, bare_name, is_native, short_file


# ---------------------------------------------------------------------------------------------------------------
# Classification: what a stack is doing

CLASSES = ("collective_wait", "data_loading", "logging", "checkpoint_io", "compute", "sleep_lock", "idle",
           "unknown")

# (class, tier, file regex on the short file or None, function regex on the bare name or None, native-only)
# Lower tier wins; within the winning tier the innermost frame decides. Tier 0 = a library that names the
# activity; tier 1 = generic plumbing that usually means it (mp queues, stdlib file I/O); 2 = compute;
# 3 = waiting on a lock/sleep; 4 = idle loops.
_RULES: list[tuple[str, int, str | None, str | None, bool]] = [
    # collectives and the c10d store
    ("collective_wait", 0, r"^torch/distributed/(?:distributed_c10d|_functional_collectives|c10d_logger|rendezvous"
                           r"|elastic/utils/store|_symmetric_memory/\w+)\.py$",
     r"^(?!get_|is_|_get|_check|_rank_not_in_group|_warn|_update_default_pg|_as_iterable|_ensure_all_tensors)", False),
    ("collective_wait", 0, r"^deepspeed/comm/|^horovod/|^accelerate/utils/operations\.py$", None, False),
    ("collective_wait", 0, r"^torch/nn/parallel/distributed\.py$",
     r"^(?:_distributed_broadcast_coalesced|_sync_buffers|_sync_module_buffers|_sync_params_and_buffers|"
     r"_default_broadcast_coalesced|_match_all_reduce_for_bwd_pass|_find_common_rank|"
     r"_check_global_requires_backward_grad_sync|_verify_param_shape_across_processes|_sync_params)$", False),
    ("collective_wait", 0, None, r"^(?:barrier|monitored_barrier|_store_based_barrier|wait_for_everyone|"
                                 r"all_reduce|all_gather|all_gather_object|all_gather_into_tensor|reduce_scatter|"
                                 r"reduce_scatter_tensor|all_to_all|all_to_all_single|broadcast_object_list)$", False),
    ("collective_wait", 0, None, r"c10d::|gloo::|^nccl[A-Z]|ProcessGroup(?:NCCL|Gloo|MPI|Wrapper)|TCPStore|"
                                 r"TCPClient|^ibv_poll_cq|^fi_cq_read|^ucp_worker_progress", True),
    # native collective frames without those namespaces: a c10d Work's wait, a collective's own entry point
    ("collective_wait", 0, None, r"\bWork(?:NCCL|Gloo|MPI|UCC|XCCL)?::(?:wait|synchronize)\b|ProcessGroup\w{0,64}::|"
                                 r"(?i:all_?reduce|all_?gather|reduce_?scatter|all_?to_?all)", True),
    # data loading
    ("data_loading", 0, r"^torch/utils/data/|^torch/multiprocessing/(?!spawn\.py$)|^datasets/|^webdataset/|^torchdata/|"
                        r"^ffcv/|^nvidia/dali/|^lightning/pytorch/loops/fetchers\.py$|"
                        r"^pytorch_lightning/loops/fetchers\.py$|^streaming/base/", None, False),
    ("data_loading", 0, None, r"^(?:pin_memory|_pin_memory_loop|_worker_loop)$", False),
    ("data_loading", 1, r"^multiprocessing/(?:queues|connection)\.py$",
     r"^(?:get|_poll|poll|recv|recv_bytes|_recv_bytes|_recv|wait|get_nowait)$", False),
    # logging / progress bars / experiment trackers. A progress bar's iteration wrapper (tqdm's `__iter__`,
    # `tenumerate`, rich's `track`) only hands on the wrapped iterable's items: a thread in it waits in that
    # iterable (the DataLoader, whose frames a cut traceback lost), not in the bar.
    ("logging", 0, r"^(?:tqdm|rich)/", r"^(?!(?:__iter__|__anext__|tenumerate|tzip|tmap|track)$)", False),
    ("logging", 0, r"^(?:wandb|tensorboard|tensorboardX|mlflow|comet_ml|neptune|clearml|aim|swanlab|"
                   r"loguru|sentry_sdk|trackio)/|^torch/utils/tensorboard/|^(?:lightning/pytorch|pytorch_lightning)"
                   r"/loggers/|^transformers/integrations/integration_utils\.py$|^logging/(?:__init__|handlers)\.py$",
     None, False),
    # checkpoint I/O
    ("checkpoint_io", 0, r"^torch/serialization\.py$|^safetensors/|^torch/distributed/checkpoint/|"
                         r"^deepspeed/runtime/checkpoint_engine/|^lightning/fabric/plugins/io/|^orbax/|^h5py/|"
                         r"^numpy/lib/(?:_)?npyio(?:_impl)?\.py$|^fsspec/", None, False),
    ("checkpoint_io", 0, None, r"^_?(?:save|load)_(?:checkpoint|pretrained|model|state_dict|sharded_checkpoint)$|"
                               r"^save_model$|^_save$|^_save_checkpoint$|^_load_from_checkpoint$", False),
    ("checkpoint_io", 1, r"^(?:shutil|tempfile|zipfile|gzip|_pyio|bz2|lzma|tarfile)\.py$|^zipfile/", None, False),
    ("checkpoint_io", 1, None, r"^(?:fsync|fdatasync|__fsync|sync_file_range)$", True),
    # compute (Python side and CUDA/driver side)
    ("compute", 2, r"^torch/(?:nn/modules/|autograd/|_tensor\.py$|optim/|amp/|cuda/amp/|nn/functional\.py$|"
                   r"functional\.py$|_ops\.py$|_dynamo/|_inductor/|cuda/__init__\.py$|cuda/streams\.py$|"
                   r"_functorch/|utils/checkpoint\.py$)|^(?:apex|flash_attn|triton|xformers|transformer_engine)/|"
                   r"^transformers/models/|^deepspeed/runtime/zero/", None, False),
    ("compute", 2, None, r"^(?:forward|backward|_forward|step|training_step|optimizer_step|run_backward)$", False),
    ("compute", 2, None, r"^cu(?:da)?[A-Z]\w*|^cudnn|^cublas|^at::native::|^at::cuda::|^c10::cuda::|"
                         r"^torch::autograd::|^THPEngine|^THCudaCheck|^nvrtc", True),
    ("compute", 2, r"libcuda\.so|libcudart\.so|libnvidia|libcublas|libcudnn", None, True),
    # waiting on a lock, an event, a subprocess or sleeping
    ("sleep_lock", 3, r"^(?:threading|queue|subprocess)\.py$|^concurrent/futures/_base\.py$|"
                      r"^multiprocessing/(?:synchronize|managers|popen_\w+)\.py$|^filelock/|^asyncio/locks\.py$",
     r"^(?:wait|acquire|_acquire|join|_wait_for_tstate_lock|get|put|result|wait_for|__enter__|communicate|"
     r"_communicate|_wait|_try_wait|_acquire_restore|as_completed|_poll|poll|_callmethod|lock)$", False),
    ("sleep_lock", 3, None, r"^(?:__GI_)?_{0,3}(?:clock_nanosleep|nanosleep|time_sleep|pysleep|usleep|"
                            r"pthread_cond_(?:timed|clock)?wait\w*|sem_(?:timed|clock)?wait\w*|new_sem_wait\w*|"
                            r"do_futex_wait|futex_abstimed_wait\w*|futex_wait\w*|lll_lock_wait\w*|"
                            r"pthread_mutex_lock|PyThread_acquire_lock\w*|take_gil|drop_gil|acquire_timed|"
                            r"lock_PyThread_acquire_lock|pthread_join\w*|waitpid|wait4|poll|ppoll|select|pselect\w*|"
                            r"epoll_wait|epoll_pwait)$", True),
    # idle loops (event loops, pool workers, the torchrun agent's monitor loop)
    ("idle", 4, r"^selectors\.py$|^asyncio/|^socketserver\.py$|^concurrent/futures/thread\.py$|"
                r"^multiprocessing/pool\.py$|^torch/distributed/elastic/(?:agent|multiprocessing)/|"
                r"^torch/distributed/run\.py$", None, False),
]
_COMPILED = [(cls, tier, re.compile(f) if f else None, re.compile(fn) if fn else None, nat)
             for cls, tier, f, fn, nat in _RULES]

_LAUNCHER_FILES = re.compile(r"^torch/distributed/(?:elastic/agent/|run\.py$|launch\.py$|launcher/)|"
                             r"^deepspeed/launcher/|^accelerate/commands/launch\.py$")


# Wrapper frames: a progress bar's or tracker's loop over the object it wraps (`for obj in iterable: yield obj` in
# tqdm's __iter__, rich's track), a decorator's or context manager's pass-through. A thread whose innermost frame is
# one of these is inside the wrapped object (a DataLoader's __next__, a collective its iteration issues), not in the
# wrapper's own work: they decide no class. The wrapper's own work shows as frames inside it (tqdm's refresh,
# display, its lock), which still classify.
_WRAPPERS: list[tuple[str, str]] = [
    (r"^tqdm/(?:std|notebook|asyncio|gui|rich|tk|keras|dask)\.py$", r"^(?:__iter__|__aiter__|__anext__|__next__)$"),
    (r"^tqdm/contrib/(?:__init__|concurrent|itertools)\.py$", r"^(?:tenumerate|tzip|tmap|tproduct|_executor_map|"
                                                            r"thread_map|process_map)$"),
    (r"^rich/progress\.py$", r"^(?:track|__iter__|__next__|_track)$"),
    (r"^torch/utils/_contextlib\.py$", r"^(?:decorate_context|generator_context|__enter__|__exit__)$"),
    (r"^contextlib\.py$", r"^(?:__enter__|__exit__|inner)$"),
    (r"^functools\.py$", r"^(?:wrapper|_wrapper)$"),
]
_WRAPPERS_RX = [(re.compile(f), re.compile(fn)) for f, fn in _WRAPPERS]


def is_wrapper(frame: dict) -> bool:
    """A frame that only passes through to what it wraps (postmortem.stacks.classify._WRAPPERS)."""
    if is_native(frame):
        return False
    return _is_wrapper(bare_name(frame.get("func")).rsplit(".", 1)[-1], short_file(frame.get("file") or ""))


@lru_cache(maxsize=65536)
def _is_wrapper(name: str, path: str) -> bool:
    return any(frx.search(path) and fnrx.search(name) for frx, fnrx in _WRAPPERS_RX)


@lru_cache(maxsize=65536)
def _frame_rule(func: str, file: str, native: bool) -> tuple[str, int] | None:
    name = bare_name(func)
    path = file.replace("\\", "/").rsplit("/", 1)[-1] if native else short_file(file)
    if not native and _is_wrapper(name.rsplit(".", 1)[-1], path):
        return None
    for cls, tier, frx, fnrx, nat in _COMPILED:
        if nat and not native:
            continue
        target_file = file if (nat and frx is not None) else path
        if frx is not None and not frx.search(target_file):
            continue
        if fnrx is not None and not fnrx.search(name if not nat else (func or "")):
            continue
        if frx is None and fnrx is None:
            continue
        return cls, tier
    return None


_SAME_LIST_MAX = 4096  # stacks remembered by identity (more are forgotten all at once: a cache, not a store)


def _per_stack(fn):
    """fn(frames) remembered per frames object: the parse makes the equal stacks of thousands of ranks one list
    (postmortem.tables.columns.share_text), which the rank state, the rules and the report each ask about. The
    list is kept with its answer, so its id cannot be reused while remembered; stacks are never changed once
    parsed."""
    memo: dict = {}

    def wrapper(frames):
        got = memo.get(id(frames))
        if got is not None and got[0] is frames:
            return got[1]
        value = fn(frames)
        if len(memo) >= _SAME_LIST_MAX:
            memo.clear()
        memo[id(frames)] = (frames, value)
        return value
    wrapper.__doc__, wrapper.__name__, wrapper.__wrapped__ = fn.__doc__, fn.__name__, fn
    return wrapper


def frame_class(frame: dict) -> str | None:
    """The activity one frame names (a class of CLASSES other than idle/unknown fallbacks), or None."""
    hit = _frame_rule(frame.get("func") or "", frame.get("file") or "", is_native(frame))
    return hit[0] if hit else None


@_per_stack
def _decide(frames: list[dict]) -> tuple[str, int | None]:
    """(class, index of the deciding frame): the best tier wins; within it the innermost frame, preferring one
    with a resolved name over `??`/bare addresses."""
    hits = []
    for i, fr in enumerate(frames):  # innermost first
        hit = _frame_rule(fr.get("func") or "", fr.get("file") or "", is_native(fr))
        if hit:
            hits.append((hit[1], i, hit[0]))
    if not hits:
        return "unknown", None
    best_tier = min(h[0] for h in hits)
    tier = [h for h in hits if h[0] == best_tier]
    cls = tier[0][2]
    named = [h for h in tier if h[2] == cls and not _ADDR_ONLY.match(frames[h[1]].get("func") or "")]
    if cls != "compute":  # a Python frame names a wait better than libc's futex frames (CUDA frames say more)
        py = [h for h in named if not is_native(frames[h[1]])]
        named = py or named
    return cls, (named or tier)[0][1]


def classify_frames(frames: list[dict]) -> str:
    """What a stack is doing: one of CLASSES (innermost frame of the most specific kind of activity decides)."""
    if not frames:
        return "unknown"
    return _decide(frames)[0]


def blocking_frame(frames: list[dict]) -> dict | None:
    """The innermost interesting frame: the one that decided the class, else the innermost user/Python frame."""
    if not frames:
        return None
    cls, idx = _decide(frames)
    user = last_user_frame(frames)
    if idx is not None:
        decided = frames[idx]
        # a user frame that decided by its name (`Encoder.forward`: compute) while the thread sits in a user frame
        # inside it: that inner frame is where it is
        if user is not None and not is_native(decided) and not _is_library_frame(decided):
            return user
        return decided
    if user is not None:
        return user
    py = [f for f in frames if not is_native(f)]
    return py[0] if py else frames[0]


_LIBRARY_TOPS = frozenset(sys.stdlib_module_names) | {
    "torch", "torchvision", "torchaudio", "transformers", "accelerate", "deepspeed", "lightning",
    "pytorch_lightning", "lightning_fabric", "wandb", "tqdm", "rich", "numpy", "datasets", "tensorboard",
    "tensorboardX", "google", "protobuf", "sentry_sdk", "opentelemetry", "safetensors", "huggingface_hub",
    "apex", "flash_attn", "triton", "xformers", "megatron", "fairseq", "hydra", "omegaconf", "mlflow", "comet_ml",
    "neptune", "clearml", "filelock", "fsspec", "requests", "urllib3", "httpx", "grpc", "psutil", "peft", "trl",
    "timm", "einops", "scipy", "pandas", "PIL", "cv2", "webdataset", "torchdata", "ray", "horovod", "click",
    "typer", "absl", "jax", "flax", "orbax", "h5py", "zmq", "msgpack", "aiohttp", "anyio", "ipykernel",
    "IPython", "tokenizers", "sentencepiece", "evaluate", "pyarrow", "multiprocess", "dill", "loguru",
}


def _is_library_frame(frame: dict) -> bool:
    raw = (frame.get("file") or "").replace("\\", "/")
    if not raw or raw.startswith("<") or "/site-packages/" in raw or "/dist-packages/" in raw:
        return True
    if _C_SOURCE.search(raw):
        return True  # an interpreter's or extension's C frame (py-spy --native): never the user's own code
    sf = short_file(raw)
    top = sf.split("/", 1)[0]
    if top.endswith(".py"):
        top = top[:-3]
    return top in _LIBRARY_TOPS or bool(_PY_VERSION_DIR.search(raw))


@_per_stack
def last_user_frame(frames: list[dict]) -> dict | None:
    """The innermost Python frame in the user's own code (not the stdlib or a known library), or None."""
    for fr in frames:
        if not is_native(fr) and not _is_library_frame(fr):
            return fr
    return None


@_per_stack
def is_launcher(frames: list[dict]) -> bool:
    """True when a stack belongs to a launcher (torchrun agent, deepspeed/accelerate launcher, the parent of
    torch.multiprocessing.spawn), not a rank."""
    spawn_parent = False
    for f in frames:
        if is_native(f):
            continue
        sf = short_file(f.get("file"))
        if _LAUNCHER_FILES.search(sf):
            return True
        if sf == "torch/multiprocessing/spawn.py":
            name = bare_name(f.get("func"))
            if name == "_wrap":
                return False  # a rank that spawn started
            spawn_parent = spawn_parent or name in ("spawn", "start_processes", "join")
    return spawn_parent




_BACKWARD_FUNCS = frozenset({"_engine_run_backward", "run_backward", "backward", "_backward"})


def waits_inside_backward(frames: list[dict]) -> bool:
    """A stack in autograd's backward (Python frames only): under DDP the gradient all-reduce runs there, so a rank
    that reported a collective timeout with this stack was waiting in it, not computing."""
    for f in frames or []:
        if is_native(f):
            continue
        if bare_name(f.get("func")) in _BACKWARD_FUNCS and short_file(f.get("file")).startswith("torch/"):
            return True
    return False


# Frames of the training step itself: a collective under these is DDP/FSDP gradient or parameter traffic that every
# rank runs each step; elsewhere (saving, logging, callbacks, evaluation, the end of an epoch) a collective sits in
# code that ranks can skip or reach in a different order.
STEP_FRAMES = re.compile(r"(?:^|_)(?:backward|forward|optimizer_step|step|training_step|_run_ddp_forward|"
                         r"pre_forward|post_backward|reduce_grad|all_reduce_grads|_sync_params)$")


def in_training_step(frames: list[dict]) -> bool:
    """Whether a stack is inside the training step (forward, backward, the optimizer step) of some frame."""
    for f in frames or []:
        name = bare_name(f.get("func") or "")
        if STEP_FRAMES.search(name.rsplit(".", 1)[-1]):
            return True
    return False


_LOGGING_NAME = re.compile(r"(?i)(?:^|_)(?:log|logs|logging|logger|print|emit|write|flush|wandb|tensorboard)"
                           r"(?:_|$)")


# A network client reading or writing a socket (the stdlib's and the common HTTP/RPC clients'), and what the user's
# code that called it was for, by its name: a metrics push or a log upload blocks the loop like any logger, a
# checkpoint upload is checkpoint I/O, a shard download is data loading.
_NET_FILES = re.compile(r"^(?:socket|ssl|http/client|urllib/request|xmlrpc/client|ftplib|smtplib)\.py$|"
                        r"^(?:requests|urllib3|httpx|httpcore|grpc|aiohttp|websocket|botocore|boto3|s3transfer)/")
_NET_PURPOSE = (("checkpoint_io", re.compile(r"(?i)checkpoint|ckpt|save|upload_model|push_to_hub|weights")),
                ("data_loading", re.compile(r"(?i)download|fetch_(?:shard|data|batch)|dataset|load_(?:shard|data)")),
                ("logging", re.compile(r"(?i)metric|log|telemetry|track|report|monitor|push|stat[sd]?\b|export|"
                                       r"prometheus|heartbeat|notify|alert")))


_C_SOURCE = re.compile(r"\.(?:c|cc|cpp|cxx|h|hpp|cu)$")


def _network_caller(frames: list[dict]) -> str | None:
    """The class of a stack blocked in a network client, from the purpose its innermost user caller names."""
    # (py-spy --native lists CPython's own C frames, `sock_recv_guts (socketmodule.c:3536)`, unflagged)
    py = [f for f in frames or [] if not is_native(f) and not _C_SOURCE.search(str(f.get("file") or ""))]
    if not py or not any(_NET_FILES.search(short_file(f.get("file"))) for f in py[:12]):
        return None
    user = last_user_frame(py)
    if user is None:
        return None
    name = str(user.get("func") or "")
    for cls, rx in _NET_PURPOSE:
        if rx.search(name):
            return cls
    return None


# libc's write family: the innermost native frame of a thread blocked writing a file descriptor
_WRITE_CALLS = re.compile(r"^(?:__GI_)?_{0,2}(?:libc_)?(?:write|writev|pwrite64|pwritev|write_nocancel)$|"
                          r"^_IO_(?:new_)?(?:file_write|do_write|file_xsputn)$")


def _blocked_write(frames: list[dict]) -> str | None:
    """The class of a stack (py-spy --native) whose innermost frame is libc's write called straight from the user's
    own code: print() or sys.stdout.write() into a pipe nobody drains (a log shipper, a full tee, a stopped
    terminal) is logging; the caller's name may say it is a checkpoint or a dataset written instead."""
    if not frames or not is_native(frames[0]) or not _WRITE_CALLS.match(bare_name(frames[0].get("func"))):
        return None
    py = [f for f in frames[1:] if not is_native(f) and not _C_SOURCE.search(str(f.get("file") or ""))]
    if not py or py[0] is not last_user_frame(py):
        return None  # a library (torch.save, a logging handler) called write: its own frames decide
    name = str(py[0].get("func") or "")
    for cls, rx in _NET_PURPOSE[:2]:
        if rx.search(name):
            return cls
    return "logging"


def classify_thread(frames: list[dict], active=None) -> str:
    """classify_frames, plus what an idle thread in the user's own code says: py-spy marks a thread idle when it
    waits in a system call, and Python frames show no builtin below the user's line; a user function that logs or
    prints (by its name) idle there is blocked writing its output (a full pipe, a stalled file system, a handler
    lock), so the stack is logging. `active`: py-spy's active flag (None when unknown)."""
    cls = classify_frames(frames)
    net = _network_caller(frames) if cls in ("unknown", "idle", "sleep_lock") else None
    if net is not None:
        return net
    wrote = _blocked_write(frames) if cls == "unknown" else None
    if wrote is not None:
        return wrote
    if cls != "unknown" or active is not False:
        return cls
    user = next((f for f in frames or [] if not is_native(f)), None)
    if user is not None and user is last_user_frame(frames) and _LOGGING_NAME.search(bare_name(user.get("func"))
                                                                                     .rsplit(".", 1)[-1]):
        return "logging"
    return cls

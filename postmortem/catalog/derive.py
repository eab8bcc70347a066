"""Derived labels: the role (root, consequence, benign) and category of every extracted string, from where it is
raised (library, module, exception class, log level) and its words. Pure; rules are data, tried in order.

    derive(record) -> Label(role, category, implies, rule)

A record is an extract record (lib, file, kind, level, exc, text). How the rules read a string:
1. role: words that name this process's own failure (out of memory, NaN, ECC, address in use, a time limit) make
   it a root whatever the class says (a message refines its class); words that report someone else's failure
   (a peer closed the connection, a wait timed out, a signal from the launcher, a child's exit) make it a
   consequence; words of a run that goes on (retrying, skipping, falling back) make a non-raised string benign;
   otherwise the kind and level decide (raised, error, fatal: root; warning, info, debug, print: benign).
2. category: the failure words first, then what a consequence reports, then the subsystem that raised it
   (argument-checking classes such as ValueError stay rank_crash outside DDP/FSDP), then the class, then
   rank_crash for roots and no_failure for benign strings.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from postmortem.catalog.extract import PLACEHOLDER_RE


@dataclass(frozen=True)
class Label:
    """A derived label and the rule that gave it."""
    role: str
    category: str
    implies: tuple[str, ...]
    rule: str


def _rx(s: str) -> re.Pattern:
    return re.compile(s, re.I)


# ------------------------------------------------------------------ words naming this process's own failure
# (rule id, regex over the text, category, implies). First match wins; the string is a root unless the kind is
# benign-by-words below (a retried OOM is benign gpu_oom).
ROOT_WORDS = [
    ("time-limit", _rx(r"DUE TO TIME LIMIT|time limit (?:reached|exceeded|was reached)|TIMEOUT\b.*\bjob|"
                       r"job (?:exceeded|reached) (?:its |the )?(?:time|wall)|walltime|DeadlineExceeded|"
                       r"active ?Deadline ?Seconds|exceeded (?:its )?deadline"), "job_stopped",
     ("killed_from_outside",)),
    ("preempted", _rx(r"DUE TO PREEMPTION|\bpreempt(?:ed|ion|ing)\b|\bPreempting\b"), "job_stopped",
     ("killed_from_outside",)),
    ("node-failure", _rx(r"DUE TO NODE FAIL|node (?:failure|failed|fail\b)|NODE_FAIL|node (?:is )?(?:down|lost|"
                         r"not ?ready|unreachable)|NodeNotReady|node shutdown|imminent node shutdown"),
     "job_stopped", ("killed_from_outside",)),
    ("cancelled", _rx(r"(?-i:\bCANCELLED\b)(?! AT .{0,60}DUE TO TASK FAILURE)|\bscancel|cancelled by (?:user|admin|root|uid)|"
                      r"job (?:was |has been )?(?:cancelled|canceled)|DUE TO JOB REQUEUE|\brequeue"), "job_stopped",
     ("killed_from_outside",)),
    ("evicted", _rx(r"\bevicted\b|\bevicting (?:the )?pod|node was low on resource|"
                    r"ephemeral local storage usage exceeds|pod .{0,30}(?:was |is being )evict"),
     "job_stopped", ("killed_from_outside",)),
    ("host-oom-killed", _rx(r"OOMKilled|oom[-_ ]kill|out of memory: kill|Exceeded (?:job |step |virtual )?memory limit|"
                            r"memory cgroup out of memory|killed due to (?:the node running low on|memory)|"
                            r"running low on memory|memory monitor|task was killed due to"), "host_oom",
     ("killed_from_outside",)),
    ("gpu-oom", _rx(r"(?:CUDA|HIP|XPU|GPU|device|cuda runtime error.{0,10}) ?(?:ran )?out of memory|"
                    r"OutOfMemoryError|cudaErrorMemoryAllocation|hipErrorOutOfMemory|CUDA_ERROR_OUT_OF_MEMORY|"
                    r"Tried to allocate .{0,40}GPU|out of device memory|HSA_STATUS_ERROR_OUT_OF_RESOURCES|"
                    r"Cuda failure '?out of memory|insufficient (?:GPU|device) memory|OOM when allocating|"
                    r"Allocation failed\s*:\s*Device memory"),
     "gpu_oom", ("memory_refused",)),
    ("host-oom", _rx(r"MemoryError|Cannot allocate memory|can't allocate memory|not enough memory|\bENOMEM\b|"
                     r"std::bad_alloc|host memory|Unable to allocate .{0,30} for an array|out of host memory|"
                     r"(?:CPU|host|system|RAM) (?:ran )?out of memory|out of memory"), "host_oom",
     ("memory_refused",)),
    ("address-in-use", _rx(r"address already in use|EADDRINUSE|port .{0,40}(?:already in use|is in use|taken)|"
                           r"bind\(\) failed|failed to bind|could not bind"), "nccl_error", ("crashed",)),
    ("disk-full", _rx(r"No space left on device|\bENOSPC\b|Disk quota exceeded|\bEDQUOT\b|disk (?:is )?full"),
     "checkpoint_corruption", ("checkpoint_io_failed",)),
    ("gpu-hardware", _rx(r"\bECC\b|uncorrectable|fallen off the bus|fell off the bus|\bXid\b|NVLink (?:error|"
                         r"fail)|PCIe? (?:error|bus error|link)|hardware (?:error|exception|failure)|GPU (?:is )?lost|"
                         r"device (?:is )?lost|GPU has fallen|RAS (?:error|event)|SRAM ECC|poison|"
                         r"HSA_STATUS_ERROR_HW_EXCEPTION|hipErrorECCNotCorrectable|"
                         r"Generic hang recovery|GPU reset|thermal"), "gpu_hardware", ("crashed",)),
    ("nan-inf", _rx(r"\bNaN\b|\bnan values\b|\b(?:inf|nan) ?(?:or|and|/) ?(?:inf|nan)\b|non-?finite|not finite|"
                    r"is (?:nan|inf)\b|(?:loss|gradient|grad norm|value|output)s? (?:is |are |became |of )?"
                    r"(?:nan|inf)\b|"
                    r"overflow.{0,40}(?:loss ?scal|skipping)|loss scal.{0,40}(?:minimum|overflow)|"
                    r"gradient overflow|Grad overflow|FloatingPointError|returned nan|loss (?:has )?diverged"),
     "nan_inf", ("numeric_failure",)),
    ("checkpoint-corrupt", _rx(r"PytorchStreamReader|PytorchStreamWriter|failed finding central directory|"
                               r"not a zip file|BadZipFile|invalid header|header too (?:large|small)|"
                               r"unexpected EOF|Ran out of input|truncated (?:file|checkpoint|archive|zip|pickle|data)|"
                               r"file .{0,30}truncated|invalid load key|UnpicklingError|"
                               r"storage has wrong size|corrupt|magic number|incomplete checkpoint|"
                               r"checkpoint\b(?! config)[^.]{0,60}(?:not found|does not exist|is missing|"
                               r"missing (?:file|key)|failed|is invalid|invalid (?:file|format|header)|mismatch)|"
                               r"fail(?:ed)? (?:to )?(?:sav|load|read|writ)\w* .{0,30}checkpoint|"
                               r"checkpoint being loaded|checkpoint (?:contains|has|was saved with) |"
                               r"(?:load|read|save|writ)(?:ing)? (?:the )?checkpoint.{0,40}(?:fail|error)|"
                               r"state_dict.{0,40}(?:missing|unexpected) key|Missing key\(s\)|Unexpected key\(s\)|"
                               r"size mismatch for|Error\(s\) in loading state_dict|HeaderTooLarge|"
                               r"InvalidHeader|MetadataIncompleteBuffer|SafetensorError|"
                               r"Can't load (?:the )?(?:model|config|tokenizer|weights|(?:\w+ ){1,3}for ')|"
                               r"does not appear to have a file named"), "checkpoint_corruption",
     ("checkpoint_io_failed",)),
    ("dataloader", _rx(r"DataLoader worker|dataloader.{0,30}(?:timed out|killed|exited|died|bus error)|"
                       r"worker \(pid|pin[_ ]memory thread|Unexpected bus error|(?:insufficient|out of) shared memory|"
                       r"encountered in worker|in DataLoader worker process|"
                       r"/dev/shm|shared memory \(shm\)|\bshm\b.{0,30}(?:size|full|insufficient|exhaust)"),
     "dataloader_failure", ("data_loading_failed",)),
    ("collective-mismatch", _rx(r"mismatch between collectives|collective .{0,40}mismatch|"
                                r"Mismatched (?:allreduce|allgather|broadcast|alltoall|collective)|"
                                r"ranks? .{0,40}(?:called|issued) different|different (?:collective|op) |"
                                r"sequence number.{0,30}mismatch|inconsistent .{0,30}across ranks|"
                                r"Detected mismatch|does not match .{0,30}other ranks|"
                                r"size mismatch.{0,40}rank|differ(?:s|ent)? across ranks"), "barrier_skew",
     ("collective_mismatch",)),
    ("ddp-misuse", _rx(r"Expected to have finished reduction|find_unused_parameters|marked (?:as )?ready "
                       r"(?:twice|only once)|mark_variable_ready|unused parameters|parameters that were not used|"
                       r"static_graph|DistributedDataParallel.{0,60}(?:not|must|cannot|expect)|"
                       r"FullyShardedDataParallel.{0,60}(?:not|must|cannot|expect)"), "ddp_usage_error",
     ("ddp_misuse",)),
    ("fatal-signal", _rx(r"Segmentation fault|\bSIGSEGV\b|\bSIGBUS\b|Bus error|\bSIGABRT\b|core dumped|"
                         r"core dump (?:created|written)|"
                         r"Fatal Python error|illegal instruction|\bSIGILL\b|\bSIGFPE\b"), "rank_crash",
     ("fatal_signal",)),
]

# ------------------------------------------------------------------ words reporting someone else's failure
CONSEQUENCE_WORDS = [
    ("peer-gone", _rx(r"connection (?:was )?(?:closed|reset|aborted) by (?:the )?(?:remote )?(?:peer|host|side)|"
                      r"reset by peer|broken pipe|\bEPIPE\b|\bECONNRESET\b|connection refused|\bECONNREFUSED\b|"
                      r"remote (?:peer|process|rank|end|side|host) (?:has )?(?:closed|exited|died|disconnected|"
                      r"failed|crashed|gone|hung up)|peer (?:has )?(?:closed|disconnected|exited|died|gone|"
                      r"hung up)|lost (?:the )?connection|connection (?:to .{0,40})?(?:was |has been )?(?:lost|"
                      r"closed|dropped)|Socket closed|socket .{0,20}closed|disconnected|"
                      r"remote error|error on remote|peer (?:process|rank) .{0,30}(?:failed|error)|"
                      r"process (?:has )?(?:died|exited) unexpectedly|daemon .{0,30}(?:lost|died)|"
                      r"lost contact|is unreachable|heartbeat.{0,30}(?:missed|lost|timed? ?out|failed)|"
                      r"remote (?:process|peer) error|(?:connect|connection) (?:timeout|timed out)|"
                      r"failed to connect|(?:socket |net )?(?:recv|send) (?:failed|error)|Call to (?:recv|send|"
                      r"connect) failed|deadlock detected from rank|DeadlockDetected"),
     "nccl_error", ("peer_gone",)),
    ("store-wait", _rx(r"(?:store|rendezvous|TCPStore|barrier|clients|participants|init_process_group|"
                       r"rendezvous).{0,80}(?:timed? ?out|timeout)|(?:timed? ?out|timeout).{0,60}(?:store|"
                       r"rendezvous|clients|participants|to join|joined)|waiting for (?:all )?(?:clients|"
                       r"participants|workers to join|other nodes)|Waiting in store based barrier|"
                       r"waiting on (?:the )?(?:exit )?barrier|rendezvous.{0,60}(?:deadline|closed)"),
     "collective_timeout", ("store_wait",)),
    ("waiting", _rx(r"watchdog (?:caught|timeout|thread)|collective operation timeout|(?:collective|allreduce|"
                    r"all_reduce|allgather|broadcast|barrier|reduce_scatter|alltoall|send|recv|work|operation|"
                    r"op)\b.{0,60}(?:timed? ?out|timeout)|timed? ?out.{0,40}(?:waiting|collective|ranks?|"
                    r"peers?|for (?:other|the other|all))|Timed out waiting|waiting for (?:other|the other|all|"
                    r"remaining)? ?(?:ranks?|peers?|processes|workers)|stalled ranks|waiting for remainder of "
                    r"ranks|Socket Timeout|Timed out after \d|took too long|has been waiting|"
                    r"(?:read|write|recv|send) timeout|"
                    r"\bdesync\b|(?:is|are) (?:still )?waiting"), "collective_timeout",
     ("waiting_in_collective",)),
    ("signal", _rx(r"received (?:signal|SIG\w+)|got signal|signal (?:SIG)?(?:TERM|INT|HUP)\b|\bSIGTERM\b|"
                   r"\bSIGINT\b|\bSIGHUP\b|\bSIGKILL\b|death signal|termination signal|terminat(?:ed|ing) (?:by|"
                   r"due to|because of) (?:a |the )?(?:signal|launcher|scheduler|another|other|user)|"
                   r"closing signal|shutting down (?:the )?(?:workers|all|remaining)|KeyboardInterrupt|"
                   r"interrupted by|was (?:killed|terminated) by|Killing subprocess|killing (?:all|remaining|"
                   r"other)|abort(?:ed|ing)? (?:because|due to|since) (?:another|other|a peer|rank|the job)|"
                   r"aborting (?:job|all|the job)|job (?:is being )?aborted|via signal|"
                   r"received (?:…|SIG\w+|signal)(?:,? exiting| signal)"), "rank_crash",
     ("launcher_terminated",)),
    ("child-failed", _rx(r"(?:process|rank|task|worker|child|subprocess|replica|job step).{0,60}(?:exited|"
                         r"terminated|died|failed|finished) (?:with|on) (?:(?:a )?non-?zero |exit )?(?:code|status|"
                         r"signal)|exit(?:ed)? (?:with )?(?:code|status) [^0⟪]|non-?zero exit (?:code|status)|"
                         r"returned (?:a )?non-?zero exit|exits with return code|ChildFailedError|"
                         r"first observed failure|replica\(s\) failed|(?:process|rank|task) .{0,20}"
                         r"(?:has )?failed|noticed that process|exited on signal|failed \(exitcode|"
                         r"Worker group (?:failed|FAILED)|will restart worker group|BackoffLimitExceeded|"
                         r"reached the specified backoff limit|restarting because|terminated with the following "
                         r"error|died with |DUE TO TASK FAILURE|\bfailed (?:runs|trials|tasks|workers|processes|"
                         r"ranks|jobs)\b"), "rank_crash",
     ("launcher_summary",)),
]

# ------------------------------------------------------------------ words of a run that goes on (not raised)
BENIGN_WORDS = _rx(r"\bretry(?:ing)?\b|will retry|retries|trying again|try again|falling back|fall ?back|"
                   r"\bskipp(?:ing|ed)\b|\bignor(?:ing|ed)\b|deprecat|will be removed|consider (?:using|setting|"
                   r"passing)|you (?:can|may|should|might)|recommend|for better performance|defaulting to|"
                   r"using (?:the )?default|no longer|not recommended|has no effect|is ignored|continuing|"
                   r"resuming|recover(?:ed|ing)|will (?:be )?(?:used|set|reduced|lowered|try)|reducing|"
                   r"setting .{0,30} to|increasing|Attempt \d|attempt ⟪")

# ------------------------------------------------------------------ words that name an area, not a role
# (checked after the consequence words: `NCCL error: remote process exited` is a consequence first)
AREA_WORDS = [
    ("nccl", _rx(r"\bNCCL (?:error|WARN|failure)|\bnccl\w*(?:System|Internal|Invalid|Unhandled)\w*Error|"
                 r"unhandled (?:system|cuda) error|\bRCCL\b.{0,30}(?:error|fail)|\bgloo\b.{0,40}(?:error|fail)|"
                 r"completion with error|\bibv_\w+ failed|NET/(?:IB|Socket|Plugin|OFI)\b|\btransport\b.{0,30}"
                 r"(?:error|fail)|\bUCX\b.{0,30}(?:error|fail)|process group.{0,40}(?:error|fail|abort)|"
                 r"communicator.{0,40}(?:error|fail|abort)|\bProcessGroup\w*\b.{0,40}(?:error|fail)"),
     "nccl_error", ("crashed",)),
    ("cuda", _rx(r"\bCUDA error|Cuda failure|\bcudaError\w+|\bhipError\w+|\bCUDA_ERROR_\w+|HIP (?:error|failure)|"
                 r"CUBLAS_STATUS|CUDNN_STATUS|device-side assert|illegal memory access|Memory access fault"),
     "rank_crash", ("crashed",)),
    ("metrics", _rx(r"\bwandb\b.{0,60}(?:error|fail|timed? ?out|network)|\bmlflow\b.{0,60}(?:error|fail)|"
                    r"tensorboard.{0,60}(?:error|fail)"), "logging_blocking", ("crashed",)),
]

# ------------------------------------------------------------------ where it is raised
# Classes that check arguments and configuration: a rank_crash wherever they are raised (outside DDP/FSDP).
USAGE_CLASSES = frozenset({
    "ValueError", "TypeError", "AssertionError", "NotImplementedError", "KeyError", "AttributeError", "IndexError",
    "ImportError", "ModuleNotFoundError", "MisconfigurationException", "ConfigError", "ValidationError",
    "ArgumentError", "ArgumentTypeError", "UsageError", "InvalidArgument", "LookupError", "UnsupportedOperation",
    "NameError", "SyntaxError", "OptionalDependencyNotAvailable", "PackageNotFoundError"})
# (rule id, library or None, file regex, category): the category of an operational failure raised there.
SUBSYSTEMS = [
    ("ddp", "torch", _rx(r"^torch/(?:nn/parallel/|distributed/(?:fsdp|_composable|algorithms/ddp|_fsdp))"),
     "ddp_usage_error"),
    ("ddp-wrapper", None, _rx(r"(?:strategies|plugins/training_type)/(?:ddp|fsdp)|/fsdp_utils|"
                              r"overrides/distributed"), "ddp_usage_error"),
    ("dataloader", "torch", _rx(r"^torch/utils/data/"), "dataloader_failure"),
    ("checkpoint", None, _rx(r"^(?!.*activation)(?!torch/utils/checkpoint)(?:.*(?:serialization|"
                             r"_weights_only_unpickler|distributed/checkpoint/|dist_checkpointing/|"
                             r"checkpoint_(?:engine|connector|utils|io)|checkpointing\.py|/checkpoint/|cloud_io|"
                             r"safetensors|modeling_utils|configuration_utils|utils/hub\.py|file_io|"
                             r"\bsaving\.py))"), "checkpoint_corruption"),
    ("comm-lib", "horovod", _rx(r"common/ops/|mpi_ops|gloo|nccl"), "nccl_error"),
    # gloo's collectives check their arguments (sizes, counts) with enforce: a caller's error; its transport and
    # rendezvous fail when the network or a peer does
    ("gloo-algorithm", "gloo", _rx(r"^gloo/(?!transport/|rendezvous/|common/linux)"), "rank_crash"),
    ("mpi-transport", "openmpi", _rx(r"/(?:btl|pml|mtl|coll|osc|oob|ucx|ofi|openib|pmix|verbs|psm2?|portals4|"
                                     r"usnic|libfabric)\b"),
     "nccl_error"),
    ("metrics", None, _rx(r"^(?:wandb|mlflow|tensorboard)/"), "logging_blocking"),
]
# A metrics library's own failure blocks or breaks logging only when it is its I/O (the server, the network, an
# upload); its argument and state checks are ordinary crashes.
_METRICS_IO = _rx(r"timed? ?out|timeout|connect|network|\bHTTP|server|upload|request|socket|\bSSL\b|retr(?:y|ies)|"
                  r"unreachable|rate limit|\b5\d\d\b|response|proxy|\bAPI\b|communicat|sync|offline|"
                  r"\bIO\b|I/O|disk|blocked|hang")
_LIB_CATEGORY = {"nccl": "nccl_error", "rccl": "nccl_error", "gloo": "nccl_error"}
# Classes that decide the category of an operational failure by themselves.
CLASS_CATEGORY = [
    (frozenset({"MemoryError", "_ArrayMemoryError"}), "host_oom", ("memory_refused",)),
    (frozenset({"OutOfMemoryError"}), "gpu_oom", ("memory_refused",)),
    (frozenset({"FloatingPointError"}), "nan_inf", ("numeric_failure",)),
    (frozenset({"UnpicklingError", "BadZipFile", "SafetensorError"}), "checkpoint_corruption",
     ("checkpoint_io_failed",)),
    (frozenset({"DistBackendError", "NcclError", "DistNetworkError"}), "nccl_error", ("crashed",)),
]
ERROR_KINDS = frozenset({"raise", "error_string", "nccl_warn", "nccl_result", "gloo_enforce", "gloo_throw",
                         "gloo_throw_io", "gloo_throw_invalid", "gloo_error_msg", "help", "str", "assign",
                         "cstring"})
ERROR_LEVELS = frozenset({"error", "critical", "fatal"})
# Root words that report how the job ended from outside: a root even as a Kubernetes reason or event, or a note
# that says the job was acted on (`Job 7 exceeded memory limit, cancelling it`).
OUTSIDE = frozenset({"time-limit", "preempted", "node-failure", "cancelled", "evicted", "host-oom-killed"})
_ACTION = _rx(r"cancell?ing (?:it|job|the job)|\bkill(?:ed|ing)\b|terminat(?:ed|ing)\b|\bevicted\b|"
              r"\bcancell?ed\b|has been (?:cancell?ed|preempted|requeued)")
_DEFAULT_IMPLIES = {"gpu_oom": ("memory_refused",), "host_oom": ("memory_refused",),
                    "dataloader_failure": ("data_loading_failed",), "checkpoint_corruption": ("checkpoint_io_failed",),
                    "nan_inf": ("numeric_failure",), "ddp_usage_error": ("ddp_misuse",),
                    "barrier_skew": ("collective_mismatch",), "job_stopped": ("killed_from_outside",),
                    "collective_timeout": ("waiting_in_collective",)}


def plain(text: str) -> str:
    """The literal words of a template: each placeholder (whose hint is code, not printed text) becomes `…`."""
    return PLACEHOLDER_RE.sub("…", text)


def _classes(exc: str, ancestors) -> set[str]:
    if not exc:
        return set()
    names = {re.split(r"\.|::", exc)[-1]}
    if ancestors is not None:
        names.update(ancestors(exc))
    return names


_ERRORISH = _rx(r"error|fail|cannot|can't|could not|unable|invalid|not (?:found|supported|allowed)|must|"
                r"exceed|missing|unexpected|mismatch")


_WARN_TOPIC = _rx(r"deprecat|warn|ignor|not[-_ ]?recommended|notice|\binfo\b|example|usage|\bhelp\b")
_SAYS_ERROR = _rx(r"\W{0,4}(?:error|fatal|failed|failure|exception)\b")


def tier(rec: dict, text: str) -> str:
    """error | note | debug: how loudly a string is printed (raised and error-level strings are errors; warnings
    and info are notes; debug traces and NCCL's INFO lines are debug)."""
    kind, level = rec.get("kind", ""), rec.get("level", "")
    if level == "debug" or kind in ("nccl_info", "gloo_log_debug"):
        return "debug"
    if kind == "help" and _WARN_TOPIC.search(rec.get("exc", "")):
        return "note"  # an Open MPI help topic that warns or documents (deprecated parameters, usage examples)
    if kind in ("print", "log") and not level:  # printed to stdout: an error when it says so
        return "error" if _SAYS_ERROR.match(text) else "note"
    if kind in ("log", "print", "event") or kind.startswith("gloo_log"):
        return "error" if level in ERROR_LEVELS else "note"
    if kind in ("warn", "const"):
        return "note"
    if kind == "assign":  # a message kept in a variable: an error when it reads as one
        return "error" if _ERRORISH.search(text) else "note"
    if kind == "cstring" and re.match(r"(?i)(?:warning|note|info)\b|.*\bwarn", text):
        return "note"  # a TORCH_WARN text (the binary does not say which macro printed it)
    return "error" if kind in ERROR_KINDS or level in ERROR_LEVELS else "note"


def derive(rec: dict, ancestors=None) -> Label:
    """The role, category and implies of one extracted string (see the module docstring); `ancestors(exc)` gives
    an exception class's bases (catalog.ancestors) when known."""
    text = plain(rec.get("text", ""))
    lib, file, kind = rec.get("lib", ""), rec.get("file", ""), rec.get("kind", "")
    if kind == "symbol":
        if re.search(r"(?i)checkTimeout|watchdog|heartbeat|Timeout", text):
            return Label("consequence", "collective_timeout", ("waiting_in_collective",), "symbol:watchdog")
        return Label("benign", "no_failure", ("none",), "symbol")
    loud = tier(rec, text)
    benign_words = loud != "error" and bool(BENIGN_WORDS.search(text))
    for rid, rx, cat, implies in ROOT_WORDS:
        if rx.search(text):
            if loud == "error" or (rid in OUTSIDE and not benign_words and
                                   (kind in ("const", "event") or loud == "note" and _ACTION.search(text))):
                return Label("root", cat, implies, rid)
            # a handled failure (an OOM retried, an overflow skipped) keeps its area; a note is no failure
            return Label("benign", cat if benign_words else "no_failure", ("handled",) if benign_words else ("none",),
                         f"{rid}:{loud}")
    for rid, rx, cat, implies in CONSEQUENCE_WORDS:
        if rx.search(text):
            if loud == "error" or (loud == "note" and not benign_words):
                return Label("consequence", cat, implies, rid)
            return Label("benign", "no_failure", ("handled",) if benign_words else ("none",), f"{rid}:{loud}")
    if loud != "error":
        return Label("benign", "no_failure", ("handled",) if benign_words else ("none",),
                     "benign-words" if benign_words else f"tier:{loud}")
    for rid, rx, cat, implies in AREA_WORDS:
        if rx.search(text):
            return Label("root", cat, implies, "area:" + rid)
    classes = _classes(rec.get("exc", ""), ancestors)
    for names, cat, implies in CLASS_CATEGORY:
        if classes & names:
            return Label("root", cat, implies, "class:" + sorted(classes & names)[0])
    usage = bool(classes & USAGE_CLASSES)
    for rid, sub_lib, frx, cat in SUBSYSTEMS:
        if (sub_lib is None or sub_lib == lib) and frx.search(file):
            if usage and cat != "ddp_usage_error" or (rid == "metrics" and not _METRICS_IO.search(text)):
                break
            return Label("root", cat, _DEFAULT_IMPLIES.get(cat, ("crashed",)), "subsystem:" + rid)
    cat = _LIB_CATEGORY.get(lib)
    if cat and not usage:
        return Label("root", cat, ("crashed",), "library:" + lib)
    return Label("root", "rank_crash", ("crashed",), "usage-class" if usage else "default")

"""The fuzz target and its input strategies (hypothesis): arbitrary bytes and mutated real samples pushed through
discovery, every registered parser, the table builder, the rules and the reports.

Used by `fuzz/run.py` (large budgets, counts) and by `tests/test_fuzz_*.py` (small budgets in CI).
"""
from __future__ import annotations

import gzip
import os
import pickle
import signal
import tempfile
import time
import traceback
from dataclasses import dataclass, field

from hypothesis import strategies as st

from postmortem.parsers.base import ParseResult, parse_source, registered_kinds
from postmortem.tables import schema
from postmortem.ingest.discover import KINDS, Source, discover

# File names that steer path hints (rank, attempt, host/pid) and kind sniffing, per kind.
NAMES: dict[str, list[str]] = {
    "rank_log": ["rank3.log", "logs/attempt_0/1/stderr.log", "console.txt", "slurm-42.out", "worker-7.log"],
    "nccl_log": ["nccl.node-1.4242", "nccl_debug.txt"],
    "pyspy": ["pyspy_rank0.txt", "stacks/rank_1.txt"],
    "pyspy_json": ["pyspy_rank2.json"],
    "nvidia_smi": ["nvidia-smi.csv", "nvidia_smi.xml", "smi.txt"],
    "dmesg": ["dmesg.txt", "kern.log", "syslog"],
    "torchrun_error": ["logs/attempt_0/0/error.json", "torchrun_error.json"],
    "flight_recorder": ["nccl_trace_rank_0", "fr/fr_rank_1.json", "trace_dump_2"],
    "host_memory": ["free.txt", "meminfo.log", "vmstat.log"],
    "stack_dump": ["faulthandler_rank0.txt", "stacks.txt"],
    "collect_manifest": ["manifest.json"],
    "json": ["config.json"],
    "launch_config": ["launch.sh", "train_config.yaml", "run.toml"],
    "binary": ["core.bin"],
    "unknown": ["notes"],
    "notebook": ["run.ipynb", "train.ipynb", "notebooks/launch-ddp.ipynb"],
}

# Byte strings that the parsers look for, and numbers/encodings that break naive code.
TOKENS: list[bytes] = [
    b"Traceback (most recent call last):\n", b'  File "/x/train.py", line 12, in step\n', b"    loss.backward()\n",
    b"RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n", b"[rank3]: ", b"[default0]:", b"3: ",
    b"[1,3]<stdout>:", b"node-1: ", b"NCCL INFO ", b"NCCL WARN ", b"host:123:456 [0] NCCL INFO comm 0x1 rank 0 nranks 8 ",
    b"Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    b"Timeout(ms)=600000) ran for 600123 milliseconds", b"Root Cause (first observed failure):\n", b"[0]:\n",
    b"  rank      : 1 (local_rank: 1)\n", b"  exitcode  : -9 (pid: 77)  (SIGKILL)\n", b"=" * 54 + b"\n",
    b"Thread 0x7F01 (active+gil): \"MainThread\"\n", b"    forward (model.py:33)\n", b"Process 77: python train.py\n",
    b"Python v3.11.7 (/usr/bin/python3)\n", b"[ 123.456] Out of memory: Killed process 77 (python)\n",
    b"NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n", b"| 0 NVIDIA A100 | 40000MiB / 81920MiB |\n",
    b"memory.used [MiB], memory.total [MiB]\n", b"<nvidia_smi_log>", b"<!DOCTYPE x [<!ENTITY a \"aaaa\">]>", b"&a;",
    b'{"message": {"message": "x", "extraInfo": {"py_callstack": "T", "timestamp": "1"}}}', b'"entries": [',
    b'"pg_config"', b'"version": "2.10"', b'"frames": [', b'"thread_id": ', b"\x80\x04\x95", b"\x80\x02}q\x00",
    b"cos\nsystem\n(S'echo fuzz'\ntR.", b"\x00", b"\r", b"\n", b"\r\n", b"\t", b"\x1b[31m", b"\x1b]0;t\x07",
    b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x80\xa8",
    b"99999999999999999999999999999", b"-1", b"-9223372036854775809", b"1e309", b"nan", b"inf", b"NaN", b"0x",
    b"1.2.3.4:99999", b"{", b"}", b"[", b"]", b'"', b"\\", b":", b"%", b"|", b"\xe2\x96\x88", b"step 7/10 ",
    b"loss=nan ", b"Epoch 3: 45%|", b"2024-01-02 03:04:05,678 ", b"[2024-01-02 03:04:05] ", b"E1121 13:18:24.116000 ",
]


class FuzzTimeout(BaseException):
    """One input ran past its time limit (BaseException: parse_source must not swallow it)."""


@dataclass
class FuzzInput:
    """One generated input: which file name it is written under, the kind forced on it, bytes, and a wrapping."""
    kind: str
    name: str
    data: bytes
    wrap: str = "plain"


@dataclass
class Outcome:
    """What one input did: failures found (signature -> message) and the time it took."""
    failures: dict[str, str] = field(default_factory=dict)
    sniffed: str | None = None
    seconds: float = 0.0
    cpu_seconds: float = 0.0


# The time an input may take: CPU seconds of the calling thread (what the shared machine's load does not inflate
# much, as it does wall time) for discovery, every parser and, where asked, tables, rules and reports. A fixed part and a part
# per MB of input: work that grows faster than the input (a regex that backtracks over a long line) goes over it.
# Ordinary inputs take well under 0.1 s; the budget of the 66 KB line that once took 9 s is 0.63 s, of 8x it 1.56 s.
CPU_BASE_S = 0.5
CPU_PER_MB_S = 2.0


def cpu_budget(nbytes: int) -> float:
    """CPU seconds an input of `nbytes` may take (see CPU_BASE_S)."""
    return CPU_BASE_S + CPU_PER_MB_S * nbytes / 1e6


def all_kinds() -> list[str]:
    """Every kind discovery can produce or a parser is registered for."""
    return sorted(set(KINDS) | set(registered_kinds()))


# ---------------------------------------------------------------------------------------------------- seeds

def synthetic_seeds() -> dict[str, list[bytes]]:
    """Small well-formed inputs per structured kind, so mutations start from something each parser accepts."""
    fr = {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
          "pg_status": {"0": {"last_enqueued_collective": 3, "last_started_collective": 3,
                              "last_completed_collective": 2}},
          "entries": [{"record_id": i, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": i,
                       "p2p_seq_id": 0, "op_id": i, "profiling_name": "nccl:all_reduce", "time_created_ns": 10 ** 18,
                       "input_sizes": [[4]], "output_sizes": [[4]], "state": "completed" if i < 3 else "scheduled",
                       "timeout_ms": 600000, "frames": [{"name": "step", "filename": "train.py", "line": 3}]}
                      for i in range(4)]}
    import json
    pyspy = [{"pid": 77, "thread_id": 139, "thread_name": "MainThread", "os_thread_id": 77, "active": True,
              "owns_gil": True, "frames": [{"name": "all_reduce", "filename": "/torch/distributed.py",
                                            "module": None, "short_filename": "distributed.py", "line": 2,
                                            "locals": [{"name": "x", "addr": 1, "arg": True, "repr": "1"}]}],
              "process_info": None}]
    err = {"message": {"message": "ValueError: bad", "extraInfo": {
        "py_callstack": "Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\nValueError: bad\n",
        "timestamp": "1795267126"}, "errorCode": 1}}
    smi_xml = (b'<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n<nvidia_smi_log>'
               b"<timestamp>Tue Nov 21 13:00:00 2026</timestamp><attached_gpus>1</attached_gpus>"
               b'<gpu id="00000000:3B:00.0"><product_name>NVIDIA A100</product_name><minor_number>0</minor_number>'
               b"<fb_memory_usage><total>81920 MiB</total><used>40000 MiB</used></fb_memory_usage>"
               b"<utilization><gpu_util>100 %</gpu_util></utilization><temperature><gpu_temp>61 C</gpu_temp>"
               b"</temperature><processes><process_info><pid>77</pid><process_name>python</process_name>"
               b"<used_memory>39000 MiB</used_memory></process_info></processes></gpu></nvidia_smi_log>\n")
    smi_csv = (b"timestamp, index, pci.bus_id, memory.used [MiB], memory.total [MiB], utilization.gpu [%]\n"
               b"2026/11/21 13:00:00.000, 0, 00000000:3B:00.0, 40000 MiB, 81920 MiB, 100 %\n"
               b"2026/11/21 13:00:05.000, 0, 00000000:3B:00.0, [Unknown Error], 81920 MiB, [N/A]\n")
    manifest = {"collector": "postmortem-collect", "exit_code": -9, "signal": "SIGKILL", "started": 1, "ended": 2,
                "env_added": {"NCCL_DEBUG": "INFO"}, "files": ["rank0.log"]}
    return {
        "collect_manifest": [json.dumps(manifest, indent=1).encode()],
        "flight_recorder": [pickle.dumps(fr, protocol=4), json.dumps(fr).encode()],
        "pyspy_json": [json.dumps(pyspy).encode()],
        "torchrun_error": [json.dumps(err).encode()],
        "nvidia_smi": [smi_xml, smi_csv],
    }


def load_seeds(dirs: list[str], max_bytes: int = 1 << 20) -> dict[str, list[bytes]]:
    """Files under `dirs` grouped by the kind discovery gives them (case.json labels and scripts skipped)."""
    by_kind: dict[str, list[bytes]] = {k: list(v) for k, v in synthetic_seeds().items()}
    for d in dirs:
        if not os.path.isdir(d):
            continue
        for src in discover(d):
            if src.problem or src.source.endswith(("case.json", ".py", ".sh", "expected.json")):
                continue
            try:
                with open(src.path, "rb") as fh:
                    data = fh.read(max_bytes)
            except OSError:
                continue
            if src.compression == "gzip":
                try:
                    data = gzip.decompress(data)[:max_bytes]
                except (OSError, EOFError):
                    continue
            by_kind.setdefault(src.kind, []).append(data)
    return by_kind


# ---------------------------------------------------------------------------------------------------- strategies

def mutate(rnd, data: bytes, max_size: int) -> bytes:
    """Apply a few random byte-level mutations: flips, token inserts, deletions, duplications, truncation.

    `rnd` is a random.Random that hypothesis hands out (st.randoms), so runs replay from hypothesis' seed while the
    per-mutation choices stay cheap (drawing each through hypothesis costs more than parsing the input).
    """
    buf = bytearray(data)
    for _ in range(rnd.choice((0, 1, 1, 2, 2, 3, 4, 6, 8))):
        op = rnd.choice(("flip", "token", "token", "bytes", "delete", "dup", "truncate", "lines"))
        pos = rnd.randint(0, len(buf))
        if op == "flip" and buf:
            i = min(pos, len(buf) - 1)
            buf[i] ^= rnd.randint(1, 255)
        elif op == "token":
            buf[pos:pos] = rnd.choice(TOKENS) * rnd.choice((1, 1, 1, 2, 50))
        elif op == "bytes":
            buf[pos:pos] = rnd.randbytes(rnd.randint(1, 64))
        elif op == "delete":
            del buf[pos:pos + rnd.randint(1, 256)]
        elif op == "dup":
            piece = bytes(buf[pos:pos + rnd.randint(1, 512)])
            buf[pos:pos] = piece * rnd.randint(1, 8)
        elif op == "truncate":
            del buf[pos:]
        elif op == "lines":  # CRLF line ends, or a reversed stretch
            j = rnd.randint(0, len(buf))
            a, b = sorted((pos, j))
            buf[a:b] = bytes(buf[a:b]).replace(b"\n", b"\r\n") if rnd.random() < 0.5 else bytes(buf[a:b])[::-1]
        if len(buf) > max_size:
            del buf[max_size:]
    return bytes(buf)


def fuzz_inputs(seeds: dict[str, list[bytes]], kinds: list[str] | None = None, max_size: int = 8192):
    """Strategy of FuzzInput: a forced kind, a file name for it, and arbitrary or mutated-sample bytes."""
    kinds = kinds or all_kinds()
    every_seed = [s for lst in seeds.values() for s in lst] or [b""]

    @st.composite
    def build(draw):
        kind = draw(st.sampled_from(kinds))
        name = draw(st.sampled_from(NAMES.get(kind, NAMES["unknown"]) + ["rank0.log", "x"]))
        mode = draw(st.sampled_from(("bytes", "mutate", "mutate", "mutate", "window", "splice") * 4 + ("long",)))
        wrap = draw(st.sampled_from(("plain",) * 8 + ("gzip", "gzip-truncated", "utf16")))
        if mode == "bytes":
            return FuzzInput(kind, name, draw(st.binary(max_size=max_size)), wrap)
        rnd = draw(st.randoms(use_true_random=False))
        pool = seeds.get(kind) or every_seed
        seed = rnd.choice(pool)
        if mode == "window" and len(seed) > max_size:
            start = rnd.randrange(len(seed))
            nl = seed.rfind(b"\n", 0, start)
            start = nl + 1 if nl >= 0 and rnd.random() < 0.5 else start
            seed = seed[start:start + max_size]
        elif len(seed) > max_size:
            seed = seed[:max_size]
        if mode == "long":
            # One line as long as the line cap (or longer): quadratic regexes and per-line copies show up here.
            piece = mutate(rnd, seed[rnd.randrange(len(seed) or 1):][:2048], 2048).replace(b"\n", b" ") or b"x"
            # around the line cap, and 2x and 8x the line found slow (../shared/adversarial/long-line-rank3.log)
            target = rnd.choice((20_000, 66_000, 70_000, 132_000, 528_000))
            line = (piece * (target // len(piece) + 1))[:target]
            return FuzzInput(kind, name, seed[:256] + b"\n" + line + b"\n" + seed[-256:], wrap)
        if mode == "splice":
            other = rnd.choice(every_seed)
            cut = rnd.randint(0, len(seed))
            seed = seed[:cut] + other[: max(0, max_size - cut)]
        return FuzzInput(kind, name, mutate(rnd, seed, max_size), wrap)

    return build()


# ---------------------------------------------------------------------------------------------------- target

def _encode(inp: FuzzInput) -> bytes:
    if inp.wrap == "gzip":
        return gzip.compress(inp.data, compresslevel=1, mtime=0)
    if inp.wrap == "gzip-truncated":
        z = gzip.compress(inp.data, compresslevel=1, mtime=0)
        return z[: max(1, len(z) * 2 // 3)]
    if inp.wrap == "utf16":
        return inp.data.decode("utf-8", "replace").encode("utf-16")
    return inp.data


def _bad_problems(res: ParseResult) -> list[tuple[str, str]]:
    """Problems that reveal a parser bug (an unexpected exception, memory blow-up), as (signature, message)."""
    bad = []
    for p in res.problems:
        if " failed: " in p or "ran out of memory" in p:
            head = p.split(" failed: ", 1)
            module = head[0] if len(head) == 2 else p.split(":", 1)[0]
            etype = head[1].split(":", 1)[0] if len(head) == 2 else "MemoryError"
            at = p.rsplit("(at ", 1)[-1].rstrip(")") if "(at " in p else ""
            bad.append((f"parser:{module}:{etype}:{at}", p[:500]))
    return bad


def _check_rows(res: ParseResult) -> list[tuple[str, str]]:
    bad = []
    for table, rows in res.rows.items():
        if table not in schema.TABLE_COLUMNS:
            bad.append((f"schema:unknown-table:{table}", f"unknown table {table}"))
            continue
        allowed = set(schema.columns(table))
        for row in rows[:1000]:
            extra = set(row) - allowed
            if extra:
                bad.append((f"schema:{table}:{sorted(extra)[0]}", f"table {table}: unknown columns {sorted(extra)}"))
                break
    return bad


def _alarm(_sig, _frame):
    raise FuzzTimeout()


def exercise(inp: FuzzInput, workdir: str, pipeline: bool = False, html: bool = False,
             timeout_s: float = 20.0, budget: bool = True) -> Outcome:
    """Write one input to disk, then discover, parse (sniffed and forced kind), check rows, and optionally run the
    whole pipeline and reports. Exceptions escaping a stage boundary, parser exceptions and (with `budget`) an input
    that took more CPU time than cpu_budget() allows are all recorded."""
    out = Outcome()
    t0 = time.perf_counter()
    # this thread's CPU time: the process's would also count threads earlier tests left running (dask's event loop,
    # a preload thread), which made the budget fail on work that was not this input's
    c0 = time.thread_time()
    path = os.path.join(workdir, inp.name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(_encode(inp))
    use_alarm = timeout_s > 0 and hasattr(signal, "setitimer")
    if use_alarm:
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
    stage = "discover"
    try:
        sources = discover(path)
        out.sniffed = sources[0].kind if sources else None
        stage = "parse_source"
        results = [parse_source(s) for s in sources]
        forced = []
        for s in sources:
            if inp.kind != s.kind and inp.kind in registered_kinds():
                f = Source(**{**s.to_dict(), "kind": inp.kind, "problem": None})
                forced.append((f, parse_source(f)))
        for res in results + [r for _, r in forced]:
            for sig, msg in _bad_problems(res) + _check_rows(res):
                out.failures.setdefault(sig, msg)
        if pipeline:
            stage = "pipeline"
            _pipeline(sources + [f for f, _ in forced], results + [r for _, r in forced], workdir, html)
    except FuzzTimeout:
        out.failures[f"timeout:{stage}:{inp.kind}"] = f"over {timeout_s}s in {stage}"
    except Exception as exc:  # noqa: BLE001 - the point: anything escaping a boundary is a finding
        tb = traceback.extract_tb(exc.__traceback__)
        where = tb[-1] if tb else None
        at = f"{where.filename.rsplit('/', 1)[-1]}:{where.lineno}" if where else "?"
        out.failures[f"crash:{stage}:{type(exc).__name__}:{at}"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        try:
            os.unlink(path)
        except OSError:
            pass
    out.seconds = time.perf_counter() - t0
    out.cpu_seconds = time.thread_time() - c0
    if budget and out.cpu_seconds > cpu_budget(len(inp.data)) and not out.failures:
        out.failures[f"slow:{inp.kind}:{out.sniffed}"] = (f"{out.cpu_seconds:.2f} s of CPU for {len(inp.data)} bytes "
                                                          f"(budget {cpu_budget(len(inp.data)):.2f} s)")
    return out


def longest_line_repeated(data: bytes, times: int) -> bytes:
    """`data` with its longest line repeated `times` times (a hostile line made longer, its shape kept)."""
    lines = data.split(b"\n")
    i = max(range(len(lines)), key=lambda k: len(lines[k]))
    lines[i] = lines[i] * times
    return b"\n".join(lines)


def saved_inputs(directory: str) -> list[tuple[str, FuzzInput]]:
    """The input saved in `directory` (input.bin + meta.json), and, where meta.json asks for it
    (`"repeat_longest_line": [2, 8]`), the same input with its longest line repeated that many times."""
    import json
    with open(os.path.join(directory, "meta.json")) as fh:
        meta = json.load(fh)
    with open(os.path.join(directory, "input.bin"), "rb") as fh:
        data = fh.read()
    out = [(meta["signature"], FuzzInput(meta["kind"], meta["name"], data, meta["wrap"]))]
    for times in meta.get("repeat_longest_line", ()):
        out.append((f"{meta['signature']} (longest line x{times})",
                    FuzzInput(meta["kind"], meta["name"], longest_line_repeated(data, times), meta["wrap"])))
    return out


def warm(workdir: str) -> None:
    """Imports, compiled regexes and templates, once: so that the first input's time is its own."""
    exercise(FuzzInput("rank_log", "rank0.log", b"RuntimeError: x\n"), workdir, pipeline=True, html=True,
             timeout_s=0, budget=False)


def _pipeline(sources: list, results: list, workdir: str, html: bool) -> None:
    """tables.build -> rules -> verdict -> gaps -> JSON/text (and HTML) of one fuzzed input."""
    from postmortem.api import conclude
    a = conclude(workdir, sources, results)
    import json
    json.loads(a.to_json())
    a.to_text()
    if html:
        a.to_html()


def new_workdir() -> str:
    """A private scratch directory for one fuzzing process."""
    return tempfile.mkdtemp(prefix="postmortem-fuzz-")

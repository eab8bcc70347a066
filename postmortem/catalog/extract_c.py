"""Message extraction from C/C++ sources and text resources (build time only): printf-style logging and error calls
(NCCL/RCCL WARN/INFO, HIP/ROCr logging, Slurm's error/info/fatal, Open MPI's opal_output, Horovod's LOG streams),
thrown exceptions, error-string tables (`case X: return "..."`, `{ ESLURM_X, "..." }`), gloo's enforce/throw
macros, Open MPI/PRRTE help files, and message-like strings of shared libraries (`strings`).

Every message becomes a template as in extract.py: literal text with each run-time value a `⟪hint⟫` placeholder.
"""
from __future__ import annotations

import re

from postmortem.catalog.extract import MAX_TEXT, Msg, literal_share, ph

# printf conversions as C prints them (%p pointers, %m errno text in glibc/Slurm, %zu sizes)
_C_PCT_RE = re.compile(r"%[-#0 +']*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|ll|[hlLqjzt])?([diouxXeEfFgGaAcspm%])")
_C_STR_RE = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_LIT = r'"(?:[^"\\\n]|\\.)*"'


def _c_unescape(s: str) -> str:
    return s.replace('\\"', '"').replace("\\n", " ").replace("\\t", " ").replace("\\\\", "\\")


def c_call_args(src: str, start: int, limit: int = 4000) -> tuple[list[str], int] | None:
    """The top-level comma-separated arguments of the call whose '(' is at `start`, and the end offset."""
    depth, i, cur, args = 0, start, [], []
    end = min(len(src), start + limit)
    while i < end:
        c = src[i]
        if c == '"':
            m = _C_STR_RE.match(src, i)
            if not m:
                return None
            cur.append(m.group(0))
            i = m.end()
            continue
        if c == "'":
            j = src.find("'", i + 1 + (src[i + 1:i + 2] == "\\"))
            if j < 0:
                return None
            cur.append(src[i:j + 1])
            i = j + 1
            continue
        if c == "/" and src.startswith("//", i):
            i = src.find("\n", i)
            i = end if i < 0 else i
            continue
        if c == "/" and src.startswith("/*", i):
            j = src.find("*/", i)
            i = end if j < 0 else j + 2
            continue
        if c in "([{":
            depth += 1
            if depth > 1:
                cur.append(c)
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append("".join(cur).strip())
                return args, i + 1
            cur.append(c)
        elif c == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    return None


def printf_template(arg: str) -> str | None:
    """A printf format argument (adjacent literals, PRIu64-style macros) -> template; None if no literal."""
    pieces = re.findall(_LIT + r"|\bPRI[diouxX](?:8|16|32|64|PTR|MAX)\b|\b[A-Z][A-Z0-9_]{2,}\b", arg)
    if not pieces or not any(p.startswith('"') for p in pieces):
        return None
    out = []
    for p in pieces:
        if p.startswith('"'):
            out.append(_c_unescape(p[1:-1]))
        elif p.startswith("PRI") and len(p) > 3 and p[3] in "diouxX":
            out.append(p[3])
        else:  # a macro that expands to text (NCCL_NET_IB_..., a version string): a value
            out.append("%s")
    return c_format(''.join(out))


def c_format(fmt: str) -> str:
    """A printf format -> template."""
    return _C_PCT_RE.sub(lambda m: "%" if m.group(1) == "%" else ph("%" + m.group(1)), fmt)


def concat_template(args: list[str]) -> str:
    """Stream-style arguments (`"rank ", rank, " failed"`) -> template."""
    out = []
    for a in args:
        lits = re.findall(_LIT, a)
        if lits and re.fullmatch(r'\s*(?:' + _LIT + r'\s*)+', a):
            out.append("".join(_c_unescape(x[1:-1]) for x in lits))
        else:
            out.append(ph(a))
    return "".join(out)


def expr_template(arg: str) -> str | None:
    """The message an expression builds: `"a" + x + "b"`, `c10::str("a", x)`, `fmt::format("a {}", x)`,
    `std::string("a") + x`; None without a literal."""
    if not re.search(_LIT, arg):
        return None
    m = re.match(r"^\s*([\w:]+)\s*\(", arg)
    if m and m.group(1) not in ("std::string", "string"):
        got = c_call_args(arg, m.end() - 1)
        if got and got[0]:
            if m.group(1).endswith(("format", "printf")) and re.search(_LIT, got[0][0]):
                t = concat_template([got[0][0]])
                return re.sub(r"\{[^{}]{0,20}\}", lambda _m: ph("{}"), t) if "{" in t else printf_template(got[0][0])
            return concat_template(got[0])
    parts = [a.strip() for a in re.split(r"\s\+\s(?=(?:[^\"]*\"[^\"]*\")*[^\"]*$)", arg)]
    parts = [re.sub(r"^(?:std::)?string\((" + _LIT + r")\)$", r"\1", p) for p in parts]
    return concat_template(parts)


def _line(src: str, pos: int) -> int:
    return src.count("\n", 0, pos) + 1


# Per library: call name -> (kind, index of the format argument, level). A level None takes it from the first
# argument (HIP's ClPrint(amd::LOG_ERROR, ...)).
CALLS = {
    "nccl": {"WARN": ("nccl_warn", 0, "error"), "INFO": ("nccl_info", 1, "info")},
    "hip": {"LogError": ("log", 0, "error"), "LogWarning": ("log", 0, "warning"),
            "LogPrintfError": ("log", 0, "error"), "LogPrintfWarning": ("log", 0, "warning"),
            "LogPrintfInfo": ("log", 0, "info"), "LogInfo": ("log", 0, "info"), "ClPrint": ("log", 2, None),
            "DevLogPrintfError": ("log", 0, "error"), "DevLogError": ("log", 0, "error"),
            "guarantee": ("log", 1, "critical"), "HIP_ERROR_PRINT": ("log", 1, "error"),
            "fprintf": ("print", 1, "error"), "printf": ("print", 0, "")},
    "rocr": {"fprintf": ("print", 1, "error"), "printf": ("print", 0, ""), "pr_err": ("log", 0, "error"),
             "pr_warn": ("log", 0, "warning"), "pr_info": ("log", 0, "info"), "pr_debug": ("log", 0, "debug"),
             "debug_print": ("log", 0, "debug"), "debug_warning": ("log", 0, "warning"),
             "hsa_exception": ("raise", 1, "error")},
    "slurm": {"error": ("log", 0, "error"), "fatal": ("log", 0, "critical"), "fatal_abort": ("log", 0, "critical"),
              "error_in_daemon": ("log", 0, "error"), "info": ("log", 0, "info"), "verbose": ("log", 0, "debug"),
              "debug": ("log", 0, "debug"), "debug2": ("log", 0, "debug"), "debug3": ("log", 0, "debug"),
              "debug4": ("log", 0, "debug"), "debug5": ("log", 0, "debug"), "log_flag": ("log", 1, "debug"),
              "warning": ("log", 0, "warning"), "sched_error": ("log", 0, "error"),
              "sched_info": ("log", 0, "info"), "slurm_perror": ("log", 0, "error"),
              "fprintf": ("print", 1, "error"), "printf": ("print", 0, "")},
    "openmpi": {"opal_output": ("log", 1, "error"), "opal_output_verbose": ("log", 2, "debug"),
                "prte_output": ("log", 1, "error"), "prte_output_verbose": ("log", 2, "debug"),
                "pmix_output": ("log", 1, "error"), "pmix_output_verbose": ("log", 2, "debug"),
                "orte_output": ("log", 1, "error"), "fprintf": ("print", 1, "error"), "printf": ("print", 0, "")},
    "horovod": {"fprintf": ("print", 1, "error"), "printf": ("print", 0, "")},
}
CALLS["rccl"] = CALLS["nccl"]
_HIP_LEVEL = {"LOG_ERROR": "error", "LOG_WARNING": "warning", "LOG_INFO": "info", "LOG_DEBUG": "debug"}
# `throw std::runtime_error("...")`, `Status::UnknownError("...")` (Horovod), `AMD::hsa_exception(code, "...")`
_THROW_RE = re.compile(r"\bthrow\s+(?:new\s+)?([A-Za-z_][\w:]*)\s*\(")
_STATUS_RE = re.compile(r"\bStatus::(\w+Error|Aborted|InvalidArgument|PreconditionError|UnknownError)\s*\(")
# glog/c10 streams: `LOG(ERROR) << "..." << x;`, `LOG_IF(WARNING, cond) << ...`
_STREAM_RE = re.compile(r"\b(?:LOG|LOG_IF|VLOG|PLOG|LOG_EVERY_N)\s*\(\s*(\w+)[^;{}]{0,80}?\)\s*<<")
_STREAM_LEVEL = {"ERROR": "error", "FATAL": "critical", "WARNING": "warning", "INFO": "info", "DEBUG": "debug"}
# error-string tables
_CASE_RE = re.compile(r"case\s+([A-Za-z_]\w*)\s*:\s*(?:\{\s*)?(?:return|\*?\w+(?:->\w+)?\s*=)\s*((?:" + _LIT +
                      r"\s*)+);")
_ERROR_LABEL = re.compile(r"(?i)err|fail|status|abort|^ESLURM|^ESPANK|^E[A-Z]{2,}$|^nccl[A-Z]|^hip[A-Z]|^cuda[A-Z]")
_TABLE_RE = re.compile(r"\{\s*(E[A-Z0-9_]+|ESLURM_\w+|ESPANK_\w+|SLURM_\w+)\s*,\s*((?:" + _LIT + r"\s*)+)\}")


def _stream_args(src: str, start: int) -> list[str]:
    """The `<<`-separated operands of a stream statement starting at `start`, up to its `;`."""
    end = start
    n = len(src)
    while end < n and end - start < 3000:
        c = src[end]
        if c == '"':
            m = _C_STR_RE.match(src, end)
            end = m.end() if m else end + 1
            continue
        if c == ";":
            break
        end += 1
    return [a.strip() for a in re.split(r"<<(?=(?:[^\"]*\"[^\"]*\")*[^\"]*$)", src[start:end]) if a.strip()]


def c_messages(lib: str, file: str, src: str) -> list[Msg]:
    """The logged, printed, thrown and tabled messages of one C/C++ source of `lib` (a key of CALLS, or any
    library for throws, streams and tables only)."""
    out: list[Msg] = []
    calls = CALLS.get(lib, {})
    if calls:
        names = "|".join(sorted(map(re.escape, calls), key=len, reverse=True))
        for m in re.finditer(r"(?<![\w.>])(" + names + r")\s*\(", src):
            kind, idx, level = calls[m.group(1)]
            got = c_call_args(src, m.end() - 1)
            if not got or len(got[0]) <= idx:
                continue
            args = got[0]
            if m.group(1) == "fprintf" and "stderr" not in args[0]:
                continue
            if level is None:
                level = next((v for k, v in _HIP_LEVEL.items() if k in args[0]), "info")
            t = printf_template(args[idx])
            if t and literal_share(t) >= 4:
                out.append(Msg(lib, file, kind, t[:MAX_TEXT], level, line=_line(src, m.start())))
    for m in _THROW_RE.finditer(src):
        got = c_call_args(src, m.end() - 1)
        if got and got[0]:
            t = expr_template(got[0][0])
            if t and literal_share(t) >= 4:
                out.append(Msg(lib, file, "raise", t[:MAX_TEXT], "error", m.group(1), _line(src, m.start())))
    for m in _STATUS_RE.finditer(src):
        got = c_call_args(src, m.end() - 1)
        if got and got[0]:
            t = expr_template(got[0][0])
            if t and literal_share(t) >= 4:
                out.append(Msg(lib, file, "raise", t[:MAX_TEXT], "error", "Status::" + m.group(1),
                               _line(src, m.start())))
    for m in _STREAM_RE.finditer(src):
        args = _stream_args(src, m.end())
        if not any(re.search(_LIT, a) for a in args):
            continue
        t = concat_template(args)
        if literal_share(t) >= 4:
            out.append(Msg(lib, file, "log", t[:MAX_TEXT], _STREAM_LEVEL.get(m.group(1), "info"),
                           line=_line(src, m.start())))
    for rx in (_CASE_RE, _TABLE_RE):
        for m in rx.finditer(src):
            text = _c_unescape("".join(x[1:-1] for x in re.findall(_LIT, m.group(2))))
            # error and status tables only (not API-id, ELF-machine or attribute-name tables), with a text that
            # says more than the name
            if not _ERROR_LABEL.search(m.group(1)) or text == m.group(1) or len(text) < 4:
                continue
            out.append(Msg(lib, file, "error_string", f"{m.group(1)}: {text}"[:MAX_TEXT], "error", m.group(1),
                           _line(src, m.start())))
    return out


def nccl_messages(file: str, src: str, lib: str = "nccl") -> list[Msg]:
    """WARN(fmt, ...) and INFO(flags, fmt, ...) formats of one NCCL/RCCL source, and its error strings
    (`case ncclSystemError : return "unhandled system error (run with ...)";`)."""
    out = [m for m in c_messages(lib, file, src) if m.kind in ("nccl_warn", "nccl_info", "error_string")]
    for m in out:
        if m.kind == "error_string":
            m.kind = "nccl_result"
    return out


GLOO_MACROS = {"GLOO_ENFORCE": ("gloo_enforce", 1), "GLOO_ENFORCE_EQ": ("gloo_enforce", 2),
               "GLOO_ENFORCE_NE": ("gloo_enforce", 2), "GLOO_ENFORCE_LE": ("gloo_enforce", 2),
               "GLOO_ENFORCE_LT": ("gloo_enforce", 2), "GLOO_ENFORCE_GE": ("gloo_enforce", 2),
               "GLOO_ENFORCE_GT": ("gloo_enforce", 2), "GLOO_ENFORCE_THAT": ("gloo_enforce", 1),
               "GLOO_THROW": ("gloo_throw", 0), "GLOO_THROW_IO_EXCEPTION": ("gloo_throw_io", 0),
               "GLOO_THROW_INVALID_OPERATION_EXCEPTION": ("gloo_throw_invalid", 0),
               "GLOO_ERROR_MSG": ("gloo_error_msg", 0), "GLOO_ERROR": ("gloo_log_error", 0),
               "GLOO_WARN": ("gloo_log_warn", 0), "GLOO_INFO": ("gloo_log_info", 0),
               "GLOO_DEBUG": ("gloo_log_debug", 0)}
GLOO_LEVEL = {"gloo_log_error": "error", "gloo_log_warn": "warning", "gloo_log_info": "info",
              "gloo_log_debug": "debug"}
GLOO_COMPARE = {"GLOO_ENFORCE_EQ": "==", "GLOO_ENFORCE_NE": "!=", "GLOO_ENFORCE_LE": "<=", "GLOO_ENFORCE_LT": "<",
                "GLOO_ENFORCE_GE": ">=", "GLOO_ENFORCE_GT": ">"}


def gloo_messages(file: str, src: str) -> list[Msg]:
    """Messages of gloo's enforce/throw/log macros in one C++ source, as gloo prints them: enforce failures as
    `[enforce fail at FILE:LINE] cond. x vs y` (gloo/common/logging.{h,cc}), throws as `[FILE:LINE] msg`
    (GLOO_ERROR_MSG in gloo/common/error.h)."""
    out = []
    for m in re.finditer(r"\b(GLOO_[A-Z_]+)\s*\(", src):
        spec = GLOO_MACROS.get(m.group(1))
        if not spec:
            continue
        kind, skip = spec
        got = c_call_args(src, m.end() - 1)
        if not got:
            continue
        line = _line(src, m.start())
        where = ph(f"FILE {file}:{line}")
        args = got[0][skip:]
        if len(args) == 1 and args[0].startswith("GLOO_ERROR_MSG"):
            continue  # counted where GLOO_ERROR_MSG itself is found
        msg = concat_template(args) if args else ""
        if kind == "gloo_enforce":
            head = got[0][:skip]
            op = GLOO_COMPARE.get(m.group(1))
            if op:
                t = f"[enforce fail at {where}] {head[0]} {op} {head[1]}. {ph(head[0])} vs {ph(head[1])}"
                t += f". {msg}" if msg else ""
            else:
                t = f"[enforce fail at {where}] {head[0]}. {msg}"
        elif kind in ("gloo_throw", "gloo_throw_io", "gloo_throw_invalid", "gloo_error_msg"):
            t = f"[{where}] {msg}"
        else:
            t = msg
        if literal_share(msg) >= 4 or kind == "gloo_enforce":
            level = GLOO_LEVEL.get(kind, "error")
            out.append(Msg("gloo", file, kind, t[:MAX_TEXT], level, line=line))
    return out


# ---------------------------------------------------------------- Open MPI / PRRTE / PMIx help files

def help_messages(lib: str, file: str, text: str) -> list[Msg]:
    """Every line of every topic of a show_help file (`[topic]` then its text): what mpirun/prterun print when
    they report that topic. A line keeps its topic in `exc` (the topic decides what the lines say)."""
    out = []
    topic = None
    for n, raw in enumerate(text.splitlines(), 1):
        if raw.startswith("#"):
            continue
        m = re.match(r"^\[([^\]]+)\]\s*$", raw)
        if m:
            topic = m.group(1)
            continue
        if topic is None or not raw.strip():
            continue
        t = c_format(raw.strip())
        if literal_share(t) >= 8 and sum(c.isalpha() for c in t) >= 6:
            out.append(Msg(lib, file, "help", t[:MAX_TEXT], "error", topic, n))
    return out


# ---------------------------------------------------------------- shared libraries' strings

_NOT_MESSAGE = re.compile(r"^\s{2,}|->|\bTensor\b|>>>|Optional\[|\bSymInt\b|\bScalarType\b|^`|\bDefault(?: is|:)|"
                          r"\breturn\b|def |__\w+__|\(\*,|\b(?:bool|int|float)\? |[{};]\s*$|^[#@$%&*]|\\x[0-9a-f]")
_MANGLED = re.compile(r"^_Z|^\.|^[\w./-]+\.(?:cpp|h|hpp|cu|cuh|c|cc)$|^[\w:<>,*& ]+$")
_WORD = re.compile(r"[A-Za-z]{2,}")


# Strings of the compiler toolchains linked into some releases (torch 1.13/2.0 carry LLVM) and of generated code:
# they are not messages a training run prints.
_TOOLCHAIN = re.compile(r"llvm|\bLLVM\b|\{anonymous\}|\[with \w+ =|MachineInstr|SelectionDAG|\bDAG\b|DWARF|"
                        r"\bELF\b|\bCOFF\b|Mach-?O|inline asm|relocation|\bopcode|\bsass\b|\bMDNode|"
                        r"dominator|\bvreg|\bSCEV|Bucket \{|itanium|\bNVPTX|\bAMDGPU\b|\bx86\b|"
                        r"\bAArch64|\bRISCV|\bWebAssembly|\bMIR\b|Peephole|\bDFS\b|\bONNX\b|\bopset\b|"
                        r"operator (?:evaluates|computes|takes|produces|returns)|\bGEPs?\b|callbr|assembler|annobin|"
                        r"\bGCC: \(|\bclang version|/rustc/|\.rs\b|"
                        r"^(?:Returns|Gets|Sets|Creates|Constructs|Opens|Retrieves|Computes|Checks|Performs|Produces|Takes|"
                        r"Given) (?:the|a|an|whether|two|one)\b|"
                        r"^(?:from \w+ )?import \w")
_ASSERT_AT = re.compile(r'INTERNAL ASSERT FAILED at "[^"]*":\d+')


def normalize_cstring(s: str) -> str:
    """One text for a C++ message whose build path and line differ per release (TORCH_INTERNAL_ASSERT)."""
    return _ASSERT_AT.sub('INTERNAL ASSERT FAILED at "{}":{}', s)


# Libraries built from Rust, whose string literals `strings` reads glued together (no NUL between them).
RUST_LIBS = frozenset({"safetensors"})


def keep_cstring(lib: str, s: str) -> bool:
    """Whether a string of `lib`'s binary is kept: message-like, or for torch a two-word fragment on a topic of
    training failures (C++ keeps a message's literal pieces apart: `PytorchStreamReader failed `)."""
    if message_like(s, lib in RUST_LIBS):
        return True
    return lib == "torch" and message_like(s, min_words=2) and bool(OLD_ONLY_KEYS.search(s))


def message_like(s: str, glued: bool = False, min_words: int = 3) -> bool:
    """Whether a string of a binary reads as a printed message: words and spaces, not code, paths or symbols
    (`glued`: the binary's literals run together, so an overlong word is several strings)."""
    if len(s) < 12 or len(s) > 800 or " " not in s.strip():
        return False
    if _NOT_MESSAGE.search(s) or (_MANGLED.search(s) and " " not in s) or _TOOLCHAIN.search(s):
        return False
    letters = sum(ch.isalpha() for ch in s)
    if letters < 0.6 * len(s.replace(" ", "")):
        return False
    words = _WORD.findall(s)
    if glued and any(len(w) > 28 for w in words):  # Rust keeps literals without NULs: `strings` glues them
        return False
    return len(words) >= min_words and (s[0].isalnum() or s[0] in "[('\"")


def _demangle_nested(sym: str) -> str | None:
    """`_ZN4c10d16ProcessGroupNCCL8WorkNCCL12checkTimeoutE...` -> `c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout`
    (the nested name only: enough to know which functions a release has, as stack frames print them)."""
    m = re.match(r"_ZN(?:K)?", sym)
    if not m:
        return None
    i, parts = m.end(), []
    while i < len(sym) and sym[i].isdigit():
        j = i
        while j < len(sym) and sym[j].isdigit():
            j += 1
        n = int(sym[i:j])
        parts.append(sym[j:j + n])
        i = j + n
    return "::".join(parts) if len(parts) >= 3 else None


# The c10d functions whose names appear in the C++ stack frames printed with watchdog and store errors.
SYMBOL_KEYS = re.compile(r"^_ZNK?4c10d(?:\d+ProcessGroupNCCL|\d+TCPStore|\d+ProcessGroupGloo|6detail)")


def cstring_messages(lib: str, lib_file: str, lines, keys: re.Pattern | None = None) -> list[Msg]:
    """Message-like strings of one shared library's `strings` dump (those matching `keys` when given), and for
    torch the c10d function names of its symbols."""
    out = []
    seen = set()
    for raw in lines:
        s = raw.rstrip("\n")
        if s.startswith("_ZN"):
            if lib == "torch" and SYMBOL_KEYS.match(s):
                name = _demangle_nested(s)
                if name and name not in seen and not name.endswith(("D1Ev", "C2Ev")):
                    seen.add(name)
                    out.append(Msg(lib, lib_file, "symbol", name))
            continue
        s = normalize_cstring(s)
        if s in seen or not keep_cstring(lib, s) or (keys is not None and not keys.search(s)):
            continue
        seen.add(s)
        t = re.sub(r"\{\}|\{:[^}]*\}", lambda m: ph("{}"), s)
        t = c_format(t) if "%" in t else t
        out.append(Msg(lib, lib_file, "cstring", t[:MAX_TEXT]))
    return out


# Releases whose libtorch_cpu links LLVM, and the topics a string present only there must name to be kept.
LLVM_RELEASES = frozenset({"1.13.1", "2.0.1"})
OLD_ONLY_KEYS = re.compile(
    r"(?i)nccl|gloo|store|socket|barrier|\brank|watchdog|collective|timeout|timed out|process ?group|c10d|elastic|"
    r"allocat|out of memory|memory|PytorchStreamReader|PytorchStreamWriter|zip|checkpoint|storage|serializ|pickl|"
    r"anomaly|returned nan|shared memory|/dev/shm|shm|bus error|signal|heartbeat|flight ?recorder|EADDRINUSE|"
    r"address already|connect|peer|reducer|bucket|unused param|find_unused|mark_variable_ready|finished reduction|"
    r"GradScaler|DataLoader|worker|abort|\bfile\b|disk|No space|errno|fault|desync|sequence number|\bpg\b|"
    r"NaN|inf\b|overflow|mismatch|hang|deadlock|Expected|backward|tensor|CUDA|device|dtype|shape|size")


def drop_toolchain_only(records: list[dict]) -> list[dict]:
    """torch's binary strings found only in the releases that link LLVM are kept when they name a topic of
    training failures (most of the others are LLVM's own)."""
    return [r for r in records if not (r.get("kind") == "cstring" and set(r.get("versions", ())) <= LLVM_RELEASES
                                       and not OLD_ONLY_KEYS.search(r["text"]))]


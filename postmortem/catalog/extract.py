"""Message extraction from library sources (build time only, never imported by the analyzer): the raised, logged and
warned strings of Python sources (read with `ast`), the WARN/INFO formats of NCCL's C sources, the enforce/throw
messages of gloo's C++ sources, and the message-like strings of torch's shared libraries.

A message becomes a template: its literal text with each run-time value replaced by a placeholder `⟪hint⟫` (the
hint is the expression or printf conversion that fills it), so that tests can fill placeholders with sample values.
"""
from __future__ import annotations

import ast
import re
import string
from dataclasses import dataclass, field

PH_OPEN, PH_CLOSE = "\u27ea", "\u27eb"
PLACEHOLDER_RE = re.compile(f"{PH_OPEN}([^{PH_CLOSE}]*){PH_CLOSE}")
MAX_TEXT = 600


def ph(hint: str) -> str:
    """A placeholder carrying a hint of the value that fills it."""
    hint = re.sub(r"\s+", " ", hint)[:60].replace(PH_OPEN, "").replace(PH_CLOSE, "")
    return f"{PH_OPEN}{hint}{PH_CLOSE}"


@dataclass
class Msg:
    """One extracted message of one source file of one release."""
    lib: str
    file: str
    kind: str            # raise, log, warn, print, str, cstring, nccl_warn, nccl_info, gloo_enforce, gloo_throw, ...
    text: str
    level: str = ""      # log level where the kind is log
    exc: str = ""        # exception class where raised
    line: int = 0

    def key(self) -> tuple:
        return (self.lib, self.file, self.kind, self.level, self.exc, self.text)


@dataclass
class ExcClass:
    """An exception class definition: its name and its bases as written."""
    lib: str
    file: str
    name: str
    bases: list[str] = field(default_factory=list)


def literal_share(text: str) -> int:
    """Characters of literal (non-placeholder) text."""
    return len(PLACEHOLDER_RE.sub("", text).strip())


# ---------------------------------------------------------------- Python

LOG_LEVELS = {"error": "error", "warning": "warning", "warn": "warning", "exception": "error", "critical": "critical",
              "fatal": "critical", "info": "info", "debug": "debug", "warning_once": "warning", "warn_once": "warning",
              "info_once": "info", "error_once": "error"}
WARN_FUNCS = {"warn", "rank_zero_warn", "rank_zero_deprecation", "warning_cache_warn", "warn_once"}
INFO_FUNCS = {"rank_zero_info": "info", "rank_zero_debug": "debug", "log_dist": "info", "print_rank_0": "info",
              "print_rank_last": "info", "logger_info": "info", "print_json_dist": "info", "see_memory_usage": "info"}
PRINT_FUNCS = {"print", "maybe_print", "_print", "print0"}


def _dotted(node: ast.AST) -> str:
    """`a.b.C` for a Name/Attribute chain, else ''."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _unparse(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 - a hint only
        return "?"


_PCT_RE = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlLqjzt]*([diouxXeEfFgGcrsa%])")


def _percent_template(fmt: str) -> str:
    """`'rank %d of %s' % x` -> literal text with placeholders."""
    return _PCT_RE.sub(lambda m: "%" if m.group(1) == "%" else ph("%" + m.group(1)), fmt)


def _brace_template(fmt: str, args: list[ast.AST], kwargs: dict[str, ast.AST]) -> str:
    """`'{} of {name}'.format(...)` -> literal text with placeholders (hints from the arguments)."""
    out = []
    auto = 0
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError:
        return fmt
    for lit, name, _spec, _conv in parsed:
        out.append(lit)
        if name is None:
            continue
        hint = name
        if name == "":
            hint = _unparse(args[auto]) if auto < len(args) else "arg"
            auto += 1
        elif name.isdigit() and int(name) < len(args):
            hint = _unparse(args[int(name)])
        elif name in kwargs:
            hint = _unparse(kwargs[name])
        out.append(ph(hint))
    return "".join(out)


_MESSAGE_NAME = re.compile(r"^_?(?:msg|message|reason|err_msg|error_msg|error_message|warn_msg|warning_msg|"
                           r"warning_message|msg_str|err_str)$")


class _PyVisitor(ast.NodeVisitor):
    """Collects messages of one module; resolves a message held in a local name from its assignments."""

    def __init__(self, lib: str, file: str):
        self.lib, self.file = lib, file
        self.msgs: list[Msg] = []
        self.classes: list[ExcClass] = []
        self.scopes: list[dict[str, list[ast.AST]]] = [{}]
        self.class_stack: list[str] = []

    # -- templates
    def text(self, node: ast.AST | None, depth: int = 0) -> str:
        if node is None or depth > 6:
            return ph("?")
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else ph(repr(node.value))
        if isinstance(node, ast.JoinedStr):
            out = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    out.append(str(v.value))
                elif isinstance(v, ast.FormattedValue):
                    out.append(ph(_unparse(v.value)))
            return "".join(out)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.text(node.left, depth + 1) + self.text(node.right, depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, (ast.Constant,
                                                                                                  ast.BinOp)):
            left = self.text(node.left, depth + 1)
            return _percent_template(left) if "%" in left else left
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
            base = node.func.value
            kwargs = {k.arg: k.value for k in node.keywords if k.arg}
            if isinstance(base, ast.Constant) and isinstance(base.value, str):
                return _brace_template(base.value, node.args, kwargs)
            if isinstance(base, (ast.BinOp, ast.Name)):  # ("a {} " + "b {}").format(x, y)
                return _brace_template(self.text(base, depth + 1), node.args, kwargs)
            return ph(_unparse(node))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("strip",
                                                                                                      "rstrip"):
            return self.text(node.func.value, depth + 1)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join" and \
                isinstance(node.func.value, ast.Constant) and node.args and \
                isinstance(node.args[0], (ast.List, ast.Tuple)):
            sep = str(node.func.value.value)
            return sep.join(self.text(e, depth + 1) for e in node.args[0].elts)
        if isinstance(node, ast.Name):
            for scope in reversed(self.scopes):
                vals = scope.get(node.id)
                if vals:
                    # a message built in steps (`msg = "..."; msg += f"..."`): the parts in order
                    return "".join(self.text(v, depth + 1) for v in vals[-4:])
            return ph(node.id)
        return ph(_unparse(node))

    # -- scopes
    def _visit_scope(self, node: ast.AST) -> None:
        self.scopes.append({})
        self.generic_visit(node)
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _visit_scope

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        bases = [_dotted(b) for b in node.bases if _dotted(b)]
        if bases:
            self.classes.append(ExcClass(self.lib, self.file, node.name, bases))
        self.class_stack.append(node.name)
        self._visit_scope(node)
        self.class_stack.pop()

    def visit_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and _stringy(node.value):
            self.scopes[-1][node.targets[0].id] = [node.value]
            # a message built into a variable and handed to a helper we do not follow (`reason = f"..."`;
            # `self._log_info(trainer, reason)`): kept when the name says it is a message
            if _MESSAGE_NAME.match(node.targets[0].id):
                text = self.text(node.value)
                if literal_share(text) >= 12:
                    self.msgs.append(Msg(self.lib, self.file, "assign", text[:MAX_TEXT], line=node.lineno))
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name) and isinstance(node.op, ast.Add) and _stringy(node.value):
            self.scopes[-1].setdefault(node.target.id, []).append(node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if isinstance(node.target, ast.Name) and node.value is not None and _stringy(node.value):
            self.scopes[-1][node.target.id] = [node.value]
        self.generic_visit(node)

    # -- messages
    def add(self, kind: str, node: ast.AST | None, lineno: int, level: str = "", exc: str = "",
            lazy_args: bool = False) -> None:
        if node is None:
            return
        text = self.text(node)
        if lazy_args and "%" in text:  # logger.info("rank %s", rank): logging applies the % itself
            text = _percent_template(text)
        if literal_share(text) < 4:
            return
        self.msgs.append(Msg(self.lib, self.file, kind, text[:MAX_TEXT], level, exc, lineno))

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call):
            name = _dotted(exc.func)
            arg = exc.args[0] if exc.args else next((k.value for k in exc.keywords if k.arg in ("msg", "message")),
                                                    None)
            if name:
                self.add("raise", arg, node.lineno, exc=name)
        self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> None:
        # an exception class's __str__ builds the printed message (numpy's _ArrayMemoryError)
        if self.class_stack and _stringy(node.value) and re.search(r"(Error|Exception)$", self.class_stack[-1]):
            self.add("str", node.value, node.lineno, exc=self.class_stack[-1])
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        recv = _dotted(func.value).lower() if isinstance(func, ast.Attribute) else ""
        first = node.args[0] if node.args else None
        if isinstance(func, ast.Attribute) and name in LOG_LEVELS and ("log" in recv or recv.endswith("logging")):
            self.add("log", first, node.lineno, level=LOG_LEVELS[name], lazy_args=len(node.args) > 1)
        elif isinstance(func, ast.Attribute) and name == "log" and "log" in recv and len(node.args) >= 2:
            self.add("log", node.args[1], node.lineno, level=_unparse(node.args[0]).split(".")[-1].lower(),
                     lazy_args=len(node.args) > 2)
        elif name in WARN_FUNCS and (isinstance(func, ast.Name) or recv in ("warnings", "self", "")):
            self.add("warn", first, node.lineno, level="warning")
        elif name in INFO_FUNCS:
            self.add("log", first, node.lineno, level=INFO_FUNCS[name], lazy_args=len(node.args) > 1)
        elif name in PRINT_FUNCS and isinstance(func, ast.Name):
            self.add("print", first, node.lineno)
        self.generic_visit(node)


def _stringy(node: ast.AST | None) -> bool:
    """Whether an expression builds a string we can template."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return _stringy(node.left) or _stringy(node.right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("format", "strip",
                                                                                               "join"):
        return isinstance(node.func.value, (ast.Constant, ast.JoinedStr, ast.BinOp))
    return False


def python_messages(lib: str, file: str, source: str | bytes) -> tuple[list[Msg], list[ExcClass]]:
    """Messages and class definitions of one Python (or .pyi) source; ([], []) when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return [], []
    v = _PyVisitor(lib, file)
    v.visit(tree)
    return v.msgs, v.classes


# ---------------------------------------------------------------- C / C++

_C_STR_RE = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def _c_unescape(s: str) -> str:
    return s.replace('\\"', '"').replace("\\n", " ").replace("\\t", " ").replace("\\\\", "\\")


def _c_call_args(src: str, start: int, limit: int = 4000) -> tuple[list[str], int] | None:
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
            j = src.find("'", i + 1 + (src[i + 1] == "\\"))
            cur.append(src[i:j + 1])
            i = j + 1
            continue
        if c == "/" and src.startswith("//", i):
            i = src.find("\n", i)
            i = end if i < 0 else i
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


def _printf_template(arg: str) -> str | None:
    """A printf format argument (adjacent literals, PRIu64-style macros) -> template; None if no literal."""
    pieces = re.findall(r'"(?:[^"\\\n]|\\.)*"|\bPRI[diouxX](?:8|16|32|64|PTR|MAX)\b', arg)
    if not pieces or not any(p.startswith('"') for p in pieces):
        return None
    fmt = "".join(_c_unescape(p[1:-1]) if p.startswith('"') else p[3] for p in pieces)
    return _PCT_RE.sub(lambda m: "%" if m.group(1) == "%" else ph("%" + m.group(1)), fmt)


def _concat_template(args: list[str]) -> str:
    """Stream-style arguments (`"rank ", rank, " failed"`) -> template."""
    out = []
    for a in args:
        lits = re.findall(r'"(?:[^"\\\n]|\\.)*"', a)
        if lits and re.fullmatch(r'\s*(?:"(?:[^"\\\n]|\\.)*"\s*)+', a):
            out.append("".join(_c_unescape(x[1:-1]) for x in lits))
        else:
            out.append(ph(a))
    return "".join(out)


NCCL_MACROS = {"WARN": ("nccl_warn", 0), "INFO": ("nccl_info", 1), "TRACE": (None, 0)}


def nccl_messages(file: str, src: str) -> list[Msg]:
    """WARN(fmt, ...) and INFO(flags, fmt, ...) formats of one NCCL source, and its error strings."""
    out = []
    for m in re.finditer(r"\b(WARN|INFO)\s*\(", src):
        kind, idx = NCCL_MACROS[m.group(1)]
        got = _c_call_args(src, m.end() - 1)
        if not got or len(got[0]) <= idx:
            continue
        t = _printf_template(got[0][idx])
        if t and literal_share(t) >= 4:
            out.append(Msg("nccl", file, kind, t[:MAX_TEXT], "warning" if kind == "nccl_warn" else "info",
                           line=src.count("\n", 0, m.start()) + 1))
    # ncclGetErrorString: `case ncclSystemError : return "unhandled system error (run with ...)";`
    for m in re.finditer(r'case\s+(nccl\w+)\s*:\s*return\s+((?:"(?:[^"\\\n]|\\.)*"\s*)+);', src):
        out.append(Msg("nccl", file, "nccl_result", m.group(1) + ": " + _c_unescape(
            "".join(x[1:-1] for x in re.findall(r'"(?:[^"\\\n]|\\.)*"', m.group(2)))),
            line=src.count("\n", 0, m.start()) + 1))
    return out


GLOO_MACROS = {"GLOO_ENFORCE": ("gloo_enforce", 1), "GLOO_ENFORCE_EQ": ("gloo_enforce", 2),
               "GLOO_ENFORCE_NE": ("gloo_enforce", 2), "GLOO_ENFORCE_LE": ("gloo_enforce", 2),
               "GLOO_ENFORCE_LT": ("gloo_enforce", 2), "GLOO_ENFORCE_GE": ("gloo_enforce", 2),
               "GLOO_ENFORCE_GT": ("gloo_enforce", 2), "GLOO_ENFORCE_THAT": ("gloo_enforce", 1),
               "GLOO_THROW": ("gloo_throw", 0), "GLOO_THROW_IO_EXCEPTION": ("gloo_throw_io", 0),
               "GLOO_THROW_INVALID_OPERATION_EXCEPTION": ("gloo_throw_invalid", 0),
               "GLOO_ERROR_MSG": ("gloo_error_msg", 0), "GLOO_ERROR": ("gloo_log_error", 0),
               "GLOO_WARN": ("gloo_log_warn", 0), "GLOO_INFO": ("gloo_log_info", 0)}


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
        got = _c_call_args(src, m.end() - 1)
        if not got:
            continue
        line = src.count("\n", 0, m.start()) + 1
        where = ph(f"FILE {file}:{line}")
        args = got[0][skip:]
        if len(args) == 1 and args[0].startswith("GLOO_ERROR_MSG"):
            continue  # counted where GLOO_ERROR_MSG itself is found
        msg = _concat_template(args) if args else ""
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
            out.append(Msg("gloo", file, kind, t[:MAX_TEXT], line=line))
    return out


# ---------------------------------------------------------------- torch shared libraries

# Message-like strings of the shared libraries that belong to the areas the catalog covers.
CSTRING_KEYS = re.compile(
    r"(?i)nccl|gloo|store|socket|barrier|\brank|watchdog|collective|timeout|timed out|process ?group|c10d|elastic|"
    r"allocat|out of memory|memory|PytorchStreamReader|PytorchStreamWriter|zip|checkpoint|storage|serializ|pickl|"
    r"anomaly|returned nan|shared memory|/dev/shm|shm|bus error|signal|heartbeat|flight ?recorder|EADDRINUSE|"
    r"address already|connect|peer|reducer|bucket|unused param|find_unused|mark_variable_ready|finished reduction|"
    r"GradScaler|DataLoader|worker|abort|\bfile\b|disk|No space|errno|fault|desync|sequence number|\bpg\b|"
    r"NaN|inf\b|overflow|mismatch|hang|deadlock|Expected to|backward")
# operator schemas, docstrings, code and Python signatures that the libraries embed
_NOT_MESSAGE = re.compile(r"^\s{2,}|->|\bTensor\b|>>>|Optional\[|\bSymInt\b|\bScalarType\b|^`|\bDefault(?: is|:)|"
                          r"\breturn\b|def |__\w+__|\(\*,|\b(?:bool|int|float)\? ")
_MANGLED = re.compile(r"^_Z|^\.|^[\w./-]+\.(?:cpp|h|hpp|cu|cuh|c|cc)$|^[\w:<>,*& ]+$")


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


def cstring_messages(lib_file: str, lines) -> list[Msg]:
    """Message-like strings of one shared library's `strings` dump that fall in the covered areas, and the c10d
    function names of its symbols."""
    out = []
    seen = set()
    for raw in lines:
        s = raw.rstrip("\n")
        if s.startswith("_ZN") and SYMBOL_KEYS.match(s):
            name = _demangle_nested(s)
            if name and name not in seen and "::" in name and not name.endswith(("D1Ev", "C2Ev")):
                seen.add(name)
                out.append(Msg("torch", lib_file, "symbol", name))
            continue
        if len(s) < 10 or len(s) > 800 or s in seen:
            continue
        if _MANGLED.search(s) and " " not in s:
            continue
        if " " not in s.strip() or _NOT_MESSAGE.search(s):
            continue
        letters = sum(ch.isalpha() for ch in s)
        if letters < 0.5 * len(s.replace(" ", "")) or not CSTRING_KEYS.search(s):
            continue
        seen.add(s)
        t = re.sub(r"\{\}|\{:[^}]*\}", lambda m: ph("{}"), s)
        t = _PCT_RE.sub(lambda m: "%" if m.group(1) == "%" else ph("%" + m.group(1)), t) if "%" in t else t
        out.append(Msg("torch", lib_file, "cstring", t[:MAX_TEXT]))
    return out

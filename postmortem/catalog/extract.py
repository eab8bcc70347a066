"""Message extraction from Python sources (build time only, never imported by the analyzer): the raised, asserted,
logged, warned and printed strings (read with `ast`). C/C++, help files and binaries: extract_c.py; Go:
extract_go.py.

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
# wandb's terminal helpers print `wandb: ERROR ...` / `wandb: WARNING ...`
TERM_FUNCS = {"termerror": "error", "termwarn": "warning", "termlog": "info"}


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

    def visit_Assert(self, node: ast.Assert) -> None:
        if node.msg is not None:
            self.add("raise", node.msg, node.lineno, exc="AssertionError")
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
        elif name in TERM_FUNCS:
            self.add("log", first, node.lineno, level=TERM_FUNCS[name])
        elif name == "write" and recv.endswith("stderr"):
            self.add("print", first, node.lineno, level="error")
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

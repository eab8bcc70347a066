"""Frame normalisation shared by every stack parser: short files, bare names, signatures, depth caps."""
from __future__ import annotations

import re
from functools import lru_cache

# Frame normalisation (shared by the parsers, so identical stacks from any dump format compare equal)

MAX_FRAMES = 256            # frames kept per stack: the innermost 192 and the outermost 64
_KEEP_OUTER = 64

_PY_VERSION_DIR = re.compile(r"/python\d+(?:\.\d+)?[td]?/")
_WIN_STDLIB = re.compile(r"/python\d[\w.-]*/lib/", re.I)
_ADDR_ONLY = re.compile(r"^(?:0x[0-9a-fA-F]+|\?\?|)$")


@lru_cache(maxsize=65536)
def short_file(path: str | None) -> str:
    """A path as py-spy shortens it: relative to site-packages / the stdlib dir, else the basename of a script."""
    if not path:
        return ""
    p = path.replace("\\", "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        i = p.rfind(marker)
        if i >= 0:
            return p[i + len(marker):]
    last = None
    for last in _PY_VERSION_DIR.finditer(p):
        pass
    if last is not None:
        return p[last.end():]
    m = _WIN_STDLIB.search(p)
    if m:
        return p[m.end():]
    if p.startswith("/") or (len(p) > 2 and p[1] == ":" and p[2] == "/"):
        return p.rsplit("/", 1)[-1]
    return p


def bare_name(func: str | None) -> str:
    """The last dotted component of a (possibly qualified, py>=3.11) function name: `Run.log` -> `log`."""
    if not func:
        return ""
    if "." in func and not func.startswith("<"):
        return func.rsplit(".", 1)[-1]
    if ".<" in func or ">." in func:  # `_attach.<locals>.wrapper`, `<locals>.<lambda>`
        return func.rsplit(".", 1)[-1]
    return func


def is_native(frame: dict) -> bool:
    """True for a native (C/C++) frame: marked so by its parser, or without a line and not in a .py file."""
    if frame.get("native"):
        return True
    f = frame.get("file") or ""
    return frame.get("line") is None and not f.endswith((".py", ".pyx", ">")) and bool(f)


def _sig_key(frame: dict) -> str:
    if is_native(frame):
        f = (frame.get("file") or "").replace("\\", "/").rsplit("/", 1)[-1]
    else:
        f = short_file(frame.get("file"))
    return f"{bare_name(frame.get('func'))} ({f})"


def _sig_frames(frames: list[dict]) -> list[dict]:
    """Frames that take part in a signature: Python frames when there are any, else named native frames."""
    py = [f for f in frames if not is_native(f) and f.get("func")]
    if py:
        return py
    return [f for f in frames if not _ADDR_ONLY.match(f.get("func") or "")]


def signature(frames: list[dict]) -> str:
    """A stable string of a stack (outermost first, `;`-joined `func (short_file)`), equal for equal stacks.

    Bare function names and short files only, no line numbers, no native frames when Python frames exist and
    never unresolved addresses, so py-spy text/JSON, qualified/bare names and --native dumps of one stack agree.
    """
    return ";".join(_sig_key(f) for f in reversed(_sig_frames(frames)))


def cap_frames(frames: list[dict]) -> tuple[list[dict], int]:
    """Keep the innermost and outermost frames of a very deep stack; return (frames, number dropped)."""
    if len(frames) <= MAX_FRAMES:
        return frames, 0
    inner = MAX_FRAMES - _KEEP_OUTER
    return frames[:inner] + frames[-_KEEP_OUTER:], len(frames) - MAX_FRAMES


def in_thread(frames) -> bool:
    """True for a traceback raised in a thread other than the main one: CPython's threading.Thread._bootstrap_inner
    catches it and prints it through threading.excepthook ('Exception in thread NAME:'), and the process goes on."""
    outer = [f for f in (frames or []) if not f.get("native")]
    if not outer:
        return False
    last = outer[-1]  # frames are innermost first
    return str(last.get("file", "")).replace("\\", "/").endswith("threading.py") and \
        last.get("func") in ("_bootstrap_inner", "_bootstrap")

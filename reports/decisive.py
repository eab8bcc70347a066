"""The decisive lines of a cited place, where two lines of context around it would miss them.

A traceback cited by its `Traceback (most recent call last):` header: the point is the frame in the user's code
(`train.py:56` on one rank, `:65` on the others) and the exception at its end. A torchrun `error.json`: one line of
JSON with `\\n` inside; the point is the message and the last frames of its call stack. A py-spy thread: its frames
down to the user's code, and the threads of the same process it waits on (the ones in the same library, or the one
holding the GIL). Everything here reads files the analysis already read, within small bounds.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pandas as pd

from postmortem.ingest import textio

MAX_TRACEBACK_LINES = 400     # a traceback longer than this is shown with its usual context
MAX_THREAD_LINES = 60         # lines of one py-spy thread read
MAX_ERROR_JSON = 4 * 1024 * 1024
RELATED_THREADS = 2           # other threads of the dumped process shown beside the cited one
RELATED_FRAMES = 4            # frames shown of each of them
MAX_SHOWN_CHARS = 500


@dataclass
class Line:
    """A line to show: its number in the file (None for text decoded from a JSON field), text, whether it is one
    of the decisive lines, whether lines were skipped before it, and a label for a block (a related thread)."""
    no: int | None
    text: str
    hit: bool = False
    gap: bool = False
    label: str = ""


def _cut(text: str) -> str:
    text = text.replace("\r", " ")
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + " …"


def read_range(path: str, first: int, last: int) -> dict[int, str]:
    """Lines first..last of a file (1-based), as read by the parsers; {} when it cannot be read."""
    out: dict[int, str] = {}
    try:
        it = textio.iter_lines(path, start=first)
        try:
            for no, text in it:
                if no >= first:
                    out[no] = text
                if no >= last:
                    break
        finally:
            it.close()
    except (OSError, textio.InputProblem, ValueError):
        return {}
    return out


def decisive_lines(analysis, source: str, line: int | None, path: str | None) -> list[Line] | None:
    """The lines that make the point of a citation, or None when its usual context says it."""
    if path is None:
        return None
    t = analysis.tables
    kind = _kind(t.sources, source)
    if kind == "torchrun_error":
        return _error_json(path)
    if line is None:
        return None
    if kind in ("pyspy", "stack_dump"):
        got = _pyspy_thread(t.stacks, source, line, path)
        if got:
            return got
    return _traceback(t.tracebacks, source, line, path)


def _kind(sources: pd.DataFrame, source: str) -> str | None:
    hit = sources.loc[sources["source"] == source, "kind"]
    return str(hit.iloc[0]) if len(hit) else None


_FILE_LINE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
_LIBRARY_PATH = re.compile(r"/(?:site|dist)-packages/|/lib/python\d[\d.]*/|^<frozen ")


def _traceback(tb: pd.DataFrame, source: str, line: int, path: str) -> list[Line] | None:
    """Header, the innermost frame in the user's code (its `File` line and code line) and the exception line."""
    if not len(tb):
        return None
    rows = tb[(tb["source"] == source) & (tb["line"] == line)]
    if not len(rows):
        return None
    row = rows.iloc[0]
    end = row["end_line"]
    if pd.isna(end) or int(end) <= line + 4 or int(end) - line > MAX_TRACEBACK_LINES:
        return None   # short enough for the usual context, or too long to read here
    end = int(end)
    text = read_range(path, line, end)
    if not text:
        return None
    want = {line, end}
    user = row["last_user_frame"] if isinstance(row["last_user_frame"], dict) else {}
    ufile, uline = str(user.get("file") or ""), user.get("line")
    hit_frame = None
    for no in range(end, line, -1):   # innermost matching frame: the last one printed
        m = _FILE_LINE.search(text.get(no, ""))
        if m and ufile and m.group("file").endswith(ufile.rsplit("/", 1)[-1]) and str(uline) == m.group("line") \
                and (ufile.endswith(m.group("file")) or m.group("file").endswith(ufile)):
            hit_frame = no
            break
    if hit_frame is None:
        for no in range(end, line, -1):
            if _FILE_LINE.search(text.get(no, "")):
                hit_frame = no
                break
    if hit_frame is not None:
        want |= {hit_frame, hit_frame + 1}
    # the lines right before the exception line often continue it (a multi-line message) or point at it (^^^)
    shown = sorted(n for n in want if line <= n <= end and n in text)
    out, prev = [], None
    for no in shown:
        out.append(Line(no, _cut(text[no]), hit=no in (line, hit_frame, end), gap=prev is not None and no > prev + 1))
        prev = no
    return out


def _error_json(path: str) -> list[Line] | None:
    """torchrun's error file: its message and the end of its call stack, as lines (the JSON holds them with `\\n`)."""
    try:
        data = json.loads(textio.read_bounded(path, MAX_ERROR_JSON).decode("utf-8", "replace"))
    except (textio.InputProblem, OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    msg = data.get("message")
    info = {}
    if isinstance(msg, dict):
        info = msg.get("extraInfo") if isinstance(msg.get("extraInfo"), dict) else {}
        msg = msg.get("message")
    stack = info.get("py_callstack") if isinstance(info, dict) else None
    out: list[Line] = []
    if isinstance(stack, str) and stack.strip():
        lines = [ln for ln in stack.splitlines() if ln.strip()]
        frames = [i for i, ln in enumerate(lines) if _FILE_LINE.search(ln)]
        user = [i for i in frames if not _LIBRARY_PATH.search(_FILE_LINE.search(lines[i]).group("file"))]
        pick = user[-1] if user else (frames[-1] if frames else None)
        if lines and not lines[0].startswith(" "):
            out.append(Line(None, _cut(lines[0])))
        if pick is not None:
            out.append(Line(None, _cut(lines[pick]), hit=True, gap=pick > 1))
            if pick + 1 < len(lines) and not _FILE_LINE.search(lines[pick + 1]):
                out.append(Line(None, _cut(lines[pick + 1])))
        if len(lines) > 1:
            out.append(Line(None, _cut(lines[-1]), hit=True, gap=pick is None or len(lines) - 1 > pick + 2))
    elif isinstance(msg, str) and msg.strip():
        out.append(Line(None, _cut(msg.strip()), hit=True))
    ts = info.get("timestamp") if isinstance(info, dict) else None
    if isinstance(ts, (str, int)) and str(ts).isdigit():
        when = pd.Timestamp(int(ts), unit="s", tz="UTC").strftime("%Y-%m-%d %H:%M:%S UTC")
        out.append(Line(None, f"timestamp: {ts} ({when})", gap=bool(out)))
    return out or None


_THREAD_HDR = re.compile(r"^(?:Thread |Process \d+:|\s*$)")


def _pyspy_thread(stacks: pd.DataFrame, source: str, line: int, path: str) -> list[Line] | None:
    """The cited thread's frames, and the threads of the same dump it most likely waits on."""
    if not len(stacks):
        return None
    same = stacks[stacks["source"] == source]
    cited = same[same["line"] == line]
    if not len(cited):
        return None
    row = cited.iloc[0]
    text = read_range(path, line, line + MAX_THREAD_LINES)
    if not text:
        return None
    out = [Line(line, _cut(text[line]), hit=True)]
    frames = row["frames"] if isinstance(row["frames"], list) else []
    decide, user = _deciding_index(frames), _user_index(frames)
    skipped = False
    for i, no in enumerate(range(line + 1, line + MAX_THREAD_LINES + 1)):
        if no not in text or _THREAD_HDR.match(text[no]):
            break
        hit = i in (decide, user)
        # native plumbing (libc waits, pybind11 templates, bare addresses) says nothing a reader needs: left out,
        # unless it is the frame that decided what the thread is doing
        if not hit and not _worth_showing(text[no], frames[i] if i < len(frames) else None):
            skipped = True
            continue
        out.append(Line(no, _cut(text[no]), hit=hit, gap=skipped))
        skipped = False
    lib = _library(frames[decide]) if decide is not None and decide < len(frames) else None
    others = []
    pid = row.get("pid")
    for r in same[same["line"] != line].to_dict("records"):
        if pid is not None and not pd.isna(pid) and r.get("pid") is not None and not pd.isna(r.get("pid")) \
                and int(r["pid"]) != int(pid):
            continue
        fr = r["frames"] if isinstance(r["frames"], list) else []
        gil = bool(r.get("owns_gil")) and r.get("owns_gil") is not None and not pd.isna(r.get("owns_gil"))
        shares = lib is not None and any(_library(f) == lib for f in fr)
        if gil or shares:
            others.append((0 if gil else 1, int(r["line"]), r, "gil" if gil else lib))
    for _, at, r, why in sorted(others, key=lambda x: (x[0], x[1]))[:RELATED_THREADS]:
        block = read_range(path, at, at + RELATED_FRAMES)
        if at not in block:
            continue
        label = "holds_gil" if why == "gil" else f"same_library:{why}"
        out.append(Line(at, _cut(block[at]), hit=True, gap=True, label=label))
        for no in range(at + 1, at + RELATED_FRAMES + 1):
            if no not in block or _THREAD_HDR.match(block[no]):
                break
            out.append(Line(no, _cut(block[no])))
    return out if len(out) > 1 else None


_PY_FRAME = re.compile(r"\([^()]*\.pyx?:\d+\)\s*$")


def _worth_showing(text: str, frame) -> bool:
    """A Python frame, or a native frame that names an activity (a c10d/gloo/NCCL wait, CUDA work)."""
    if _PY_FRAME.search(text):
        return True
    from postmortem.stacks import frame_class
    return isinstance(frame, dict) and frame_class(frame) not in (None, "sleep_lock")


def _deciding_index(frames: list) -> int | None:
    from postmortem.stacks import blocking_frame
    if not frames:
        return None
    b = blocking_frame(frames)
    for i, f in enumerate(frames):
        if f is b:
            return i
    return None


def _user_index(frames: list) -> int | None:
    from postmortem.stacks import last_user_frame
    u = last_user_frame(frames) if frames else None
    for i, f in enumerate(frames):
        if f is u:
            return i
    return None


def _library(frame) -> str | None:
    """The top-level package of a frame's file (`wandb` for `wandb/sdk/lib/asyncio_manager.py`), None for the
    standard library and the user's own code."""
    from postmortem.stacks import short_file
    if not isinstance(frame, dict):
        return None
    sf = short_file(frame.get("file") or "")
    top = sf.split("/", 1)[0] if "/" in sf else ""
    import sys
    if not top or top in sys.stdlib_module_names:
        return None
    return top

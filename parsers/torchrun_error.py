"""torchrun / torchelastic error files (`@record` child error.json and the parent copy with `errorCode`).

FORMATS.md §4.3: `{"message": {"message": "...", "extraInfo": {"py_callstack": "...", "timestamp": "<epoch s>"}},
"errorCode": N}` (errorCode inside `message` in the parent copy); `message` may also be a plain string. Produces
`tracebacks` rows from the call stack and one `exit` event per file. Rank comes from the path
(`attempt_K/<local_rank>/error.json` gives the local rank; a global-rank path wins when present).
"""
from __future__ import annotations

import re
from datetime import datetime, timezone

from postmortem.parsers.base import ParseResult, register
from postmortem.parsers.safeload import UnsafeInput, loads_json
from postmortem.parsers.line_shapes import CHAIN_RE, EXC_RE, FRAME_RE
from postmortem.parsers.tracebacks import _last_user_frame
from postmortem.ingest import textio
from postmortem.ingest.discover import Source

MAX_ERROR_FILE = 4 * 1024 * 1024   # a real error.json is a few KB
MAX_FRAMES = 200
MAX_LINE = 4000
LOOSE_EXC_RE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:::[\w]+)*)(?::\s?(?P<msg>.*))?$")


def epoch_to_iso(value) -> str | None:
    """Epoch seconds (int, float or a string of them, as torchelastic writes) -> ISO UTC; None when implausible."""
    try:
        secs = float(str(value).strip())
    except (TypeError, ValueError):
        return None
    if not 0 < secs < 32503680000:  # before year 3000
        return None
    return datetime.fromtimestamp(secs, tz=timezone.utc).replace(tzinfo=None).isoformat()


def parse_callstack(text: str) -> list[dict]:
    """Python traceback text (possibly chained) -> [{exc_type, exc_message, frames (innermost first), offset}]."""
    out: list[dict] = []
    frames: list[dict] = []
    started = False
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if len(line) > MAX_LINE:
            continue  # real frame/exception lines are short; long junk would make the frame regex slow
        if line.strip() == "Traceback (most recent call last):":
            frames, started = [], True
            continue
        fm = FRAME_RE.match(line) if 'File "' in line else None
        if fm:
            frames.append({"file": fm.group("file"), "line": int(fm.group("line")),
                           "func": (fm.group("func") or "?").strip()})
            started = True
            continue
        if CHAIN_RE.match(line.strip()):
            continue
        if not started or not line.strip() or line.startswith((" ", "\t")):
            continue
        # In a formatted traceback the first unindented line after the frames is the exception, whatever its name.
        em = EXC_RE.match(line) or LOOSE_EXC_RE.match(line)
        if em:
            msg = em.group("msg") or ""
            # The message may continue on following unindented lines until a blank line or a chain marker.
            for nxt in lines[i + 1:i + 50]:
                if not nxt.strip() or len(msg) > 2000 or CHAIN_RE.match(nxt.strip()[:200]) \
                        or nxt.startswith("Traceback ("):
                    break
                msg += "\n" + nxt[:2000]
            out.append({"exc_type": em.group("type"), "exc_message": msg[:2000],
                        "frames": list(reversed(frames[-MAX_FRAMES:])), "offset": i})
            frames, started = [], False
    if started and frames:
        out.append({"exc_type": "<truncated>", "exc_message": "", "frames": list(reversed(frames[-MAX_FRAMES:])),
                    "offset": len(lines)})
    return out


def _unpack(doc) -> tuple[str | None, str | None, object, object]:
    """(message text, py_callstack, timestamp, errorCode) from either error-file shape."""
    if not isinstance(doc, dict):
        raise ValueError(f"top level is {type(doc).__name__}, not an object")
    if "message" not in doc:
        raise ValueError("no `message` field (torchrun logs: child error file does not have field `message`)")
    msg = doc["message"]
    code = doc.get("errorCode")
    if isinstance(msg, str):
        return msg, (msg if "Traceback (most recent call last)" in msg else None), None, code
    if not isinstance(msg, dict):
        raise ValueError(f"`message` is {type(msg).__name__}")
    extra = msg.get("extraInfo") if isinstance(msg.get("extraInfo"), dict) else {}
    stack = extra.get("py_callstack")
    text = msg.get("message")
    if code is None:
        code = msg.get("errorCode")
    return (text if isinstance(text, str) else None, stack if isinstance(stack, str) else None,
            extra.get("timestamp"), code)


@register("torchrun_error")
def parse_torchrun_error(source: Source) -> ParseResult:
    """Read one error.json into `tracebacks` rows and an `exit` event (bad or hostile files become problems)."""
    result = ParseResult()
    stats = textio.ReadStats()
    try:
        data = textio.read_bounded(source.path, MAX_ERROR_FILE, stats)
        doc = loads_json(data)
        text, stack, stamp, code = _unpack(doc)
    except (textio.InputProblem, UnsafeInput) as exc:
        result.problems.append(f"error file not read: {exc}")
        return result
    except ValueError as exc:  # JSONDecodeError included
        result.problems.append(f"error file not understood: {exc}")
        return result
    finally:
        result.bytes = stats.bytes
    result.lines = textio.line_count(data)
    rank = source.rank if source.rank is not None else source.local_rank
    ts = epoch_to_iso(stamp)
    common = {"source": source.source, "line": 1, "rank": rank, "host": source.host, "ts": ts}
    first_exc = None
    for i, tb in enumerate(parse_callstack(stack or "")):
        result.add("tracebacks", {**common, "exc_type": tb["exc_type"], "exc_message": tb["exc_message"],
                                  "frames": tb["frames"], "last_user_frame": _last_user_frame(tb["frames"]),
                                  "chained_from": i - 1 if i else None, "end_line": 1})
        first_exc = first_exc or tb["exc_type"]
    exc_type = None
    if text:
        em = EXC_RE.match(text.strip().splitlines()[-1] if text.strip() else "")
        exc_type = em.group("type") if em else None
    code_int = code if isinstance(code, int) and not isinstance(code, bool) else None
    attrs = {"code": code_int, "error_file": True, "parent_copy": code is not None,
             "local_rank": source.local_rank, "attempt": source.attempt, "exc_type": exc_type or first_exc,
             "timestamp": str(stamp)[:40] if stamp is not None else None, "format": "torchrun-error-json"}
    attrs = {k: v for k, v in attrs.items() if v is not None}
    summary = (text or "").strip().splitlines()[-1][:300] if (text or "").strip() else "(no message)"
    where = f" (rank {rank})" if rank is not None else " (torchrun parent copy)" if code is not None else ""
    message = f"error file{where}: {summary}" + (f" (errorCode {code_int})" if code_int is not None else "")
    result.add("events", {**common, "kind": "exit", "message": message[:1000], "template": "torchrun error file",
                          "details": attrs, "level": "E", "pid": None})
    return result

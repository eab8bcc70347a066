"""The numbers a JSON-lines log record carries beside its message (`{"msg": "train_step", "step": 38, "loss": NaN}`),
written into the message as `key=value` so the line formats and the step parser read them as they read text logs."""
from __future__ import annotations

import math
import re

# Keys that say who/where/when, not what the program measured.
_META = frozenset({
    "msg", "message", "text", "event", "log", "record", "exc_info", "exception", "exc_text", "traceback",
    "stack_trace", "stack", "error", "rank", "global_rank", "RANK", "rank_id", "process_rank", "local_rank",
    "world_size", "ts", "time", "timestamp", "@timestamp", "asctime", "datetime", "created", "msecs",
    "relativeCreated", "level", "levelname", "levelno", "severity", "lvl", "log_level", "host", "hostname",
    "logger", "name", "module", "funcName", "lineno", "pathname", "filename", "process", "processName", "thread",
    "threadName", "pid", "tid", "taskName"})
MAX_FIELDS = 12
_KEY = re.compile(r"^[A-Za-z_][\w./-]{0,40}$")


def _number(v) -> str | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)[:24]
    return str(v)[:24]


def with_fields(msg: str, obj: dict) -> str:
    """`msg` followed by ` key=value` for each numeric field of the record that the message does not name."""
    extra = []
    for k, v in obj.items():
        if len(extra) >= MAX_FIELDS:
            break
        if k in _META or not isinstance(k, str) or not _KEY.match(k):
            continue
        text = _number(v)
        if text is None or re.search(rf"(?<![\w]){re.escape(k)}(?![\w])", msg[:2000]):
            continue  # the message says it already (`step 3 loss 0.41`, and its step field)
        extra.append(f"{k}={text}")
    return f"{msg} {' '.join(extra)}" if extra else msg

"""Third-party logging libraries a training script may log through (loguru, structlog JSON / console, absl), each
configured the way their docs show, behind the small interface trainkit's Lab uses (log, exception, handlers)."""
from __future__ import annotations

import logging
import os
import sys


class _Adapter:
    """What Lab needs from a logger: log(level, msg, *args, extra=...), exception(msg, extra=...), handlers."""

    handlers: list = []

    def __init__(self, log, exception) -> None:
        self._log, self._exception = log, exception

    def log(self, level: int, msg: str, *args, extra: dict | None = None) -> None:
        self._log(level, msg % args if args else msg, (extra or {}).get("fields") or {})

    def exception(self, msg: str, extra: dict | None = None) -> None:
        self._exception(msg)


def make(style: str, rank: int, out: str, params: dict | None = None) -> _Adapter | None:
    """The adapter for a third-party log style, or None when style is not one."""
    if style == "loguru":
        return _loguru(rank, out)
    if style in ("structlog-json", "structlog-console"):
        return _structlog(rank, style == "structlog-json")
    if style == "absl":
        return _absl(bool((params or {}).get("absl_handler")))
    return None


def _loguru(rank: int, out: str) -> _Adapter:
    # loguru's default sink (stderr, its default format, diagnose on) plus a per-rank file, as its README shows
    from loguru import logger
    os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    logger.add(os.path.join(out, "logs", f"rank{rank}.log"), enqueue=False)
    names = {logging.INFO: "INFO", logging.WARNING: "WARNING", logging.ERROR: "ERROR", logging.DEBUG: "DEBUG"}
    return _Adapter(lambda lvl, m, f: logger.opt(depth=3).log(names.get(lvl, "INFO"), m),
                    lambda m: logger.opt(depth=2).exception(m))


def _structlog(rank: int, as_json: bool) -> _Adapter:
    import structlog
    procs = [structlog.contextvars.merge_contextvars, structlog.processors.add_log_level,
             structlog.processors.TimeStamper(fmt="iso", utc=True)]
    if as_json:
        # structlog's production recipe: exceptions as a structured list of frames, one JSON object per line
        procs += [structlog.processors.dict_tracebacks, structlog.processors.JSONRenderer()]
    else:
        procs += [structlog.dev.ConsoleRenderer(colors=False)]
    structlog.configure(processors=procs, logger_factory=structlog.PrintLoggerFactory(sys.stdout))
    log = structlog.get_logger().bind(rank=rank)
    names = {logging.INFO: "info", logging.WARNING: "warning", logging.ERROR: "error", logging.DEBUG: "debug"}
    return _Adapter(lambda lvl, m, f: getattr(log, names.get(lvl, "info"))(m, **f),
                    lambda m: log.exception(m))


def _absl(own_handler: bool) -> _Adapter:
    from absl import logging as alog
    alog.set_verbosity(alog.INFO)
    if own_handler:  # what absl.app.run installs: `I1128 20:26:01.123456 140234 train.py:28] msg` on stderr
        alog.use_absl_handler()
    # (without it absl goes through the root logger's last-resort/basic handler: `INFO:absl:msg`)
    # absl names the calling file:line; skip the wrapper frames so it names the training script's line
    here = os.path.dirname(os.path.abspath(__file__))
    for fn in ("<lambda>", "log", "exception"):
        alog.ABSLLogger.register_frame_to_skip(os.path.abspath(__file__), fn)
    for fn in ("log", "warn", "log_step"):
        alog.ABSLLogger.register_frame_to_skip(os.path.join(here, "trainkit.py"), fn)
    return _Adapter(lambda lvl, m, f: alog.log({logging.WARNING: alog.WARNING, logging.ERROR: alog.ERROR}.get(lvl, alog.INFO), m),
                    lambda m: alog.exception(m))

"""Run one function in a forked child while the parent does other work, e.g. discovery while the parsers load."""
from __future__ import annotations

import os
import sys
import threading


def can_fork() -> bool:
    """Whether a plain fork is available, is what the parser pool uses too (Linux; not macOS/Windows spawn), and is
    safe: no other thread runs in this process (a fork copies only the calling thread, so a lock another thread
    holds, in a notebook say, would stay held in the child)."""
    if not hasattr(os, "fork") or sys.platform == "darwin" or threading.active_count() > 1:
        return False
    import multiprocessing
    return multiprocessing.get_start_method(allow_none=True) in (None, "fork") and \
        multiprocessing.get_context().get_start_method() == "fork"


def call_beside(fn, arg, work):
    """fn(arg) computed in a forked child while `work()` runs here; returns fn(arg)'s value.

    Whatever goes wrong in the child (an exception, a crash, an unpicklable value), fn(arg) runs again here, so the
    caller sees exactly what a plain call would return or raise. The value comes back over a multiprocessing pipe,
    as the parser pool's results do. Call it only where can_fork() is True: the child is a fork of this process."""
    from multiprocessing.connection import Pipe
    try:
        reader, writer = Pipe(duplex=False)
        pid = os.fork()
    except OSError:
        work()
        return fn(arg)
    if pid == 0:  # the child: compute, send, and leave without running the parent's exit handlers
        code = 1
        try:
            reader.close()
            writer.send(fn(arg))
            code = 0
        except BaseException:  # noqa: BLE001 - the parent repeats the call and raises what it raises
            pass
        finally:
            os._exit(code)
    writer.close()
    value, ok = None, False
    try:
        work()
    finally:
        try:
            value, ok = reader.recv(), True
        except Exception:  # noqa: BLE001 - EOF (the child failed) or a value that would not load: call it here
            pass
        reader.close()
        _, status = os.waitpid(pid, 0)
    if ok and os.waitstatus_to_exitcode(status) == 0:
        return value
    return fn(arg)

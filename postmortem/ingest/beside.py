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


def fork(child, duplex: bool = False):
    """Fork a child that runs child(conn) and leaves with os._exit (0 when it returned, 1 when it raised), without
    the parent's exit handlers or buffered output; returns (pid, conn) here, or None when the fork fails. The pipe
    is one-way (the child writes, this process reads) unless `duplex`."""
    from multiprocessing.connection import Pipe
    try:
        here, there = Pipe(duplex=duplex)
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:
        code = 1
        try:
            here.close()
            child(there)
            code = 0
        except BaseException:  # noqa: BLE001 - the parent sees the exit status (or an EOF) and acts on it
            pass
        finally:
            os._exit(code)
    there.close()
    return pid, here


def call_beside(fn, arg, work):
    """fn(arg) computed in a forked child while `work()` runs here; returns fn(arg)'s value.

    Whatever goes wrong in the child (an exception, a crash, an unpicklable value), fn(arg) runs again here, so the
    caller sees exactly what a plain call would return or raise. The value comes back over a multiprocessing pipe,
    as the parser pool's results do. Call it only where can_fork() is True: the child is a fork of this process."""
    forked = fork(lambda writer: writer.send(fn(arg)))
    if forked is None:
        work()
        return fn(arg)
    pid, reader = forked
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


class Child:
    """The parent's handle on a child fork() started: its pid and pipe; close() stops and reaps it, once, and only
    in the process that forked it (also at exit)."""

    def __init__(self, pid: int, conn):
        import atexit
        self.pid = pid
        self._conn = conn
        self._owner = os.getpid()
        atexit.register(self.close)

    def close(self) -> None:
        """Close the pipe, kill the child and reap it (idempotent; it may be gone already)."""
        if self._conn is None or os.getpid() != self._owner:
            return
        import signal
        conn, self._conn = self._conn, None
        conn.close()
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except OSError:
            pass

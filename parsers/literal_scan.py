"""Does a byte string contain any of a set of literals? Answered at several GB/s with Hyperscan when it is installed
(the `fast` extra), else not at all: callers keep their own slower path for when `available()` is False.

Why a library: Python's `re` runs an alternation of ~200 literals at ~10 MB/s and a prefix-tree regex at ~100 MB/s;
Hyperscan's literal matcher (a SIMD multi-literal engine, the same idea as GNU grep's) runs the same set at ~3.5 GB/s
on one core. The prefilter asks this question once per long progress-bar line, which is most of a big log's bytes.
"""
from __future__ import annotations

import os
import re

try:  # optional: `pip install ddp-postmortem[fast]`
    if os.environ.get("POSTMORTEM_NO_HYPERSCAN"):
        raise ImportError("disabled by POSTMORTEM_NO_HYPERSCAN")
    import hyperscan as _hs
except ImportError:  # pragma: no cover - exercised by the fallback test with the variable set
    _hs = None


def available() -> bool:
    """True when the fast matcher can be built in this process."""
    return _hs is not None


def _compiled(exprs: list[bytes], flags: list[int]):
    """A block-mode database for the expressions. (A serialized copy loaded with hyperscan.loadb reported fewer
    matches than the compiled one in python-hyperscan 0.9.1, so it is compiled in every process.)"""
    db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
    db.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs), flags=flags)
    return db


class LiteralSet:
    """A compiled set of literals (some case-insensitive) and extra byte regexes; `search(data)` says if any occurs."""

    def __init__(self, literals: list[bytes], literals_nocase: list[bytes] = (), regexes: list[bytes] = (),
                 once_nocase: list[bytes] = (), prefilters: list[tuple[bytes, bool]] = ()):
        """`once_nocase`: case-insensitive literals reported once per scanned block at most (weak words whose
        every occurrence need not be seen). `prefilters`: (regex, caseless) matched line by line in Hyperscan's
        prefilter mode (what it cannot do, e.g. a lookahead, is dropped: it reports every match and maybe more)."""
        if _hs is None:
            raise RuntimeError("hyperscan is not installed")
        exprs, flags = [], []
        for lit in sorted(set(literals)):
            if lit:
                exprs.append(re.escape(lit))
                flags.append(0)
        for lit in sorted(set(literals_nocase)):
            if lit:
                exprs.append(re.escape(lit))
                flags.append(_hs.HS_FLAG_CASELESS)
        for rx in regexes:
            exprs.append(rx)
            flags.append(0)
        for rx, caseless in prefilters:
            exprs.append(rx)
            flags.append(_hs.HS_FLAG_PREFILTER | _hs.HS_FLAG_MULTILINE | (_hs.HS_FLAG_CASELESS if caseless else 0))
        for lit in sorted(set(once_nocase)):
            if lit:
                exprs.append(re.escape(lit))
                flags.append(_hs.HS_FLAG_CASELESS | _hs.HS_FLAG_SINGLEMATCH)
        self.size = len(exprs)
        self._db = _compiled(exprs, flags) if exprs else None

    def search(self, data: bytes) -> bool:
        """True if some literal (or regex) occurs in `data`; stops at the first match."""
        if self._db is None or not data:
            return False
        found = []

        def on_match(_id, _start, _end, _flags, _ctx):
            found.append(True)
            return 1  # stop scanning: the answer is known
        try:
            self._db.scan(data, match_event_handler=on_match)
        except _hs.ScanTerminated:
            pass
        except _hs.error:  # scanning can only fail on resources; say "maybe" so the caller looks closer
            return True
        return bool(found)

    def ends(self, data) -> list[int]:
        """End offsets of every match in `data` (bytes or a memoryview), in order: where the literals occur, so
        that the caller touches only the lines around them."""
        if self._db is None or not len(data):
            return []
        found: list[int] = []
        add = found.append

        def on_match(_id, _start, end, _flags, _ctx):
            add(end)
        try:
            self._db.scan(data, match_event_handler=on_match)
        except _hs.error:  # resources: the caller treats the data as one big hit
            return [len(data)]
        return found


"""Python tracebacks in a text log, collected per output stream: frames, the exception line that closes them, chained
exceptions, caps per signature (the `tracebacks` table)."""
from __future__ import annotations



from postmortem.parsers.base import ParseResult
from postmortem.ingest.discover import Source
from postmortem.parsers.line_shapes import (ANY_EXC_RE, _BARE_EXC_NAMES, CARET_RE, CHAIN_RE, EXC_NEAR_FRAME, EXC_RE,
                                            FRAME_RE, MAX_FRAMES, MAX_OPEN_GAP, MAX_TRACEBACKS,
                                            MAX_TRACEBACKS_PER_SIGNATURE)


# stream keys whose lines summarise several processes (Ray's `[repeated Nx across cluster]` lines)
SUMMARY_KEYS = frozenset({("ray-dedup",)})
SUMMARY_REACH = 3  # lines between a summary's `[Rank 0,4,5 Error Snippet]:` header and the traceback it introduces


class _TracebackCollector:
    """Per-stream state machine that assembles (possibly interleaved, excerpted) Python tracebacks."""

    def __init__(self, result: ParseResult, source: Source):
        self.result, self.source = result, source
        self.open: dict = {}        # stream key -> traceback being built
        self.last_closed: dict = {}  # stream key -> index of last closed traceback
        self.pending_chain: dict = {}
        self.count = 0
        self.per_signature: dict = {}  # (exc_type, user frame) -> tracebacks seen
        self.tail: dict = {}           # signature -> the last traceback beyond the cap (added at finish)
        self.dropped = 0
        self.fanout: dict = {}         # stream key -> ranks the next traceback of that stream stands for

    def feed(self, key, lineno: int, message: str, ctx: dict) -> bool:
        """Consume a line if it belongs to a traceback; True when consumed."""
        tb = self.open.get(key)
        stripped = message.strip()
        if stripped == "Traceback (most recent call last):":
            if tb:
                self._close(key, None, None)
            self.open[key] = self._new(lineno, ctx, key)
            # A traceback printed one level in (a prefix that leaves a space, `3:  Traceback`): its lines share that
            # indent, so the exception line is found after it is taken off.
            self.open[key]["indent"] = len(message) - len(message.lstrip(" "))
            return True
        if tb is not None and tb.get("indent") and message.startswith(" " * tb["indent"]):
            message = message[tb["indent"]:]
        fm = FRAME_RE.match(message) if "File \"" in message else None
        if fm:
            if tb is None:
                tb = self.open[key] = self._new(lineno, ctx, key)
            tb["frames"].append({"file": fm.group("file"), "line": int(fm.group("line")),
                                 "func": (fm.group("func") or "?").strip()})
            if len(tb["frames"]) > MAX_FRAMES:
                del tb["frames"][0]
            tb["last_frame_line"] = lineno
            return True
        if CHAIN_RE.match(stripped):
            if tb:
                self._close(key, None, None)
            self.pending_chain[key] = self.last_closed.get(key)
            return True
        if tb is not None:
            if message[:1] in (" ", "\t") or CARET_RE.match(message):
                if tb["frames"] and "code" not in tb["frames"][-1] and not CARET_RE.match(message):
                    tb["frames"][-1]["code"] = stripped[:300]
                return True
            em = EXC_RE.match(message) or _any_exception(message, lineno - tb["last_frame_line"])
            if em:
                self._close(key, em.group("type"), em.group("msg"), lineno)
                return False  # the exception line is also scanned for events
            if lineno - tb["last_frame_line"] > MAX_OPEN_GAP:
                self._close(key, None, None)
            return False
        em = EXC_RE.match(message)
        if em and not em.group("type").endswith("Warning") and (em.group("msg") is not None):
            # A bare exception line with no traceback (an excerpt, or a C++-raised error printed alone).
            self.open[key] = self._new(lineno, ctx, key)
            self._close(key, em.group("type"), em.group("msg"), lineno)
        return False

    def _new(self, lineno: int, ctx: dict, key) -> dict:
        header = self.fanout.pop(key, None)
        # a summary header stands for the traceback that starts right under it, not for a later one
        ranks = header[0] if header is not None and 0 < lineno - header[1] <= SUMMARY_REACH else None
        return {"line": lineno, "ctx": dict(ctx), "frames": [], "last_frame_line": lineno,
                "chained_from": self.pending_chain.pop(key, None), "for_ranks": ranks}

    def _close(self, key, exc_type, exc_msg, end_line=None) -> None:
        tb = self.open.pop(key, None)
        if tb is None:
            return
        if exc_type is None and not tb["frames"]:
            return
        frames = list(reversed(tb["frames"]))  # innermost first, like stacks
        ctx = tb["ctx"]
        row = {"source": self.source.source, "line": tb["line"], "rank": ctx.get("rank"), "host": ctx.get("host"),
               "ts": ctx.get("ts"), "exc_type": exc_type or "<truncated>", "exc_message": (exc_msg or "")[:2000],
               "frames": frames, "last_user_frame": _last_user_frame(frames),
               "chained_from": tb["chained_from"], "end_line": end_line or tb["last_frame_line"]}
        ranks = tb.get("for_ranks")
        if (ranks and row["rank"] is None) or key in SUMMARY_KEYS:
            # a summary's frames are cut (`... (Output truncated) ...`) or grouped from several processes: they are
            # no call site; what the ranks raised is what it tells
            row["frames"], row["last_user_frame"] = [], None
        if ranks and row["rank"] is None:
            # one traceback printed for several ranks (Ray Train's `[Rank 0,4,5 Error Snippet]:`): a row for each
            added = [self._add({**row, "rank": r}) for r in ranks][-1]
        else:
            added = self._add(row)
        if added:
            self.last_closed[key] = self.count - 1

    def _add(self, row: dict) -> bool:
        """Store a row unless its signature is over the cap (then it may be kept as that signature's latest)."""
        fr = row["last_user_frame"] or {}
        sig = (row["exc_type"], fr.get("file"), fr.get("func"), row["rank"])
        n = self.per_signature.get(sig, 0)
        self.per_signature[sig] = n + 1
        if n >= MAX_TRACEBACKS_PER_SIGNATURE or self.count >= MAX_TRACEBACKS:
            # a repeated failure: bounded rows, the latest one of each signature kept
            if sig in self.tail or len(self.tail) >= MAX_TRACEBACKS:
                self.dropped += 1
            if sig in self.tail or len(self.tail) < MAX_TRACEBACKS:
                self.tail[sig] = row
            return False
        self.result.add("tracebacks", row)
        self.count += 1
        return True

    def for_ranks(self, key, ranks: list[int], lineno: int) -> None:
        """The traceback starting right after line `lineno` of stream `key` was printed on behalf of `ranks` (a
        summary of several workers)."""
        self._close(key, None, None)
        self.fanout[key] = (ranks, lineno)

    def finish(self) -> None:
        for key in list(self.open):
            self._close(key, None, None)
        for row in self.tail.values():
            row["chained_from"] = None  # its chain partner may be among the dropped ones
            self.result.add("tracebacks", row)
        if self.dropped:
            self.result.problems.append(f"repeated tracebacks summarised: {self.dropped} not stored")


def _any_exception(message: str, since_frame: int):
    """The exception line of an open traceback whatever its class is named (see ANY_EXC_RE), right after the frames:
    a dotted or `::` name, a name with a message, or a builtin exception's bare name."""
    if since_frame > EXC_NEAR_FRAME or not message or len(message) > 4000:
        return None
    m = ANY_EXC_RE.match(message)
    if m is None:
        return None
    name = m.group("type")
    if "." in name or "::" in name or name in _BARE_EXC_NAMES:
        return m
    # `Name: message` alone: a class-like name (a capital, then lower case), not a log level word (`INFO: ...`)
    if m.group("msg") is not None and name[:1].isupper() and not name.isupper():
        return m
    return None


def _last_user_frame(frames_innermost_first: list[dict]) -> dict | None:
    for fr in frames_innermost_first:
        f = fr["file"]
        if not any(s in f for s in ("site-packages", "dist-packages", "/lib/python", "<frozen", "\\lib\\")):
            return fr
    return frames_innermost_first[0] if frames_innermost_first else None

"""Collector prefixes learned from a file's own lines: the arrival stamps, job ids, rank tags and separators that log
shippers (Kubernetes, Determined, CloudWatch, fluentd, `ts`) put in front of every line, in shapes no fixed list
names.

A prefix is learned only when most of the file's first lines start with the same run of tokens, and every token
of the run is one a collector writes: a timestamp, a rank tag, an id that is the same on every line, or a
separator. Words are never prefix tokens, so `INFO`, `{'loss':` or `Epoch` can never be stripped.
"""
from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass

MAX_TOKENS = 6
MIN_SHARE = 0.6
HEAD = 64          # lines a prefix is learned from

_TS = re.compile(r"^[\[(]?(?:(?:\d{4}[-/]\d\d[-/]\d\d|\d\d/\d\d/\d{4})(?:[T _]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?)?"
                 r"|\d\d:\d\d:\d\d(?:[.,]\d+)?)(?:Z|[+-]\d\d:?\d\d)?[\])]?:?$")
_RANK = re.compile(r"^[\[(<]?(?:global_?)?rank[=:#_ ]?(?P<rank>\d{1,6})[\])>]?:?$", re.I)
_SEPARATOR = re.compile(r"^(?:\|{1,2}|-{1,2}|>{1,2}|::?|»|\|>)$")
_ID = re.compile(r"^[\[(]?[\w.@:/-]{1,48}[\])]?:?$")
# syslog/journald: `Nov 27 04:58:10 host python3[4242]: ...` (a month name starts the stamp; the tag holds the pid)
_MONTH = re.compile(r"^(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)$")
_SYSLOG_TAG = re.compile(r"^[\w.-]{1,48}\[\d{1,10}\]:$")
# a tag a collector writes with a separator after it or in brackets with a path (`trainer-1  |`, `[pod/w-0/c]`)
_TAGGED = re.compile(r"^\[[\w.@:-]{1,48}(?:/[\w.@:-]{1,48}){1,3}\]:?$")
STRONG_SHARE = 0.9  # a prefix without a stamp or rank: one constant tag on this share of the lines
_DIGIT = re.compile(r"\d+")
# What every `ts` token (_TS: a date or hh:mm:ss) and every `rank` token (_RANK) contains.
_DATE_OR_TIME = (rb"\d{4}[-/]\d\d[-/]\d\d", rb"\d\d/\d\d/\d{4}", rb"\d\d:\d\d:\d\d")


_DIGITS_TO_ZERO = str.maketrans("123456789", "000000000")
_CLASS_MEMO: dict[str, str | None] = {}
_MEMO_MAX = 4096


def _token_class(tok: str) -> str | None:
    """The collector role of one token (its shape, for comparing lines), or None when it cannot be a prefix.

    Memoised by the token with every digit made 0: each class regex treats all digits alike, and stamps differ
    only in their digits, so a file's head costs a few regex matches, not a few per line."""
    if not tok or len(tok) > 64:
        return None
    shape = tok.translate(_DIGITS_TO_ZERO)
    try:
        return _CLASS_MEMO[shape]
    except KeyError:
        pass
    cls = _classify(tok)
    if len(_CLASS_MEMO) < _MEMO_MAX:
        _CLASS_MEMO[shape] = cls
    return cls


def _classify(tok: str) -> str | None:
    """The class of one token by its regexes (see _token_class)."""
    if _TS.match(tok) or _MONTH.match(tok):
        return "ts"
    if _SYSLOG_TAG.match(tok):
        return "id"
    if _RANK.match(tok):
        return "rank"
    if _SEPARATOR.match(tok):
        return "sep:" + tok
    if _DIGIT.search(tok) and _ID.match(tok):
        return "id"
    return None


@dataclass(frozen=True)
class LearnedPrefix:
    """A learned run of collector tokens: how many, and which of them carry a timestamp or a rank."""
    tokens: int
    classes: tuple[str, ...]
    ids: tuple[str | None, ...]   # the constant value of each `id` token (None for other classes)

    def strip(self, line: str) -> tuple[str, dict]:
        """The line without the prefix (one separating space removed, indentation kept) and what it said."""
        pos, info = 0, {}
        for cls, const in zip(self.classes, self.ids):
            while pos < len(line) and line[pos] == " ":
                pos += 1
            end = line.find(" ", pos)
            if end < 0:
                return line, {}
            tok = line[pos:end]
            if _token_class(tok) != cls or (const is not None and tok != const):
                return line, {}
            if cls == "ts":  # a date and a time as two tokens make one timestamp
                info["ts"] = (info["ts"] + " " if "ts" in info else "") + tok.strip("[]():")
            elif cls == "rank":
                info.setdefault("rank", int(_RANK.match(tok).group("rank")))
            pos = end
        return line[pos + 1:], info


_RUN_MEMO: dict[str, tuple] = {}


def _run(line: str) -> tuple[tuple[str, ...], list[str]]:
    """The classes of the collector tokens a line starts with (up to the first that is not one), and the tokens.
    Memoised by the tokens' shape (digits made 0, as in _token_class): the lines of a head share a few shapes."""
    tokens = line.split(None, MAX_TOKENS)[:-1]  # the last piece is the message, never a prefix token
    # (any run of blanks separates tokens: `docker compose logs` pads the service name)
    shape = " ".join(tokens).translate(_DIGITS_TO_ZERO)
    classes = _RUN_MEMO.get(shape)
    if classes is None:
        run = []
        for tok in tokens:
            cls = _token_class(tok) if tok else None
            if cls is None:
                break
            run.append(cls)
        classes = tuple(run)
        if len(_RUN_MEMO) < _MEMO_MAX:
            _RUN_MEMO[shape] = classes
    return classes, tokens


@functools.lru_cache(maxsize=1)
def _stamp_or_rank_matcher():
    """Hyperscan set of what a `ts` or `rank` token contains (None without Hyperscan)."""
    from postmortem.parsers import literal_scan
    if not literal_scan.available():
        return None
    return literal_scan.LiteralSet([], literals_nocase=[b"rank"], regexes=list(_DATE_OR_TIME))


def _too_few_stamps_or_ranks(lines: list[str]) -> bool:
    """True when fewer lines than a learned prefix needs hold a date, a time or the word `rank`: then no run of
    theirs can have the stamp or rank tag learn() requires, and the token runs need not be built (~0.15 ms a file,
    most of learn(); NCCL and plain heads end here). Matches never span lines, so matches >= such lines; only
    ASCII text is judged (Python's \\d and case folding go beyond ASCII), else False (no shortcut)."""
    matcher = _stamp_or_rank_matcher()
    if matcher is None:
        return False
    text = "\n".join(lines)
    if not text.isascii():
        return False
    return len(matcher.ends(text.encode("ascii"))) < MIN_SHARE * len(lines)


def learn(head_lines: list[str], behind_stamp: bool = False) -> LearnedPrefix | None:
    """The collector prefix most of these lines share, or None (fewer than 3 lines, or no shared run).
    `behind_stamp`: the lines are what is left after a stamped prefix was taken off, so a tag with its separator
    (`(worker_7) : `) is a collector's even without a stamp of its own."""
    lines = [ln for ln in head_lines[:HEAD] if ln.strip()]
    if len(lines) < 3:
        return None
    # Cheap first look: most lines must start with a token a collector writes, or there is nothing to learn.
    if sum(_token_class(ln.split(" ", 1)[0]) is not None for ln in lines) < MIN_SHARE * len(lines):
        return None
    if sum(ln.count(", ") >= 3 and '{"' not in ln for ln in lines) * 5 >= len(lines) * 3:
        return None  # comma-separated rows (nvidia-smi --query CSV): a leading time is a column, not a stamp
    tagged = _constant_tag(lines, MIN_SHARE if behind_stamp else STRONG_SHARE)
    if not tagged and _too_few_stamps_or_ranks(lines):
        return None
    runs = [_run(ln) for ln in lines]
    best = None
    full = Counter(classes for classes, _ in runs)  # lines of one run shape, first seen first (ties as lines)
    for k in range(1, MAX_TOKENS):
        shapes: Counter = Counter()
        for classes, n in full.items():
            if len(classes) >= k:
                shapes[classes[:k]] += n
        if not shapes:
            break
        shape, n = shapes.most_common(1)[0]
        if n < MIN_SHARE * len(lines):
            break
        ids = []
        for i, cls in enumerate(shape):
            if cls != "id":
                ids.append(None)
                continue
            values = Counter(tokens[i] for classes, tokens in runs if classes[:k] == shape)
            value, m = values.most_common(1)[0]
            if m < MIN_SHARE * len(lines):  # an id that changes from line to line is content, not a collector's tag
                ids = None
                break
            ids.append(value)
        if ids is None:
            break
        best = LearnedPrefix(k, shape, tuple(ids))
    if best is None:
        return None
    if not any(c in ("ts", "rank") for c in best.classes):
        # separators and ids alone are too weak to strip on, unless one collector tag starts nearly every line
        # (`trainer-1  | `, `[pod/train-worker-0/pytorch] `) and the learned run is that tag (and its separator)
        strong = tagged and best.ids[0] == tagged and (len(best.classes) == 1 and _TAGGED.match(tagged)
                                                        or any(c.startswith("sep:") for c in best.classes))
        if not strong:
            return None
    return best


def _constant_tag(lines: list[str], share: float = STRONG_SHARE) -> str | None:
    """The first token when nearly every line (`share`) starts with that same token and it looks like a collector's
    tag (an id with a digit, or a bracketed path), else None."""
    first = Counter(ln.split(None, 1)[0] for ln in lines if ln.strip())
    if not first:
        return None
    tok, n = first.most_common(1)[0]
    if n < share * len(lines) or _token_class(tok) != "id":
        return None
    return tok


def strip_stream(items, head: int = 64):
    """(line number, line) pairs with a learned collector prefix removed from every line (unchanged when the first
    `head` lines share none)."""
    items = iter(items)
    buf = []
    for item in items:
        buf.append(item)
        if len(buf) >= head:
            break
    prefix = learn([ln for _, ln in buf])
    if prefix is None:
        yield from buf
        yield from items
        return
    for lineno, ln in buf:
        yield lineno, prefix.strip(ln)[0]
    for lineno, ln in items:
        yield lineno, prefix.strip(ln)[0]


def strip_head(head: bytes) -> bytes:
    """The first bytes of a file with a learned collector prefix removed from each line (for sniffing its kind)."""
    text = head.decode("utf-8", "replace")
    lines = text.split("\n")
    prefix = learn(lines[:64])
    if prefix is None:
        return head
    return "\n".join(prefix.strip(ln)[0] for ln in lines).encode("utf-8")

"""One log line as a record (its message, rank, time and level, JSON-lines records included) and the last lines of
every rank of a file (the `last_lines` table and the templates odd_lines compares)."""
from __future__ import annotations

import json
import zlib


from postmortem.parsers import json_fields, prefilter
from postmortem.parsers.base import ParseResult
from postmortem.parsers.prefixes import strip_prefixes
from postmortem.ingest import textio
from postmortem.ingest.discover import Source
from postmortem.parsers.line_shapes import (message_rank, _prefix_only, _Scheme, SCHEME_SAMPLE, TAIL_LINES_KEPT,
                                            TAIL_LINES_ONE_RANK, TAIL_LINES_READ)


class _Tail:
    """The last lines of a file read line by line (UTF-16): what LineScanner.tail_lines gives for the rest."""
    exact = True

    def __init__(self, lines):
        self.lines = lines

    def tail_lines(self, n: int) -> list[tuple[int, str]]:
        return [(ln, raw[-4096:]) for ln, raw in list(self.lines)[-n:]]  # as LineScanner.tail_lines


_JSON_MESSAGE_KEYS = ("msg", "message", "text", "event", "log", "record", "textPayload")  # (Cloud Logging)
_JSON_EXC_KEYS = ("exc_info", "exception", "exc_text", "traceback", "stack_trace", "stack", "error")
_JSON_RANK_KEYS = ("rank", "global_rank", "RANK", "rank_id", "process_rank")
_JSON_TS_KEYS = ("ts", "time", "timestamp", "@timestamp", "asctime", "datetime", "created")
_JSON_LEVEL_KEYS = ("level", "levelname", "severity", "lvl", "log_level")


def json_record(raw: str, depth: int = 0):
    """A JSON-lines log record as ([message lines, then its exception's lines], {rank, ts, level, host}), or None
    when the line is not a JSON object with a message. A message that is itself a record (a JSON logger's line
    inside Docker's json-file driver or Cloud Logging's export) is read as that record, its fields first."""
    text = raw.strip()
    if not text.endswith("}") or len(text) > 1_000_000:
        return None
    if text[1:].lstrip()[:1] != '"':
        return None  # no key: no message (a Python dict's repr, `{'loss': 2.5}`, starts with a quote JSON has not)
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    msg = next((obj[k] for k in _JSON_MESSAGE_KEYS if isinstance(obj.get(k), str)), None)
    if msg is None:
        return None
    if depth == 0 and msg.lstrip()[:1] == "{":
        inner = json_record(msg, 1)
        if inner is not None:
            outer = json_record(raw, 1)
            return inner[0], {**(outer[1] if outer else {}), **inner[1]}
    info: dict = {}
    for k in _JSON_RANK_KEYS:
        v = obj.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1_000_000:
            info["rank"] = v
            break
        if isinstance(v, str) and v.isdigit() and len(v) < 7:
            info["rank"] = int(v)
            break
    ts = next((obj[k] for k in _JSON_TS_KEYS if isinstance(obj.get(k), str)), None)
    if ts:
        info["ts"] = ts[:40]
    level = next((obj[k] for k in _JSON_LEVEL_KEYS if isinstance(obj.get(k), str)), None)
    if level:
        info["level"] = level[:1].upper()
    host = obj.get("host") or obj.get("hostname")
    if isinstance(host, str) and host:
        info["host"] = host[:100]
    # (a progress bar's redraws stay joined by `\r` inside one record: each redraw is a segment, as in a text log)
    text = json_fields.with_fields(msg, obj)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n") if "\r" in text else text.split("\n")
    for k in _JSON_EXC_KEYS:
        v = obj.get(k)
        if isinstance(v, str) and v.strip() and v.strip() != "None":
            lines.extend(v.rstrip("\n").split("\n"))
            break
    return lines, info


def _line_key(text: str) -> int:
    """A line's template key: crc32 of its shape (digits, blanks and bar glyphs removed, as the prefilter's keys)."""
    return zlib.crc32(prefilter.normalise(text))


def _tail_window(scanner, base_rank) -> int:
    """How many of a file's last lines its ranks' last lines are taken from: TAIL_LINES_READ (a console of many
    ranks interleaves them), but fewer in a summarised file of one rank, whose last lines are its last lines (part
    of the per-rank budget: a file read whole exactly, as every file of a small job, keeps the full window)."""
    if base_rank is not None and getattr(scanner, "summarised", False):
        return TAIL_LINES_ONE_RANK
    return TAIL_LINES_READ


def _line_keys(texts: list[str]) -> list[int]:
    """_line_key of each text, in one encode and one translate for all of them (texts without a line break)."""
    joined = "\n".join(texts)
    if joined.count("\n") != max(0, len(texts) - 1):
        return [_line_key(t) for t in texts]
    crc = zlib.crc32
    return [crc(k) for k in joined.encode("utf-8").translate(None, prefilter.DELETE).split(b"\n")]


def line_message(raw: str, scheme, base_rank):
    """(message, prefix info, rank) of one raw line as the last-lines table reads it (a JSON record's message, a
    progress bar's last redraw, launcher and collector prefixes stripped), or None for a line with no message."""
    if not raw or raw.isspace():
        return None
    record = json_record(raw) if scheme.jsonl and raw[:1] == "{" else None
    if record is not None:
        seg = next((t for t in record[0] if t.strip()), "")
    else:
        seg = raw.rsplit("\r", 1)[-1] if "\r" in raw else raw
        if not seg.strip():
            seg = raw.strip("\r")
    line, sinfo = scheme.strip(seg) if scheme.active else (seg, {})
    if record is not None:
        sinfo = {**record[1], **sinfo}
    message, info = strip_prefixes(line)
    if sinfo:
        info = {**sinfo, **info}
    message = message.rstrip()  # leading blanks kept: a traceback's code lines are indented
    if not message.strip() or _prefix_only(message):
        return None
    return message, info, _line_rank(info, message, base_rank)


def _line_rank(info: dict, message: str, base_rank):
    """A line's rank: its prefix's rank, else its local rank, else one its words state, else the file's."""
    rank = info.get("rank")
    if rank is None and info.get("local_rank") is not None:
        rank = info["local_rank"]
    if rank is None:
        rank = message_rank(message)
    return base_rank if rank is None else rank


def template_keys(path: str, limit: int) -> tuple[set[int], int]:
    """The template keys of every line of a text file (as last_lines computes them) and how many lines were read,
    at most `limit` (the `--baseline` run's templates)."""
    keys: set[int] = set()
    head: list[str] = []
    it = textio.iter_lines(path)
    n = 0
    for _, raw in it:
        head.append(raw)
        if len(head) >= SCHEME_SAMPLE:
            break
    scheme = _Scheme(head)
    for raw in head:
        got = line_message(raw, scheme, None)
        if got is not None:
            keys.add(_line_key(got[0]))
        n += 1
    for _, raw in it:
        if n >= limit:
            break
        got = line_message(raw, scheme, None)
        if got is not None:
            keys.add(_line_key(got[0]))
        n += 1
    return keys, n


def _last_lines(result: ParseResult, source: Source, tail: list, head_texts: list, scheme, base_rank) -> None:
    """Each rank's last TAIL_LINES_KEPT lines of this file, whatever they say, with their template keys and whether
    the rank printed the same template before (the file's first lines, or earlier in its tail)."""
    if not tail:
        return
    lines = []  # (line number, raw line, rank, message, info) of the lines that say something
    for lineno, raw in tail:
        got = line_message(raw, scheme, base_rank)
        if got is None:
            continue
        message, info, rank = got
        lines.append((lineno, raw, rank, message, info))
    if not lines:
        return
    # the template keys of all lines at once; then whether each rank printed a line's template before it
    keys = _line_keys([t[3] for t in lines])
    raw_keys = _line_keys([t[1] for t in lines])
    seen_raw = set(_line_keys([ln for ln in head_texts if ln]))
    head_n = len(head_texts)
    per_rank: dict = {}
    for (lineno, _, rank, _, _), key, raw_key in zip(lines, keys, raw_keys):
        got = per_rank.get(rank)
        if got is None:
            got = per_rank[rank] = ([], set())
        seen = (raw_key in seen_raw and lineno > head_n) or key in got[1]
        seen_raw.add(raw_key)
        got[1].add(key)
        got[0].append((lineno, key, seen))
    index = {t[0]: t for t in lines}
    for rank, (rows, _) in per_rank.items():
        rows = rows[-TAIL_LINES_KEPT:]
        for i, (lineno, key, seen) in enumerate(rows):
            _, _, _, message, info = index[lineno]
            result.add("last_lines", {"source": source.source, "line": lineno, "rank": rank,
                                      "host": info.get("host") or source.host, "ts": _ts(info.get("ts")), "key": key,
                                      "message": message[:300], "seen": seen, "distance": len(rows) - 1 - i})


def _ts(text: str | None):
    if not text:
        return None
    return text.replace(",", ".").replace("_", " ")

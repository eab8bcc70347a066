"""Whether a text file beside the logs is prose someone wrote (an incident write-up, notes, an e-mail) rather than
output of the run: its lines are sentences, not records. Such a file quotes errors that the run printed elsewhere,
or that it never printed, so it is listed and not read (the verdict comes from the logs and dumps only).

A log's lines are records: a time, a level, a prefix, key=value pairs, numbers, paths, frames; a sentence line is
mostly words. A file is prose when most of its lines are sentences and almost none are records (a write-up that
quotes a few log lines is still prose; a log with a few chatty warnings is still a log)."""
from __future__ import annotations

import re

MIN_LINES = 3            # fewer non-empty lines than this: not enough to tell
RECORD_SHARE = 0.25      # of the non-empty lines, at most this share are records
GLUE_SHARE = 0.15        # of the words, at least this share hold sentences together (logs: under 0.14)
SENTENCE_SHARE = 0.3     # of the lines outside indented blocks, at least this share are whole sentences
MAX_LINES = 400          # lines of the head looked at
PROBLEM = "prose beside the logs (notes or a write-up, not output of the run); not read"

_WORD = re.compile(r"[A-Za-z][a-z']{1,20}[,.;:!?)]?")
# What a record line starts with or holds: a date or clock time, a level letter + date (glog), a bracketed
# prefix, a `key=value` or `key: value` pair with a number, a traceback frame, an NCCL host:pid:tid prefix.
_RECORD = re.compile(
    r"^\s*(?:\[|\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|[IWEF]\d{4} |File \"|Traceback \(|\w[\w.-]{0,40}:\d+:\d+ |"
    r"(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\b|[\w.]{1,40}: )|\b\w{1,30}=\S|\b\d+(?:\.\d+)?(?:e-?\d+)?\s*(?:/|it/s|s/it|%|ms)\b")
_CJK = re.compile(r"[\u4e00-\u9fff]")
# Words that hold sentences together; a record has few of them
_GLUE = frozenset("the a an is was were are be been it we i our this that to of and in on for with not but so "
                  "because after before when then which".split())


def is_sentence(line: str) -> bool:
    """A line that is mostly words: at least six, and words at least 70% of its tokens (Chinese text: mostly Han)."""
    tokens = line.split()
    if len(_CJK.findall(line)) >= 12 and not _RECORD.search(line):
        return True
    if len(tokens) < 6:
        return False
    # a `code span` is a prose habit (logs do not quote their own tokens): it counts as a word
    words = sum(1 for t in tokens if _WORD.fullmatch(t.strip("\"'*_(")) or t.startswith("`") or t.endswith(("`", "`,", "`.")))
    glue = sum(1 for t in tokens if t.lower().strip(",.;:") in _GLUE)
    return words >= 0.6 * len(tokens) and glue >= 2


_LIST = re.compile(r"^\d{1,2}[.)] ")
_SPAN = re.compile(r"`[^`]{0,200}`")


def is_record(line: str) -> bool:
    """A line shaped like a log record (time, level, prefix, key=value, metric, frame); quoted `code spans` are
    prose quoting a record, not one."""
    return bool(_RECORD.search(_SPAN.sub("", line[:400])) or _collected(line))


def _collected(line: str) -> bool:
    """A launcher's or collector's prefix (journald, docker compose, kubectl --prefix, kubelet's CRI files, ...:
    postmortem.parsers.prefixes) starts the line: output of the run, whatever follows."""
    from postmortem.parsers.prefixes import strip_prefixes
    return strip_prefixes(line[:400])[0] != line[:400]


def looks_like_prose(head: bytes) -> bool:
    """Whether the head of a text file reads as prose rather than a log (bounded: MAX_LINES lines of the head):
    few record lines, many glue words (the, is, was, to ...), and a good share of whole sentences."""
    text = head.decode("utf-8", "replace")
    if "\x1b" in text:  # colour codes (rich, loguru, colorlog) around a level word or an exception name
        from postmortem.ingest.textio import ANSI_RE
        text = ANSI_RE.sub("", text)
    lines = [ln for ln in text.splitlines()[:MAX_LINES] if ln.strip()]
    if len(lines) < MIN_LINES:
        return False
    if sum(ln.lstrip()[:1] == "{" and ln.rstrip()[-1:] == "}" for ln in lines) * 2 >= len(lines):
        return False  # JSON-lines records (a logger's, Docker's json-file driver's): a log, whatever the text says
    # the three tests in turn, each only when the ones before hold; the records stop counting once they are too
    # many (a log's lines are records from the first: a launcher's log was read whole, 1.5 ms a file)
    most = RECORD_SHARE * len(lines)
    records = 0
    for ln in lines:
        records += is_record(ln)
        if records > most:
            return False
    tokens = [t for ln in lines for t in ln.split()]
    glue = sum(1 for t in tokens if t.lower().strip(",.;:()") in _GLUE)
    if glue < GLUE_SHARE * len(tokens):
        return False
    body = [_LIST.sub("", ln.lstrip("#-*> ")).strip() for ln in lines if not ln.startswith(("    ", "\t"))]
    sentences = sum(1 for ln in body if is_sentence(ln) and not is_record(ln))
    return sentences >= SENTENCE_SHARE * max(1, len(body))

"""One rank's exception, seen directly: its own traceback, its torchrun error file saying the same, and every other
rank ended as a consequence (a closed peer, a timeout, the launcher's SIGTERM). That is not an inference, so the
verdict says it with high confidence and the fix names the exception, where it was raised and what it said."""
from __future__ import annotations

import pandas as pd

from postmortem.verdict.findings import Finding
from postmortem.verdict.sentences import clip

DIRECT_CONFIDENCE = 0.85
RULE = "first-exception"
ERROR_FILE_KINDS = ("torchrun_error",)


def direct_exception(root: Finding, tables) -> dict | None:
    """The exception's facts ({rank, exc_type, message, func, file, line, error_file}) when the root is one rank's
    exception that the error file confirms and that every other rank's end follows from; else None."""
    if root.rule != RULE or root.category != "rank_crash" or len(root.culprit_ranks) != 1:
        return None
    if " in a thread" in (root.title or ""):
        return None
    rank = root.culprit_ranks[0]
    ranks = tables.frames.get("ranks")
    if ranks is None or len(ranks) < 2 or not {"end", "end_cause"} <= set(ranks.columns):
        return None
    mine = ranks[ranks["rank"] == rank]
    others = ranks[ranks["rank"] != rank]
    if len(mine) != 1 or str(mine["end"].iloc[0]) != "exception" or str(mine["end_cause"].iloc[0]) != "root":
        return None
    if not len(others) or not (others["end_cause"].astype(str) == "consequence").all():
        return None
    tb = _traceback_of(tables, rank)
    if tb is None:
        return None
    exc_type = str(tb["exc_type"])
    error_file = _error_file_says(tables, rank, exc_type)
    if error_file is None:
        return None
    frame = tb["last_user_frame"] if isinstance(tb["last_user_frame"], dict) else {}
    return {"rank": rank, "exc_type": exc_type, "message": str(tb["exc_message"] or ""),
            "func": frame.get("func"), "file": str(frame.get("file") or "").rsplit("/", 1)[-1] or None,
            "line": frame.get("line"), "error_file": error_file}


def strengthen(root: Finding, tables) -> bool:
    """Raise the root's confidence and make its fix about the exception when direct_exception holds; True if so."""
    facts = direct_exception(root, tables)
    if facts is None:
        return False
    root.confidence = max(root.confidence, DIRECT_CONFIDENCE)
    root.remediation = fix_text(facts)
    root.explanation = (f"{root.explanation} Rank {facts['rank']}'s own error file ({facts['error_file']}) records "
                        f"the same {facts['exc_type']}, and every other rank ended as a consequence of it.")
    return True


def where(facts: dict) -> str:
    """`load_batch (train.py:16)`, or "" when the traceback names no frame of the user's code."""
    if not facts.get("func"):
        return ""
    loc = f"{facts['file']}:{facts['line']}" if facts.get("file") and facts.get("line") is not None else facts.get("file")
    return f"{facts['func']} ({loc})" if loc else str(facts["func"])


def fix_text(facts: dict) -> str:
    """The fix, about this exception: what raised it, where, with what message; the other ranks need nothing."""
    at = where(facts)
    msg = clip(facts["message"], 160)
    return (f"Fix the {facts['exc_type']} raised {'in ' + at + ' ' if at else ''}on rank {facts['rank']}"
            + (f" (\"{msg}\")" if msg else "")
            + ": it is the input or code path that rank took at that step (the message names it). The other "
              "ranks' errors (closed connections, timeouts, SIGTERM) follow from it and need no change.")


def fix_text_zh(facts: dict) -> str:
    """fix_text in Chinese, from the same facts."""
    at = where(facts)
    msg = clip(facts["message"], 160)
    return (f"修复 rank {facts['rank']} {'在 ' + at + ' ' if at else ''}抛出的 {facts['exc_type']}"
            + (f"（“{msg}”）" if msg else "")
            + "：它来自该 rank 在这一步读到的输入或走到的代码路径（异常消息指出了是哪个）。其他 rank 的报错（连接断开、"
              "超时、SIGTERM）都是它的连锁反应，无需修改。")


def _traceback_of(tables, rank: int):
    """The rank's first traceback (its root exception), or None."""
    tb = tables.frames.get("tracebacks")
    if tb is None or not len(tb):
        return None
    tb = tb[(tb["rank"] == rank) & (tb["exc_type"] != "<truncated>")]
    return tb.iloc[0] if len(tb) else None


def _error_file_says(tables, rank: int, exc_type: str) -> str | None:
    """The error file (torchrun's error.json) of `rank`, or the launcher's parent copy, that records exc_type."""
    src = tables.frames.get("sources")
    tb = tables.frames.get("tracebacks")
    if src is None or tb is None or not len(tb):
        return None
    files = set(src[src["kind"].isin(list(ERROR_FILE_KINDS))]["source"].tolist())
    rows = tb[tb["source"].isin(list(files)) & (tb["exc_type"] == exc_type)]
    rows = rows[rows["rank"].isna() | (rows["rank"] == rank)]
    for s, r in zip(rows["source"].tolist(), rows["rank"].tolist()):
        if not pd.isna(r):
            return s
    return rows["source"].iloc[0] if len(rows) else None

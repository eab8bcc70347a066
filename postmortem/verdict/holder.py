"""The thread a stuck rank most likely waits on: when the culprit's main thread sits idle in the user's own code
(a `with lock:`, a queue get, an event wait) and the same process runs a thread of the user's code that no other rank
runs, that odd thread is the likely holder (the lock, the queue's producer). A py-spy dump does not show locks; the
thread list does show which thread only the stuck rank has, and that is what is named, with its frame."""
from __future__ import annotations

import pandas as pd

from postmortem.verdict.findings import Evidence, Finding
from postmortem.stacks import last_user_frame, short_file

ROOT_CATEGORIES = ("straggler",)
MAX_NAMED = 2


def _frames(v) -> list:
    return v if isinstance(v, list) else []


def _user_top(frames: list) -> dict | None:
    """The innermost frame when it is the user's own code (not a library, the standard library or native)."""
    top = frames[0] if frames else None
    return top if top is not None and last_user_frame(frames) is top else None


def _key(name, frames: list) -> tuple:
    top = _user_top(frames) or {}
    return (str(name or ""), str(top.get("func") or ""))


def holders(root: Finding, stacks: pd.DataFrame) -> list[dict]:
    """The odd user-code threads of the culprit's process ({thread_name, func, file, line, source, at, rank}), when
    the culprit's main thread waits idle in the user's code; [] otherwise."""
    if root.category not in ROOT_CATEGORIES or len(root.culprit_ranks) != 1 or stacks is None or not len(stacks):
        return []
    rank = root.culprit_ranks[0]
    st = stacks[stacks["thread_name"].notna()]
    mine = st[st["rank"] == rank]
    if not len(mine):
        return []
    # one dump of the culprit (the first source that has its main thread), so a .txt and a .json of it count once
    main = mine[mine["thread_name"] == "MainThread"]
    if not len(main):
        return []
    # a text dump first: its threads have lines of their own to cite
    first = main.iloc[sorted(range(len(main)), key=lambda i: str(main["source"].iloc[i]).endswith(".json"))[0]]
    if bool(first["active"]) or _user_top(_frames(first["frames"])) is None:
        return []
    same = mine[(mine["source"] == first["source"]) & (mine["thread_name"] != "MainThread")]
    peers = {_key(n, _frames(f)) for n, f in zip(st[st["rank"] != rank]["thread_name"], st[st["rank"] != rank]["frames"])}
    out = []
    for r in same.to_dict("records"):
        frames = _frames(r["frames"])
        top = _user_top(frames)
        if top is None or _key(r["thread_name"], frames) in peers:
            continue
        out.append({"thread_name": str(r["thread_name"]), "func": top.get("func"),
                    "file": short_file(top.get("file") or "").rsplit("/", 1)[-1], "line": top.get("line"),
                    "source": r["source"], "at": r["line"], "rank": rank})
    return out[:MAX_NAMED] if len(out) <= MAX_NAMED else []


def where(h: dict) -> str:
    """`prefetch_features (train.py:22)`."""
    return f"{h['func']} ({h['file']}:{h['line']})" if h.get("line") is not None else str(h["func"])


def name_holder(root: Finding, tables) -> list[dict]:
    """Say in the root finding which thread the stuck one most likely waits on (explanation, fix, a cited line)."""
    found = holders(root, tables.frames.get("stacks"))
    if not found:
        return []
    names = " and ".join(f"'{h['thread_name']}' in {where(h)}" for h in found)
    rank = root.culprit_ranks[0]
    one = len(found) == 1
    root.explanation = (f"{root.explanation} The thread list of rank {rank} shows {'a thread' if one else 'threads'} "
                        f"no other rank runs: {names}; the stuck main thread most likely waits on a lock or queue "
                        f"{'it holds' if one else 'they hold'} (py-spy does not show locks).")
    root.remediation = (f"{root.remediation} Start with {'thread' if one else 'threads'} {names} on rank {rank}: it "
                        f"most likely holds what the main thread waits for (never hold a lock across slow I/O or a "
                        f"sleep; give the I/O a timeout).")
    cited = [Evidence(h["source"], int(h["at"]), rank, f"{h['thread_name']} [user code] in {where(h)}")
             for h in found if h["source"] and h["at"] is not None and not pd.isna(h["at"])]
    root.evidence[1:1] = cited  # right after the stuck thread's own line
    return found

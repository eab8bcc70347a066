"""Ray actors' output prefixes `(RayTrainWorker pid=P, ip=A) ...` name a pid, not a rank; Ray Train lists each
worker's pid with its rank when the worker group starts. Ray Train v1 (`_internal/backend_executor.py`, "Started
distributed worker processes:") and v2 (`v2/_internal/execution/worker_group/worker_group.py`) both print
`- (node_id=N, ip=A, pid=P) world_rank=R, local_rank=L, node_rank=K` / `- (ip=A, pid=P) world_rank=R, ...`, and
that line may itself carry the controller's actor prefix. This module reads those listings and gives a prefixed
line its rank."""
from __future__ import annotations

import regex

# the listing line: bounded, anchored on Ray's own words (`pid=P) world_rank=R`)
LISTING_RE = regex.compile(r"\bpid=(?P<pid>\d{1,9})\) world_rank=(?P<rank>\d{1,6})\b")
# an actor's output prefix at the start of a line (Ray's log_monitor writes `(ActorName pid=P[, ip=A]) `, also with
# a colour escape around it when the driver's stdout was a terminal)
ACTOR_RE = regex.compile(r"(?:\x1b\[[0-9;]{0,12}m)?\((?P<actor>[A-Za-z_][\w.]{0,80}) pid=(?P<pid>\d{1,9})(?:, ip=[\d.:a-fA-F]{1,45})?\)")


# Ray's log deduplication (ray/_private/ray_logging: `... [repeated 2x across cluster]`) appends this to a line that
# several actors printed; the line is the same text without it
# (the first grouped line of a run adds Ray's note, `(Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 ...)`)
DEDUP_RE = regex.compile(r" ?(?:\x1b\[[0-9;]{0,12}m)? ?\[repeated \d{1,9}x across cluster\]"
                         r"(?: \(Ray deduplicates logs[^)\n]{0,400}\))?(?:\x1b\[[0-9;]{0,12}m)?\s{0,4}$")


class ActorRanks:
    """pid -> world rank from Ray Train's worker listings, learned from the file's first lines and as lines go by."""

    def __init__(self, head_lines: list[str]) -> None:
        self.ranks: dict[int, int] = {}
        for line in head_lines:
            self.learn(line)

    def learn(self, line: str) -> None:
        """Record the pid and rank of a worker listing line (a cheap literal test first: most lines are not)."""
        if "world_rank=" not in line:
            return
        m = LISTING_RE.search(line)
        if m:
            self.ranks[int(m.group("pid"))] = int(m.group("rank"))

    def rank_of(self, line: str) -> int | None:
        """The rank of a line whose actor prefix names a listed pid, else None."""
        if not self.ranks or " pid=" not in line[:120]:
            return None
        m = ACTOR_RE.match(line)
        return self.ranks.get(int(m.group("pid"))) if m else None

    def note(self, line: str, info: dict) -> str:
        """Learn from the line, give it its rank in `info` when its prefix names a listed pid; the line without Ray's
        deduplication suffix."""
        self.learn(line)
        if "across cluster" in line:
            cut = DEDUP_RE.sub("", line)
            if cut != line:
                # the line stands for N lines of other actors (Ray masks their numbers when it groups them): it is
                # no fact of the actor whose prefix it carries, so it gets no rank (textlog keeps it out of that
                # rank's tracebacks and steps)
                info["ray_dedup"] = True
                return cut
        rank = self.rank_of(line)
        if rank is not None and info.get("rank") is None:
            info["rank"] = rank
        return line


def scheme_for(head_lines: list[str]) -> ActorRanks | None:
    """An ActorRanks for a file whose first lines carry Ray actor prefixes, else None (no cost for other logs)."""
    # (one search of the joined lines first: most logs have no " pid=" at all, and a line-by-line look cost ~60 us)
    if " pid=" in "\n".join(head_lines) and any(" pid=" in ln[:120] and ACTOR_RE.match(ln) for ln in head_lines):
        return ActorRanks(head_lines)
    return None


# Ray Train's WorkerGroupError groups the workers' errors by text (ray/train/v2: `[Rank 0,4,5 Error Snippet]:`, then
# the truncated traceback and the exception those ranks raised): how each listed rank ended, when their own output
# was cut or deduplicated away
SNIPPET_RE = regex.compile(r"^\[Rank (?P<ranks>\d{1,6}(?:\s{0,2},\s{0,2}\d{1,6}){0,4095}) Error Snippet\]:$")


def snippet_ranks(message: str) -> list[int] | None:
    """The ranks a `[Rank 0,4,5 Error Snippet]:` header stands for, else None (a literal test first)."""
    if "Error Snippet]" not in message:
        return None
    m = SNIPPET_RE.match(message.strip())
    return [int(r) for r in m.group("ranks").replace(" ", "").split(",")] if m else None

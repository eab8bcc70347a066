"""Main-thread selection and STAT-style merging of stacks across ranks; dumped pids joined to ranks."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from postmortem.stacks.frames import _sig_frames, _sig_key, bare_name, is_native, short_file, signature
from postmortem.stacks.classify import blocking_frame, classify_frames, is_launcher, last_user_frame


# ---------------------------------------------------------------------------------------------------------------
# Main-thread selection and merging across ranks

def main_thread_rows(stacks) -> list[int]:
    """Positions of the main thread of each dump (a stacks DataFrame or a list of row dicts): the thread named
    `MainThread`, else the one whose tid is the pid, else the one with `<module>` outermost, else a lone thread."""
    rows = _rows(stacks)
    by_dump: dict = {}
    for i in range(rows.n):
        by_dump.setdefault(rows.get(i, "dump") or (rows.get(i, "source"), rows.get(i, "pid")), []).append(i)
    out = [_pick_main(rows, idxs) for idxs in by_dump.values()]
    return sorted(i for i in out if i is not None)


def _pick_main(rows: "_Rows", idxs: list[int]) -> int | None:
    for i in idxs:
        if rows.get(i, "thread_name") == "MainThread":
            return i
    for i in idxs:
        pid, tid = rows.get(i, "pid"), rows.get(i, "thread")
        if pid is not None and tid is not None and str(tid) == str(pid):
            return i
    for i in idxs:
        py = [f for f in rows.get(i, "frames") or [] if not is_native(f)]
        if py and py[-1].get("func") == "<module>":
            return i
    if len(idxs) == 1:
        return idxs[0]
    return None


def _plain(v):
    """A pandas/NumPy scalar (or NA) as a plain Python value."""
    if v is None:
        return None
    try:
        if v != v:  # NaN / NA
            return None
    except (TypeError, ValueError):
        return None
    if hasattr(v, "item"):
        try:
            return v.item()
        except (ValueError, AttributeError):
            return v
    return v


@dataclass
class StackNode:
    """One frame of the merged prefix tree; `members` are the ranks (or dump ids) whose stacks pass through it."""
    func: str
    file: str
    line: int | None = None          # line of the first member seen at this node (lines differ across ranks)
    members: list = field(default_factory=list)
    children: list["StackNode"] = field(default_factory=list)

    @property
    def count(self) -> int:
        """Number of members through this node."""
        return len(self.members)

    def to_dict(self) -> dict:
        """Nested plain dict (for JSON / templates)."""
        return {"func": self.func, "file": self.file, "line": self.line, "count": self.count,
                "ranks": rank_ranges(self.members), "children": [c.to_dict() for c in self.children]}


@dataclass
class StackClass:
    """An equivalence class: members whose (main-thread) stacks have the same signature."""
    signature: str
    members: list                     # ranks (int), or dump ids (str) when a dump has no rank
    frames: list[dict]                # a representative stack, innermost first
    category: str                     # classify_frames of the representative
    blocking: dict | None             # blocking_frame of the representative
    user_frame: dict | None           # last_user_frame of the representative
    odd: bool = False                 # smaller than the largest class: its members are odd ones out

    @property
    def size(self) -> int:
        """Number of members in the class."""
        return len(self.members)

    @property
    def ranks(self) -> list[int]:
        """The members that are known ranks."""
        return [m for m in self.members if isinstance(m, int)]

    def to_dict(self) -> dict:
        """Plain dict (for JSON / templates)."""
        return {"signature": self.signature, "size": self.size, "odd": self.odd, "ranks": rank_ranges(self.members),
                "members": list(self.members), "category": self.category, "blocking": _frame_str(self.blocking),
                "user_frame": _frame_str(self.user_frame)}


@dataclass
class MergedStacks:
    """Stacks of many ranks merged: prefix tree, equivalence classes, odd ones out, least-progressed ranks."""
    threads: str
    tree: StackNode
    classes: list[StackClass]                       # largest first
    odd_ones: list = field(default_factory=list)    # members of classes smaller than the largest
    least_progressed: list = field(default_factory=list)
    least_progressed_why: str = ""
    members: list = field(default_factory=list)     # every member merged (ranks first, then dump ids)
    launchers: list = field(default_factory=list)   # dump ids of launcher processes left out of the merge
    empty: list = field(default_factory=list)       # members whose selected stack had no frames
    unranked: list = field(default_factory=list)    # dump ids left out because other dumps have ranks

    @property
    def majority(self) -> StackClass | None:
        """The largest class when it is strictly larger than every other, else None."""
        if not self.classes:
            return None
        if len(self.classes) > 1 and self.classes[1].size == self.classes[0].size:
            return None
        return self.classes[0]

    def class_of(self, member) -> StackClass | None:
        """The class a member (rank) belongs to (the first, when threads='all')."""
        for c in self.classes:
            if member in c.members:
                return c
        return None

    def to_dict(self) -> dict:
        """Plain dict (for JSON / templates)."""
        maj = self.majority
        return {"threads": self.threads, "members": list(self.members), "classes": [c.to_dict() for c in self.classes],
                "majority": maj.signature if maj else None, "odd_ones": list(self.odd_ones),
                "least_progressed": list(self.least_progressed), "least_progressed_why": self.least_progressed_why,
                "launchers": list(self.launchers), "empty": list(self.empty), "unranked": list(self.unranked),
                "tree": self.tree.to_dict()}

    def render_text(self, max_lines: int = 200) -> str:
        """The prefix tree as indented text, single-child chains kept, each line `[ranks] func (file:line)`."""
        out: list[str] = []

        def walk(node: StackNode, depth: int) -> None:
            if len(out) >= max_lines:
                return
            loc = f"{node.file}:{node.line}" if node.line is not None else node.file
            out.append(f"{'  ' * depth}[{rank_ranges(node.members)}] {node.func} ({loc})")
            for child in node.children:
                walk(child, depth + 1)

        for child in self.tree.children:
            walk(child, 0)
        if len(out) >= max_lines:
            out.append("…")
        return "\n".join(out)


def _frame_str(fr: dict | None) -> str | None:
    if not fr:
        return None
    loc = fr.get("file") or "?"
    if fr.get("line") is not None:
        loc += f":{fr['line']}"
    return f"{fr.get('func')} ({loc})"


def rank_ranges(members: Iterable) -> str:
    """Compact member list: ranks as ranges (`0-6,8`), then dump ids."""
    ints = sorted({m for m in members if isinstance(m, int)})
    others = sorted({str(m) for m in members if not isinstance(m, int)})
    parts: list[str] = []
    i = 0
    while i < len(ints):
        j = i
        while j + 1 < len(ints) and ints[j + 1] == ints[j] + 1:
            j += 1
        parts.append(str(ints[i]) if i == j else f"{ints[i]}-{ints[j]}")
        i = j + 1
    return ",".join(parts + others)


def _member_sort_key(m):
    return (1, str(m)) if not isinstance(m, int) else (0, m)


class _Rows:
    """Column-wise view of stacks rows: no per-row dicts, so 4,096 dumps x many threads merge quickly."""

    COLS = ("source", "line", "rank", "ts", "pid", "thread", "thread_name", "frames", "dump", "signature")

    def __init__(self, cols: dict[str, list], n: int):
        self.cols, self.n = cols, n

    def get(self, i: int, col: str):
        c = self.cols.get(col)
        return c[i] if c is not None else None

    def set(self, i: int, col: str, value) -> None:
        self.cols.setdefault(col, [None] * self.n)[i] = value


def _rows(stacks) -> _Rows:
    """The columns the merge needs, NA -> None, from a stacks DataFrame or a list of row dicts."""
    if hasattr(stacks, "columns"):
        cols = {}
        for c in _Rows.COLS:
            if c not in stacks.columns:
                continue
            values = stacks[c].tolist()
            if c in ("rank", "pid", "line"):
                values = [_int_or_none(v) for v in values]
            elif c != "frames":
                values = [None if (v is None or v != v) else v for v in values]  # NaN/NA -> None
            cols[c] = values
        return _Rows(cols, len(stacks))
    rows = list(stacks)
    cols = {c: [(_int_or_none(r.get(c)) if c in ("rank", "pid", "line") else r.get(c)) for r in rows]
            for c in _Rows.COLS}
    return _Rows(cols, len(rows))


def _int_or_none(v) -> int | None:
    if v is None:
        return None
    try:
        if v != v:
            return None
        return int(v)
    except (TypeError, ValueError):
        return None


def _child_level(frames: list[dict]) -> int:
    """2 for a DataLoader worker, 1 for another multiprocessing child, 0 for a rank's own process (including
    ranks started by torch.multiprocessing.spawn): the lower, the likelier the process is the rank itself."""
    level = 0
    for f in frames:
        sf = short_file(f.get("file"))
        if sf.startswith("torch/utils/data/_utils/worker.py"):
            return 2
        if sf == "torch/multiprocessing/spawn.py" and bare_name(f.get("func")) == "_wrap":
            return 0
        if sf.startswith("multiprocessing/") and bare_name(f.get("func")) in ("_bootstrap", "spawn_main", "_main"):
            level = 1
    return level


def merge_stacks(stacks_df, threads: str = "main", unranked: str = "auto") -> MergedStacks:
    """Merge the stacks of all ranks STAT-style: prefix tree, classes of identical signatures, odd ones out.

    threads="main": one stack per rank, the main thread of the rank's own process (not a DataLoader worker or
    other multiprocessing child), from its latest dump. threads="all": every thread of the rank's latest dump
    of each process; a rank then belongs to as many classes as it has distinct thread stacks, and the odd ones
    out are the ranks whose set of thread stacks differs from the most common set. Launcher processes
    (torchrun agent) are left out. Dumps without a rank are merged under their dump id; with unranked="auto"
    they are left out (listed in `.unranked`) as soon as any dump has a rank, since they are then launchers or
    helpers rather than ranks; unranked="keep" keeps them.
    """
    if threads not in ("main", "all"):
        raise ValueError("threads must be 'main' or 'all'")
    if unranked not in ("auto", "keep"):
        raise ValueError("unranked must be 'auto' or 'keep'")
    rows = _rows(stacks_df)
    by_dump: dict = {}
    for i in range(rows.n):
        dump = rows.get(i, "dump")
        if dump is None:
            dump = f"{rows.get(i, 'source')}:{rows.get(i, 'pid')}"
        by_dump.setdefault(dump, []).append(i)

    launchers: list = []
    candidates: list[tuple] = []   # (member, order key, dump, row indexes, is_child)
    role_cache: dict = {}
    for dump, idxs in by_dump.items():
        main = _pick_main(rows, idxs)
        launcher, child = False, 0
        for i in ([main] if main is not None else idxs):
            sig = _row_signature(rows, i)
            if sig not in role_cache:
                fr = rows.get(i, "frames") or []
                role_cache[sig] = (is_launcher(fr[-8:]), _child_level(fr))
            launcher = launcher or role_cache[sig][0]
            child = max(child, role_cache[sig][1])
        if launcher:
            launchers.append(dump)
            continue
        ranks = {rows.get(i, "rank") for i in idxs} - {None}
        member = next(iter(ranks)) if len(ranks) == 1 else dump
        order = (str(rows.get(idxs[0], "ts") or ""), str(rows.get(idxs[0], "source") or ""),
                 rows.get(idxs[0], "line") or 0)
        sel = [main] if threads == "main" else idxs
        sel = [i for i in sel if i is not None]
        candidates.append((member, order, dump, sel, child))

    # One process per member for threads="main": the rank's own process, latest dump; for "all", latest per pid.
    chosen: dict = {}
    for member, order, dump, sel, child in candidates:
        if threads == "main":
            key = member
            rank_key = (-child, order)
        else:
            pid = rows.get(sel[0], "pid") if sel else None
            key = (member, pid if pid is not None else dump)
            rank_key = (0, order)
        prev = chosen.get(key)
        if prev is None or rank_key > prev[0]:
            chosen[key] = (rank_key, member, sel)

    dropped: list = []
    if unranked == "auto" and any(isinstance(m, int) for _, m, _ in chosen.values()):
        dropped = sorted({m for _, m, _ in chosen.values() if not isinstance(m, int)})
    stacks: list[tuple] = []   # (member, frames, signature)
    for _, member, sel in chosen.values():
        if dropped and not isinstance(member, int):
            continue
        if not sel:
            stacks.append((member, [], ""))  # no main thread could be told apart: listed as empty
        for i in sel:
            stacks.append((member, rows.get(i, "frames") or [], _row_signature(rows, i)))
    merged = _merge(stacks, threads, launchers)
    merged.unranked = dropped
    return merged


def _row_signature(rows: _Rows, i: int) -> str:
    """Row i's signature column (computed by its parser), else computed from its frames."""
    sig = rows.get(i, "signature")
    frames = rows.get(i, "frames")
    if isinstance(sig, str) and (sig or not frames):
        return sig
    sig = signature(frames or [])
    rows.set(i, "signature", sig)
    return sig


def _merge(stacks: list[tuple], threads: str, launchers: list) -> MergedStacks:
    root = StackNode("<root>", "")
    groups: dict[str, set] = {}
    reps: dict[str, list[dict]] = {}
    empty: list = []
    members_all: set = set()
    for member, frames, sig in stacks:
        members_all.add(member)
        if not sig:
            empty.append(member)
            continue
        g = groups.get(sig)
        if g is None:
            groups[sig] = g = set()
            reps[sig] = frames
        g.add(member)
    # the prefix tree is built from the distinct stacks only: cost grows with distinct stacks x depth
    index: dict[int, dict] = {}   # id(node) -> {frame key: child}
    node_members: dict[int, set] = {id(root): set()}
    for sig, members in groups.items():
        node = root
        node_members[id(root)].update(members)
        for fr in reversed(_sig_frames(reps[sig])):
            key = _sig_key(fr)
            kids = index.setdefault(id(node), {})
            child = kids.get(key)
            if child is None:
                child = StackNode(fr.get("func") or "?", short_file(fr.get("file")) if not is_native(fr)
                                  else (fr.get("file") or ""), fr.get("line"))
                kids[key] = child
                node.children.append(child)
                node_members[id(child)] = set()
            node_members[id(child)].update(members)
            node = child
    todo = [root]
    while todo:
        n = todo.pop()
        n.members = sorted(node_members.get(id(n), ()), key=_member_sort_key)
        todo.extend(n.children)
    classes = []
    for sig, members in groups.items():
        frames = reps[sig]
        classes.append(StackClass(sig, sorted(members, key=_member_sort_key), frames, classify_frames(frames),
                                  blocking_frame(frames), last_user_frame(frames)))
    classes.sort(key=lambda c: (-c.size, _member_sort_key(c.members[0]) if c.members else (2, "")))
    odd: list = []
    if classes and threads == "main":
        top = classes[0].size
        for c in classes:
            c.odd = c.size < top
        odd = sorted({m for c in classes if c.odd for m in c.members}, key=_member_sort_key)
    elif classes:
        # all threads: a member's profile is its set of thread stacks; odd = members off the commonest profile,
        # odd classes = stacks that fewer than half of the members have
        profile: dict = {}
        for c in classes:
            for m in c.members:
                profile.setdefault(m, set()).add(c.signature)
        counts: dict = {}
        for m, sigs in profile.items():
            counts[frozenset(sigs)] = counts.get(frozenset(sigs), 0) + 1
        ranked = sorted(counts.values(), reverse=True)
        if len(ranked) > 1 and ranked[0] > ranked[1]:
            common = max(counts, key=counts.get)
            odd = sorted((m for m, sigs in profile.items() if frozenset(sigs) != common), key=_member_sort_key)
        for c in classes:
            c.odd = c.size * 2 < len(profile)
    least, why = _least_progressed(classes, threads)
    return MergedStacks(threads=threads, tree=root, classes=classes, odd_ones=odd, least_progressed=least,
                        least_progressed_why=why, members=sorted(members_all, key=_member_sort_key),
                        launchers=sorted(launchers),
                        empty=sorted(set(empty) - {m for c in classes for m in c.members}, key=_member_sort_key))


_WORK = ("data_loading", "logging", "checkpoint_io", "compute", "unknown", "sleep_lock")


def _least_progressed(classes: list[StackClass], threads: str) -> tuple[list, str]:
    """Members still doing work while others already wait in a collective (they have not reached it yet)."""
    if threads != "main" or len(classes) < 2:
        return [], ""
    waiting = [c for c in classes if c.category == "collective_wait"]
    working = [c for c in classes if c.category in _WORK]
    if not waiting or not working:
        if waiting and len(waiting) > 1:
            return [], "all ranks wait in collectives, at different call sites"
        return [], ""
    members = sorted({m for c in working for m in c.members}, key=_member_sort_key)
    n_wait = sum(c.size for c in waiting)
    cats = sorted({c.category for c in working})
    return members, (f"{len(members)} rank(s) in {'/'.join(cats)} while {n_wait} wait in a collective")


def join_ranks(stacks_df, hostpid_rank: dict):
    """Fill unknown ranks of stacks rows from an NCCL `host:pid -> rank` map: exact host:pid, or, for rows without
    a host, a pid that maps to one rank only. Returns a new DataFrame."""
    if stacks_df is None or len(stacks_df) == 0 or not hostpid_rank:
        return stacks_df
    by_pid: dict[int, set] = {}
    for key, rank in hostpid_rank.items():
        if "#" in key or ":" not in key:
            continue
        host, _, pid = key.rpartition(":")
        if pid.isdigit():
            by_pid.setdefault(int(pid), set()).add(rank)
    df = stacks_df.copy()
    ranks = df["rank"].tolist()
    for i, (rank, host, pid) in enumerate(zip(ranks, df["host"].tolist(), df["pid"].tolist())):
        if _plain(rank) is not None or _plain(pid) is None:
            continue
        pid = int(_plain(pid))
        hit = hostpid_rank.get(f"{_plain(host)}:{pid}") if _plain(host) else None
        if hit is None and not _plain(host) and len(by_pid.get(pid, ())) == 1:  # dumps rarely name their host
            hit = next(iter(by_pid[pid]))
        if hit is not None:
            ranks[i] = int(hit)
    df["rank"] = ranks
    df["rank"] = df["rank"].astype("Int64")
    return df


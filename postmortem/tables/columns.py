"""Rows of one table stored column-wise: the form parser processes send back (no pandas here: parser processes
never need it)."""
from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat


@dataclass
class Columns:
    """One table's rows stored column-wise: a fraction of the memory and pickle size of one dict per row. A key no
    row has is absent; a row without a key holds None there."""
    data: dict[str, list]
    n: int

    def __len__(self) -> int:
        return self.n


def to_columns(rows: list[dict]) -> Columns:
    """Row dicts -> Columns (every key any row has becomes a column; the keys are gathered in C)."""
    keys = set().union(*rows) if rows else set()
    return Columns({k: list(map(dict.get, rows, repeat(k))) for k in sorted(keys)}, len(rows))


# Columns whose text repeats across ranks (the same template, stamp, bar or stack printed by every rank): each
# result arrives from its own parser process with its own copies.
SHARED_TEXT = ("template", "message", "ts", "desc", "host", "signature", "thread_name", "exc_type", "exc_message",
               "level", "kind", "phase", "subsys", "state", "op")


# Columns of structured values that repeat across ranks (the same config echo's details, the same stack's frames):
# equal values (same keys in the same order) become one object. They are read, never changed, after parsing.
SHARED_VALUES = ("details", "frames")
_SCALARS = (str, int, float, bool, type(None))


def _frozen(value):
    """A hashable image of a dict/list of scalars (nested; the type of every non-string scalar kept, 1 is not True),
    or None when it holds anything else."""
    t = type(value)
    if t is str:
        return value
    if t in _SCALARS:
        return (t, value)
    if t is dict:
        items = ["d"]
        for k, v in value.items():
            f = _frozen(v)
            if f is None or type(k) is not str:
                return None
            items += (k, f)
        return tuple(items)
    if t is list:
        items = ["l"]
        for v in value:
            f = _frozen(v)
            if f is None:
                return None
            items.append(f)
        return tuple(items)
    return None


CANON_MAX = 1 << 16  # values remembered for sharing: what every rank prints is met early, a rank's own text is not
# Structured values are remembered apart from the text (canon[_VALUES]): the py-spy dumps of thousands of ranks are
# the smallest files, parsed last, when the rank-specific text has long filled the text's share.
_VALUES = ("\0structured values",)


def share_text(rows: dict, canon: dict, limit: int = CANON_MAX) -> None:
    """Make equal strings of the SHARED_TEXT columns, and equal dicts/lists of the SHARED_VALUES columns, one object
    across results (`canon`: text or frozen value -> the object kept), as results arrive, so that a job of
    thousands of ranks holds each repeated text, config echo and stack once (the parent's peak is these rows).
    Past `limit` values new ones are no longer remembered: the rank-specific text that fills it would cost more
    there than it saves, and what all ranks print is already in."""
    get = canon.get
    values_canon = canon.get(_VALUES)
    if values_canon is None:
        values_canon = canon[_VALUES] = {}
    vget = values_canon.get
    text_limit = limit + 1  # (the values' own dict is one key of canon)
    for cols in rows.values():
        if type(cols) is not Columns:
            continue
        data = cols.data
        for name in SHARED_TEXT:
            values = data.get(name)
            if values:
                out = []
                for v in values:
                    if type(v) is str:
                        kept = get(v)
                        if kept is None:
                            if len(canon) < text_limit:
                                canon[v] = v
                        else:
                            v = kept
                    out.append(v)
                data[name] = out
        for name in SHARED_VALUES:
            values = data.get(name)
            if values:
                out = []
                for v in values:
                    key = _frozen(v) if type(v) in (dict, list) else None
                    if key is not None:
                        kept = vget(key)
                        if kept is None:
                            if len(values_canon) < limit:
                                values_canon[key] = v
                        else:
                            v = kept
                    out.append(v)
                data[name] = out

"""A column of nullable integers or floats kept as a compact array while parse results arrive (pandas only when
the table is assembled)."""
from __future__ import annotations

from array import array

_EXACT_FLOAT_INT = 1 << 53  # pandas turns a column of ints with nulls into floats first: beyond this they differ


class Numbers:
    """A numeric column (an Int64 or float64 of schema.DTYPES) held as machine numbers while results arrive: nine
    bytes a value instead of a Python number and a list slot. `typed()` is False once a value came that only the
    frame builder's coercion knows what to do with (a string, a bool, a float in an integer column): the column is
    then given to it as a list, as before."""
    __slots__ = ("code", "values", "mask", "big", "typed")

    def __init__(self, code: str):
        self.code = code  # "q": Int64 (mask: null), "d": float64 (null: NaN)
        self.values = array(code)
        self.mask = bytearray()
        self.big = False  # an integer beyond 2**53
        self.typed = True

    def __len__(self) -> int:
        return len(self.values)

    def extend(self, seq) -> None:
        values, mask = self.values, self.mask
        if self.code == "q":
            for v in seq:
                if v is None:
                    values.append(0)
                    mask.append(1)
                elif type(v) is int and -_EXACT_FLOAT_INT <= v <= _EXACT_FLOAT_INT:
                    values.append(v)
                    mask.append(0)
                elif type(v) is int and -(1 << 63) <= v < (1 << 63):
                    values.append(v)
                    mask.append(0)
                    self.big = True
                else:
                    raise TypeError(v)
        else:
            nan = float("nan")
            for v in seq:
                if v is None:
                    values.append(nan)
                elif type(v) is float or (type(v) is int and -(1 << 63) <= v < (1 << 63)):
                    values.append(v)
                else:
                    raise TypeError(v)

    def __iter__(self):
        if self.code == "q":
            return (None if m else v for v, m in zip(self.values, self.mask))
        return iter(None if v != v else v for v in self.values)

    def __getitem__(self, i: int):
        if self.code == "q":
            return None if self.mask[i] else self.values[i]
        v = self.values[i]
        return None if v != v else v

    def __setitem__(self, i: int, v) -> None:
        if v is None:
            if self.code == "q":
                self.mask[i] = 1
            else:
                self.values[i] = float("nan")
        elif type(v) is int and self.code == "q":
            self.values[i], self.mask[i] = v, 0
        else:
            raise TypeError(v)

    def as_list(self) -> list:
        return list(self)

    def reordered(self, spans: list) -> "Numbers":
        out = Numbers(self.code)
        out.big = self.big
        for _, start, n in spans:
            out.values.extend(self.values[start:start + n])
            if self.code == "q":
                out.mask.extend(self.mask[start:start + n])
        return out

    def series(self):
        """The column as the frame builder's coercion makes it (None where only that coercion knows: integers
        beyond 2**53 beside nulls, which it turns into floats first)."""
        import numpy as np
        import pandas as pd
        if self.big and 1 in self.mask:
            return None
        if self.code == "d":
            return pd.Series(np.frombuffer(self.values, dtype=np.float64).copy() if len(self.values) else
                             np.array([], dtype=np.float64))
        vals = np.frombuffer(self.values, dtype=np.int64).copy() if len(self.values) else np.array([], np.int64)
        mask = np.frombuffer(bytes(self.mask), dtype=np.bool_).copy() if len(self.mask) else np.array([], np.bool_)
        return pd.Series(pd.arrays.IntegerArray(vals, mask))

"""A loss that blows up before it turns NaN: the optimisation diverged (learning rate, warmup, missing clipping),
not one bad operation. Read from the steps table: the run of growing, finite losses that ends the series."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_STEPS = 3        # growing losses over at least this many steps
MIN_FACTOR = 10.0    # by at least this much per step (geometric mean)


@dataclass
class Divergence:
    """How a rank's loss grew before it stopped being finite."""
    rank: int | None
    first_step: int
    first_loss: float
    last_step: int
    last_loss: float
    factor: float            # geometric mean growth per step
    lr: float | None = None  # the learning rate the rank reported last, when it did

    @property
    def exponent(self) -> int:
        """log10 of the growth per step, rounded: 4 for x10^4."""
        return int(round(math.log10(self.factor)))


def divergence(steps, ranks: list[int] | None = None) -> Divergence | None:
    """The fastest divergence among the ranks' training losses (only `ranks` when given), or None."""
    if steps is None or not len(steps):
        return None
    st = steps[(steps["phase"] == "train") & steps["step"].notna() & steps["loss"].notna()]
    if ranks:
        st = st[st["rank"].isin(ranks)]
    best = None
    for rank, grp in st.groupby(st["rank"].fillna(-1), sort=True):
        g = grp.sort_values(["source", "line"])
        loss = g["loss"].to_numpy(dtype=float)
        step = g["step"].to_numpy(dtype=np.int64)
        finite = np.isfinite(loss) & (loss > 0)
        # the last run of finite, strictly growing losses over increasing steps
        end = len(loss) - 1
        while end >= 0 and not finite[end]:
            end -= 1
        start = end
        while start > 0 and finite[start - 1] and loss[start - 1] < loss[start] and step[start - 1] < step[start]:
            start -= 1
        n = int(step[end] - step[start]) if end > start else 0
        if n < MIN_STEPS - 1 or end - start + 1 < MIN_STEPS:
            continue
        factor = (loss[end] / loss[start]) ** (1.0 / n)
        if factor < MIN_FACTOR:
            continue
        lr = g["lr"].dropna() if "lr" in g else None
        d = Divergence(None if rank == -1 else int(rank), int(step[start]), float(loss[start]), int(step[end]),
                       float(loss[end]), float(factor), float(lr.iloc[-1]) if lr is not None and len(lr) else None)
        if best is None or d.factor > best.factor:
            best = d
    return best


def _num(x: float) -> str:
    return f"{x:.4g}"


def sentence(d: Divergence) -> str:
    """`The loss grew about x10^4 per step on rank 0 (282.7 at step 1 to 2.192e+24 at step 7) before it stopped
    being finite` (no final period)."""
    who = f" on rank {d.rank}" if d.rank is not None else ""
    return (f"The loss grew about x10^{d.exponent} per step{who} ({_num(d.first_loss)} at step {d.first_step} to "
            f"{_num(d.last_loss)} at step {d.last_step}) before it stopped being finite")


def fix(d: Divergence) -> str:
    """What to change for a diverging loss."""
    lr = f" (it was {_num(d.lr)})" if d.lr is not None else ""  # the facts the lines show, nothing more
    return (f"The optimisation diverged from the first steps: lower the learning rate{lr} by an order of magnitude or "
            "more, add warmup, clip gradients (torch.nn.utils.clip_grad_norm_), and check the loss's scale (a sum "
            "instead of a mean); torch.autograd.set_detect_anomaly(True) then finds any operation that still "
            "produces the first NaN.")

"""matplotlib figures of an Analysis (Agg canvas, no pyplot state): returned, never shown; PNG data URIs for HTML."""
from __future__ import annotations

import base64
import io

import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from reports import i18n

ROLE_COLOURS = {"culprit": "#c0392b", "affected": "#e39b2d", "other": "#7f8c8d", "unattributed": "#b8c0c8"}
ERROR_COLOUR = "#c0392b"
GREY_LINE = "#9aa4ad"
MAX_ARROWS = 12
MAX_LABELLED = 16
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans SC", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei",
             "Source Han Sans SC", "SimHei", "Microsoft YaHei", "PingFang SC", "AR PL UMing CN", "Droid Sans Fallback")


def make_figures(analysis, lang: str = "en") -> dict:
    """Name -> matplotlib Figure for the report's charts (timeline, steps, gpu_memory; only those with data)."""
    from reports import ranks as ranks_mod
    from reports import sections
    model = ranks_mod.build(analysis)
    out = {}
    for name, fig in (("timeline", timeline_figure(model, lang)), ("steps", steps_figure(model, lang)),
                      ("gpu_memory", gpu_figure(sections.gpu_model(analysis.tables.gpu, analysis.tables.events),
                                                lang))):
        if fig is not None:
            out[name] = fig
    return out


def to_data_uri(fig: Figure, dpi: int = 96) -> str:
    """PNG of a figure as a data: URI (deterministic: no software/date metadata)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None}, bbox_inches="tight", facecolor="white")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _labels(lang: str) -> tuple[dict, list[str] | None]:
    """Catalogue for figure text, and a font family list; CJK text falls back to English without a CJK font."""
    if lang == "en":
        return i18n.catalogue("en"), None
    from matplotlib import font_manager
    names = {f.name for f in font_manager.fontManager.ttflist}
    for name in CJK_FONTS:
        if name in names:
            return i18n.catalogue(lang), [name, "DejaVu Sans"]
    return i18n.catalogue("en"), None


def _new(lang: str, width: float, height: float):
    t, family = _labels(lang)
    fig = Figure(figsize=(width, height))
    ax = fig.add_subplot(1, 1, 1)
    if family:
        for item in (ax.title, ax.xaxis.label, ax.yaxis.label):
            item.set_fontfamily(family)
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)
    return fig, ax, t, family


def _x_axis(ax, axis, t) -> None:
    if axis.mode == "time" and axis.origin is not None:
        origin = axis.origin

        def fmt(x, _pos):
            return (origin + pd.Timedelta(seconds=float(x))).strftime("%H:%M:%S")
        ax.xaxis.set_major_formatter(FuncFormatter(fmt))
        ax.set_xlabel(t["fig_time"])
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel(t["fig_line"])


def _pad(ax, lo: float, hi: float) -> None:
    span = hi - lo
    pad = span * 0.04 if span > 0 else 1.0
    ax.set_xlim(lo - pad, hi + pad)


def timeline_figure(model, lang: str = "en") -> Figure | None:
    """Swimlanes: activity span, errors and stop per lane; arrows from the root cause to the ranks that waited."""
    lanes = model.lanes
    if not lanes:
        return None
    fig, ax, t, family = _new(lang, 10, 1.3 + 0.34 * len(lanes))
    labels = []
    drawn = [ln for ln in lanes if not ln.silent]
    lo = min(ln.first_x for ln in drawn)
    hi = max(ln.last_x for ln in drawn)
    # One artist per kind of mark, not three per lane. Same picture: a lane's marks stay inside its row (markers are
    # at most 14 pt tall, rows at least 0.34 in apart), and every bar draws before every mark (collections sit below
    # lines), so the order between lanes changes no pixel.
    bars, bar_colours, stop_xs, stop_ys, err_xs, err_ys = [], [], [], [], [], []
    for y, lane in enumerate(lanes):
        colour = ROLE_COLOURS[lane.role]
        labels.append(_lane_label(lane, t))
        if lane.silent:
            ax.text(lo, y, t["fig_silent"], va="center", ha="left", fontsize=8, color=colour, style="italic",
                    fontfamily=family or "DejaVu Sans")
            continue
        x0, y0 = lane.first_x, y - 0.18
        x1, y1 = x0 + max(lane.last_x - lane.first_x, 0), y0 + 0.36     # as broken_barh computes its corners
        bars.append([(x0, y0), (x0, y1), (x1, y1), (x1, y0)])
        bar_colours.append(colour)
        stop_xs += lane.stop_xs
        stop_ys += [y] * len(lane.stop_xs)
        err_xs += lane.error_xs
        err_ys += [y] * len(lane.error_xs)
    if bars:
        ax.add_collection(PolyCollection(np.array(bars), facecolors=bar_colours, alpha=0.35, edgecolor="none"))
    ax.plot(stop_xs, stop_ys, linestyle="none", marker="|", markersize=14, markeredgewidth=2, color="#222222")
    if err_xs:
        ax.plot(err_xs, err_ys, linestyle="none", marker="x", markersize=7, markeredgewidth=1.6, color=ERROR_COLOUR)
    _arrows(ax, lanes)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(labels, fontsize=8, fontfamily=family or "DejaVu Sans")
    for tick, lane in zip(ax.get_yticklabels(), lanes):
        if lane.role == "culprit":
            tick.set_color(ROLE_COLOURS["culprit"])
            if not family:  # CJK fallback fonts often ship one weight; asking for bold only logs a warning
                tick.set_fontweight("bold")
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    _pad(ax, lo, hi)
    _x_axis(ax, model.axis, t)
    ax.tick_params(axis="y", length=0)
    fig.tight_layout()
    return fig


def _lane_label(lane, t) -> str:
    if lane.unattributed:
        return t["unattributed_label"]
    if len(lane.ranks) == 1:
        return i18n.fmt(t, "fig_rank", rank=lane.ranks[0])
    from reports.sections import rank_ranges
    text = rank_ranges(lane.ranks)
    text = text if len(text) <= 22 else text[:21] + "…"
    return f"{text} ({len(lane.ranks)})"


def _arrows(ax, lanes) -> None:
    roots = [(y, ln) for y, ln in enumerate(lanes) if ln.role == "culprit" and not ln.silent]
    if not roots:
        return
    ry, root = roots[0]
    rx = root.first_error_x if root.first_error_x is not None else root.last_x
    targets = [(y, ln) for y, ln in enumerate(lanes) if ln.role == "affected"][:MAX_ARROWS]
    for y, lane in targets:
        tx = lane.first_error_x if lane.first_error_x is not None else lane.last_x
        ax.annotate("", xy=(tx, y), xytext=(rx, ry),
                    arrowprops={"arrowstyle": "->", "color": ROLE_COLOURS["culprit"], "lw": 1.2, "alpha": 0.8,
                                "connectionstyle": "arc3,rad=0.15", "shrinkA": 4, "shrinkB": 6})


def steps_figure(model, lang: str = "en") -> Figure | None:
    """Step reached over time per rank; ranks behind the front drawn in colour, the rest grey when there are many."""
    series = model.step_series
    if not series or all(len(xs) < 2 for xs, _ in series.values()):
        return None   # a single point per rank says nothing a table row does not
    fig, ax, t, family = _new(lang, 10, 2.9)
    front = max(r["last_step"] for r in model.step_last)
    behind = {r["rank"] for r in model.step_last if r["last_step"] < front}
    keys = sorted(series, key=lambda r: (r is None, r if r is not None else 0))
    many = len(keys) > MAX_LABELLED
    labelled = 0
    grey: list = []          # consecutive grey lines, drawn as one collection in the same order (same picture)
    for r in keys:
        xs, ys = series[r]
        if many and r not in behind:
            grey.append(np.column_stack([xs, ys]))
            continue
        _grey_lines(ax, grey)
        name = t["unattributed_label"] if r is None else i18n.fmt(t, "fig_rank", rank=r)
        show = labelled < MAX_LABELLED
        labelled += 1
        ax.plot(xs, ys, linewidth=1.4 if r in behind else 1.0, marker="o" if len(xs) <= 30 else None,
                markersize=3, label=name if show else None,
                color=ROLE_COLOURS["culprit"] if (many and r in behind) else None)
    _grey_lines(ax, grey)
    if many:
        ax.plot([], [], color="#9aa4ad", linewidth=0.8, label=t["fig_other_ranks"])
    ax.set_ylabel(t["fig_step"])
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    _x_axis(ax, model.step_axis, t)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, ncol=2 if labelled > 8 else 1, loc="upper left", frameon=False,
                  prop={"family": family, "size": 7} if family else {"size": 7})
    fig.tight_layout()
    return fig


def _grey_lines(ax, segments: list) -> None:
    """Draw (and empty) a batch of the steps chart's grey background lines as one artist."""
    if not segments:
        return
    # Styled as ax.plot(..., color=GREY, linewidth=0.6, alpha=0.5) would draw each line: projecting caps, round joins.
    ax.add_collection(LineCollection(segments, colors=GREY_LINE, linewidths=0.6, alpha=0.5, capstyle="projecting",
                                     joinstyle="round"))
    segments.clear()


def gpu_figure(gm, lang: str = "en") -> Figure | None:
    """Memory used per GPU over time (or snapshot index), capacity dashed, the first OOM as a red line."""
    if gm is None or not gm.series:
        return None
    fig, ax, t, family = _new(lang, 10, 3.4)
    for i, (key, (xs, used, total)) in enumerate(sorted(gm.series.items())):
        colour = f"C{i % 10}"
        ax.plot(xs, used, marker="o" if len(xs) <= 40 else None, markersize=4, linewidth=1.4, color=colour,
                label=key if i < MAX_LABELLED else None)
        if total:
            ax.axhline(total, color=colour, linestyle="--", linewidth=0.8, alpha=0.7)
    if gm.oom_x is not None:
        ax.axvline(gm.oom_x, color=ERROR_COLOUR, linewidth=1.6)
        ax.annotate(t["fig_oom"], xy=(gm.oom_x, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -12),
                    textcoords="offset points", color=ERROR_COLOUR, fontsize=8, fontweight="bold")
    ax.set_ylabel(t["fig_mem"])
    ax.set_ylim(bottom=0)
    if gm.mode == "time" and gm.origin is not None:
        from reports.ranks import Axis
        _x_axis(ax, Axis("time", gm.origin), t)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel(t["fig_snapshot"])
    ax.legend(fontsize=7, loc="lower right", frameon=False,
              prop={"family": family, "size": 7} if family else {"size": 7})
    fig.tight_layout()
    return fig

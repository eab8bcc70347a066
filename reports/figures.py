"""matplotlib figures of an Analysis (Agg canvas, no pyplot state): returned, never shown; PNG data URIs for HTML."""
from __future__ import annotations

import base64
import io
import os

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from postmortem.ingest import beside
from postmortem.reports import chart_layout, i18n
from postmortem.reports.sections import MAX_LABELLED, gpu_culprits

ROLE_COLOURS = {"culprit": "#c0392b", "affected": "#e39b2d", "other": "#7f8c8d", "unattributed": "#b8c0c8"}
ERROR_COLOUR = "#c0392b"
GREY_LINE = "#9aa4ad"
MAX_ARROWS = 12
MAX_STOP_LABELS = 6        # 'stopped at' labels on a steps chart of many ranks (the furthest behind first)
STOP_LABEL_W, STOP_LABEL_H = 0.22, 0.08  # a label's extent as a share of the steps chart's x and step ranges
MAX_GPU_HIGHLIGHT = 8      # coloured GPUs with a legend entry when the GPU chart has more than MAX_LABELLED
TOP_PEAK_GPUS = 3          # GPUs nearest their capacity, coloured when no GPU is lost, faulty or a culprit's
CAPACITY_LINE = "#5d6d7e"
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans SC", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei",
             "Source Han Sans SC", "SimHei", "Microsoft YaHei", "PingFang SC", "AR PL UMing CN", "Droid Sans Fallback")


def make_figures(analysis, lang: str = "en") -> dict:
    """Name -> matplotlib Figure for the report's charts (timeline, steps, gpu_memory; only those with data)."""
    from postmortem.reports import ranks as ranks_mod
    from postmortem.reports import sections
    model = ranks_mod.build(analysis)
    gm = sections.gpu_model(analysis.tables.gpu, analysis.tables.events)
    out = {}
    for name, fig in (("timeline", timeline_figure(model, lang)), ("steps", steps_figure(model, lang)),
                      ("gpu_memory", gpu_figure(gm, lang, gpu_culprits(analysis, gm)))):
        if fig is not None:
            out[name] = fig
    return out


DPI = 96


def to_data_uri(fig: Figure, dpi: int = DPI) -> str:
    """PNG of a figure as a data: URI (deterministic: no software/date metadata)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None}, facecolor="white")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


BESIDE_MIN_SUMMARIES = 64  # ranks in the model from which the timeline is drawn in a second process


WIDE_IN, NARROW_IN = 10.0, 4.0   # chart widths: a laptop (960 px at 96 dpi) and a phone (384 px, for 390 px screens)


def timeline_and_steps(model, lang: str = "en", width: float = WIDE_IN) -> tuple[str | None, str | None]:
    """Data URIs of the timeline and the steps chart (None where there is nothing to draw). For a big job on more
    than one CPU the timeline is drawn in a forked process while this one draws the steps chart: the two took
    ~0.25 s one after the other at 512 ranks. Same bytes either way (the child is a copy of this process)."""
    def draw(figure):
        fig = figure(model, lang, width=width)
        return None if fig is None else to_data_uri(fig)
    if _draw_beside(model):
        drawn: dict = {}
        timeline_uri = beside.call_beside(draw, timeline_figure, lambda: drawn.setdefault("steps", draw(steps_figure)))
        return timeline_uri, drawn["steps"]
    return draw(timeline_figure), draw(steps_figure)


def chart_uris(model, gm, culprits: dict, lang: str = "en") -> dict:
    """Data URIs of the report's charts from their models (postmortem.reports.ranks, sections.gpu_model): name -> URI or None
    where there is nothing to draw; `<name>_narrow` is the same chart drawn for a phone's width. What a chart process
    (postmortem.reports.chart_process) is asked to draw."""
    out = {}
    for suffix, width in (("", WIDE_IN), ("_narrow", NARROW_IN)):
        timeline, steps = timeline_and_steps(model, lang, width)
        gpu = gpu_figure(gm, lang, culprits, width=width) if gm is not None else None
        out.update({f"timeline{suffix}": timeline, f"steps{suffix}": steps,
                    f"gpu_memory{suffix}": None if gpu is None else to_data_uri(gpu)})
    return out


def _draw_beside(model) -> bool:
    """Worth a fork, and safe: a big model, a second CPU, and beside.can_fork() (fork, and no other thread)."""
    return len(model.summaries) >= BESIDE_MIN_SUMMARIES and (os.cpu_count() or 1) > 1 and beside.can_fork()


def warm_up() -> None:
    """Draw a chart of a few letters: loads the Agg canvas and the font faces the first real chart would."""
    fig = Figure(figsize=(1, 1))
    for style in ({}, {"fontweight": "bold"}, {"style": "italic"}):
        fig.text(0.5, 0.5, "0", **style)
    to_data_uri(fig)


def _labels(lang: str) -> tuple[dict, list[str] | None]:
    """Catalogue for figure text, and a font family list; CJK text falls back to English without a CJK font."""
    if lang == "en":
        return i18n.catalogue("en"), None
    from matplotlib import font_manager
    for attempt in range(2):
        names = {f.name for f in font_manager.fontManager.ttflist}
        for name in CJK_FONTS:
            if name in names:
                return i18n.catalogue(lang), [name, "DejaVu Sans"]
        if attempt == 0 and not _add_system_cjk_fonts(font_manager):
            break
    return i18n.catalogue("en"), None


_CJK_FILES = ("wqy", "notosanscjk", "notoserifcjk", "notosanssc", "sourcehansans", "droidsansfallback")


def _add_system_cjk_fonts(font_manager) -> bool:
    """matplotlib's font cache predates a CJK font installed later (apt-get install fonts-wqy-microhei): register
    the system's CJK font files with it. True when one was added."""
    added = False
    try:
        files = font_manager.findSystemFonts()
    except OSError:
        return False
    for path in files:
        base = os.path.basename(path).lower().replace("-", "").replace("_", "")
        if base.startswith(_CJK_FILES):
            try:
                font_manager.fontManager.addfont(path)
                added = True
            except (OSError, RuntimeError, ValueError):
                continue
    return added


def _new(lang: str, width: float, height: float):
    t, family = _labels(lang)
    # fixed size, at the dpi it is saved at (text measured for the margins, chart_layout.fit, is then as drawn)
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    if family:
        for item in (ax.title, ax.xaxis.label, ax.yaxis.label):
            item.set_fontfamily(family)
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)
    return fig, ax, t, family


def _x_axis(ax, axis, t, narrow: bool = False, order_label: str = "fig_order") -> None:
    if axis.mode == "time" and axis.origin is not None:
        origin = axis.origin
        lo, hi = ax.get_xlim()
        # the date once in the label (as the logs wrote it), times on the ticks: tenths of a second when the whole
        # span is a few seconds (ticks would repeat), no seconds when it is days
        span = hi - lo
        fmt_s = "%H:%M:%S.%f" if span < 10 else "%H:%M:%S" if span < 6 * 3600 else "%m-%d %H:%M"

        def fmt(x, _pos):
            text = (origin + pd.Timedelta(seconds=float(x))).strftime(fmt_s)
            return text[:-5] if fmt_s.endswith("%f") else text   # .123456 -> .1
        ax.xaxis.set_major_formatter(FuncFormatter(fmt))
        ax.xaxis.set_major_locator(MaxNLocator(3 if narrow else 7))
        ax.set_xlabel(i18n.fmt(t, "fig_time_on", date=(origin + pd.Timedelta(seconds=float(max(lo, 0)))).strftime(
            "%Y-%m-%d")))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(4 if narrow else 8, integer=True))
        ax.set_xlabel(t[order_label] if axis.mode == "order" else t["fig_line"])


MIN_TEXT_PT = 10.5   # at 96 dpi and 1:1 in the report, about the size of the report's own small text


def _readable(fig: Figure) -> None:
    """No text in a chart smaller than MIN_TEXT_PT: tick labels, axis labels, legends, annotations (readable at
    100 % zoom; the PNG is shown at its natural width on a laptop screen); then the margins for that text."""
    for text in fig.findobj(lambda a: hasattr(a, "get_fontsize") and hasattr(a, "set_fontsize")):
        try:
            if text.get_fontsize() < MIN_TEXT_PT:
                text.set_fontsize(MIN_TEXT_PT)
        except (TypeError, ValueError):
            continue
    for ax in fig.axes:
        for label in (ax.xaxis.label, ax.yaxis.label):
            label.set_fontsize(max(label.get_fontsize(), MIN_TEXT_PT + 1))
        chart_layout.fit(fig, ax)  # the text's sizes are final: place the axes around it


def _pad(ax, lo: float, hi: float) -> None:
    span = hi - lo
    pad = span * 0.04 if span > 0 else 1.0
    ax.set_xlim(lo - pad, hi + pad)


def timeline_figure(model, lang: str = "en", width: float = WIDE_IN) -> Figure | None:
    """Swimlanes: activity span, errors and stop per lane; arrows from the root cause to the ranks that waited."""
    lanes = model.lanes
    if not lanes or model.axis.mode != "time":
        return None   # without times, lanes in each rank's own order would compare line counts, not moments
    narrow = width < WIDE_IN
    fig, ax, t, family = _new(lang, width, 1.5 + (0.3 if narrow else 0.34) * len(lanes))
    labels = []
    drawn = [ln for ln in lanes if not ln.silent]
    lo = min(ln.first_x for ln in drawn)
    hi = max(ln.last_x for ln in drawn)
    # One artist per kind of mark, not three per lane. Same picture: a lane's marks stay inside its row (markers are
    # at most 14 pt tall, rows at least 0.34 in apart), and every bar draws before every mark (collections sit below
    # lines), so the order between lanes changes no pixel.
    bars, bar_colours, stop_xs, stop_ys, err_xs, err_ys = [], [], [], [], [], []
    quiet_segs, quiet_colours = [], []
    for y, lane in enumerate(lanes):
        colour = ROLE_COLOURS[lane.role]
        labels.append(_lane_label(lane, t))
        if lane.silent:
            ax.text(lo, y, t["fig_untimed"] if lane.untimed else t["fig_silent"], va="center", ha="left", fontsize=8, color=colour, style="italic",
                    fontfamily=family or "DejaVu Sans")
            continue
        x0, y0 = lane.first_x, y - 0.18
        busy = lane.busy_until if lane.busy_until is not None else lane.last_x
        x1, y1 = x0 + max(busy - lane.first_x, 0), y0 + 0.36     # as broken_barh computes its corners
        bars.append([(x0, y0), (x0, y1), (x1, y1), (x1, y0)])
        bar_colours.append(colour)
        if lane.last_x > busy:   # after its last activity the rank was quiet (waiting) until it erred or stopped
            quiet_segs.append([(busy, y), (lane.last_x, y)])
            quiet_colours.append(colour)
        stop_xs += lane.stop_xs
        stop_ys += [y] * len(lane.stop_xs)
        err_xs += lane.error_xs
        err_ys += [y] * len(lane.error_xs)
    if bars:
        ax.add_collection(PolyCollection(np.array(bars), facecolors=bar_colours, alpha=0.35, edgecolor="none"))
    if quiet_segs:
        ax.add_collection(LineCollection(quiet_segs, colors=quiet_colours, linewidths=1.6, linestyles=(0, (2, 2)),
                                         alpha=0.9))
    ax.plot(stop_xs, stop_ys, linestyle="none", marker="|", markersize=14, markeredgewidth=2, color="#222222")
    if err_xs:
        ax.plot(err_xs, err_ys, linestyle="none", marker="x", markersize=7, markeredgewidth=1.6, color=ERROR_COLOUR)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(labels, fontsize=8, fontfamily=family or "DejaVu Sans")
    for tick, lane in zip(ax.get_yticklabels(), lanes):
        if lane.role == "culprit":
            tick.set_color(ROLE_COLOURS["culprit"])
            if not family:  # CJK fallback fonts often ship one weight; asking for bold only logs a warning
                tick.set_fontweight("bold")
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    _pad(ax, lo, hi)
    _arrows(ax, lanes)
    _x_axis(ax, model.axis, t, narrow, order_label="fig_order_events")
    ax.tick_params(axis="y", length=0)
    _readable(fig)
    return fig


def _lane_label(lane, t) -> str:
    if lane.unattributed:
        return t["unattributed_label"]
    if len(lane.ranks) == 1:
        return i18n.fmt(t, "fig_rank", rank=lane.ranks[0])
    from postmortem.reports.sections import rank_ranges
    text = rank_ranges(lane.ranks)
    text = text if len(text) <= 22 else text[:21] + "…"
    return f"{text} ({len(lane.ranks)})"


def _arrows(ax, lanes) -> None:
    """Straight arrows from the root cause's first error (or its stop) to where each waiting rank failed, clipped to
    the plot: an arrow never leaves the axes."""
    roots = [(y, ln) for y, ln in enumerate(lanes) if ln.role == "culprit" and not ln.silent]
    if not roots:
        return
    ry, root = roots[0]
    lo, hi = ax.get_xlim()
    rx = min(max(root.first_error_x if root.first_error_x is not None else root.last_x, lo), hi)
    targets = [(y, ln) for y, ln in enumerate(lanes) if ln.role == "affected"][:MAX_ARROWS]
    for y, lane in targets:
        tx = min(max(lane.first_error_x if lane.first_error_x is not None else lane.last_x, lo), hi)
        ann = ax.annotate("", xy=(tx, y), xytext=(rx, ry), annotation_clip=True,
                          arrowprops={"arrowstyle": "->", "color": ROLE_COLOURS["culprit"], "lw": 1.2, "alpha": 0.8,
                                      "shrinkA": 4, "shrinkB": 6})
        ann.arrow_patch.set_clip_on(True)
        ann.arrow_patch.set_clip_box(ax.bbox)


def steps_figure(model, lang: str = "en", width: float = WIDE_IN) -> Figure | None:
    """Step reached over time per rank (time from any source), ranks behind the front in colour; without any time,
    a bar per rank of the last step it reported (a line against "n-th report" would only draw a diagonal)."""
    series = model.step_series
    narrow = width < WIDE_IN
    if model.step_axis.mode != "time":
        return _last_steps_figure(model, lang, width)
    if not series or all(len(xs) < 2 for xs, _ in series.values()):
        return None   # a single point per rank says nothing a table row does not
    fig, ax, t, family = _new(lang, width, 3.0 if narrow else 3.4)
    front = max(r["last_step"] for r in model.step_last)
    # The ranks behind the front and the verdict's culprits (a rank stuck at the front's step too) stand out.
    behind = {r["rank"] for r in model.step_last if r["last_step"] < front} | set(getattr(model, "culprits", None) or ())
    series = _same_steps_once(series, behind)
    # Ranks behind the front last, so they are drawn on top of the ranks whose lines they share up to where they stop.
    keys = sorted(series, key=lambda r: (r in behind, r is None, r if isinstance(r, int) else 0))
    many = len(keys) > MAX_LABELLED
    labelled = _steps_many(ax, series, keys, behind, t, family) if many else _steps_few(ax, series, keys, behind,
                                                                                         t, family)
    ax.set_ylabel(t["fig_items"] if model.step_unit == "item" else t["fig_step"])
    ax.yaxis.set_major_locator(MaxNLocator(4 if narrow else 6, integer=True))
    _x_axis(ax, model.step_axis, t, narrow)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, ncol=2 if labelled > 8 else 1, loc="upper left", frameon=False,
                  prop={"family": family, "size": 7} if family else {"size": 7})
    _readable(fig)
    return fig


def _last_steps_figure(model, lang: str, width: float) -> Figure | None:
    """No step line has a time: one bar per rank (ranks that stopped at the same step share a bar when there are
    many) with the last step it reported, the ranks behind the front in the culprit's colour."""
    rows = [r for r in model.step_last if r["rank"] is not None]
    if len(rows) < 2 or len({r["last_step"] for r in rows}) < 2:
        return None   # one rank, or every rank at the same step: the table's one row says it
    groups: dict[int, list] = {}
    for r in rows:
        groups.setdefault(r["last_step"], []).append(r["rank"])
    from postmortem.reports.sections import rank_ranges
    if len(rows) <= MAX_LABELLED:
        bars = [(i18n.fmt(_labels(lang)[0], "fig_rank", rank=r["rank"]), r["last_step"])
                for r in sorted(rows, key=lambda r: r["rank"])]
    else:
        bars = [(rank_ranges(m) if len(rank_ranges(m)) <= 18 else rank_ranges(m)[:17] + "…", step)
                for step, m in sorted(groups.items())]
    narrow = width < WIDE_IN
    fig, ax, t, family = _new(lang, width, 1.3 + 0.32 * len(bars))
    front = max(step for _, step in bars)
    ys = list(range(len(bars)))
    colours = [ROLE_COLOURS["culprit"] if step < front else GREY_LINE for _, step in bars]
    ax.barh(ys, [step for _, step in bars], color=colours, height=0.6)
    lo = min(step for _, step in bars)
    for y, (_, step) in zip(ys, bars):
        ax.annotate(f"{step}", (step, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=9,
                    color=ROLE_COLOURS["culprit"] if step < front else "#333333")
    ax.set_yticks(ys)
    ax.set_yticklabels([name for name, _ in bars], fontfamily=family or "DejaVu Sans")
    ax.set_ylim(len(bars) - 0.5, -0.5)
    # zoom to where the ranks differ, so one step of difference shows (the bars start at the axis' left edge)
    span = max(front - lo, 1)
    ax.set_xlim(max(0, lo - 3 * span), front + span * (0.6 if narrow else 0.3))
    ax.xaxis.set_major_locator(MaxNLocator(4 if narrow else 8, integer=True))
    ax.set_xlabel(t["fig_last_item"] if model.step_unit == "item" else t["fig_last_step"])
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
    ax.tick_params(axis="y", length=0)
    _readable(fig)
    return fig


def _steps_few(ax, series: dict, keys: list, behind: set, t: dict, family) -> int:
    """Up to MAX_LABELLED ranks: a line in its own colour and a legend entry each. Returns the lines drawn."""
    for r in keys:
        xs, ys = series[r]
        line, = ax.plot(xs, ys, linewidth=2.4 if r in behind else 1.0, marker="o" if len(xs) <= 30 else None,
                        markersize=4.5 if r in behind else 3, label=_series_name(r, t), zorder=3 if r in behind else 2)
        if r in behind and xs:
            _stop_label(ax, t, family, line.get_color(), xs[-1], ys[-1])
    return len(keys)


def _steps_many(ax, series: dict, keys: list, behind: set, t: dict, family) -> int:
    """Many ranks: the front grey, the ranks behind in the culprit's colour; each kind of mark is one artist (one
    line per rank is seconds of drawing at thousands of ranks). Returns the legend entries naming ranks (0 or 1)."""
    _grey_lines(ax, [np.column_stack(series[r]) for r in keys if r not in behind])
    late = [r for r in keys if r in behind]
    colour = ROLE_COLOURS["culprit"]
    if late:
        # Styled as ax.plot(..., linewidth=2.4) would draw each line: projecting caps, round joins.
        ax.add_collection(LineCollection([np.column_stack(series[r]) for r in late], colors=colour, linewidths=2.4,
                                         capstyle="projecting", joinstyle="round", zorder=3))
        dotted = [series[r] for r in late if len(series[r][0]) <= 30]
        ax.plot([x for xs, _ in dotted for x in xs], [y for _, ys in dotted for y in ys], linestyle="none",
                marker="o", markersize=4.5, color=colour, zorder=3)
    if late:  # one legend entry: the lines share one colour, so a name per line would not say which is which
        ax.plot([], [], linewidth=2.4, marker="o" if dotted else None, markersize=4.5, color=colour,
                label=i18n.fmt(t, "fig_ranks_behind", n=len(late)))
    for x, y in _apart([(xs[-1], ys[-1]) for xs, ys in (series[r] for r in late) if xs],
                       [p for r in keys for p in zip(*series[r])]):
        _stop_label(ax, t, family, colour, x, y)
    ax.plot([], [], color=GREY_LINE, linewidth=0.8, label=t["fig_other_ranks"])
    return 1 if late else 0


def _apart(ends: list, points: list) -> list:
    """The 'stopped at' points to label, furthest behind first, leaving out one whose label would overlap a label
    already placed (labels span ~STOP_LABEL_W of the x range and ~STOP_LABEL_H of the step range at this figure
    size), and at most MAX_STOP_LABELS: ranks that stopped together share one."""
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    xr = (max(xs) - min(xs)) or 1
    yr = (max(ys) - min(ys)) or 1
    placed: list = []
    for x, y in sorted(dict.fromkeys(ends), key=lambda p: (p[1], p[0])):
        if len(placed) >= MAX_STOP_LABELS:
            break
        if all(abs(x - px) / xr >= STOP_LABEL_W or abs(y - py) / yr >= STOP_LABEL_H for px, py in placed):
            placed.append((x, y))
    return placed


def _same_steps_once(series: dict, keep: set) -> dict:
    """Ranks (outside `keep`) that reported the very same steps drawn once, keyed by the tuple of their ranks: one
    line each would lie on top of the others and hide which ranks they are."""
    groups: dict = {}
    for r, (xs, ys) in series.items():
        key = ("keep", r) if r in keep or r is None else ("steps", tuple(ys))
        groups.setdefault(key, []).append(r)
    out = {}
    for key, members in groups.items():
        first = members[0]
        out[first if len(members) == 1 else tuple(sorted(members))] = series[first]
    return out


def _series_name(r, t: dict) -> str:
    if isinstance(r, tuple):
        from postmortem.reports.sections import rank_ranges
        return i18n.fmt(t, "fig_ranks_same", ranks=rank_ranges(list(r)))
    return t["unattributed_label"] if r is None else i18n.fmt(t, "fig_rank", rank=r)


def _stop_label(ax, t: dict, family, colour, x, y) -> None:
    """'stopped at step N' beside the last point of a rank behind the front."""
    label = ax.annotate(i18n.fmt(t, "fig_stopped_at", step=int(y)), (x, y), xytext=(6, -4),
                        textcoords="offset points", ha="left", va="top", color=colour, fontsize=10.5)
    if family:
        label.set_fontfamily(family)


def _grey_lines(ax, segments: list) -> None:
    """Draw a batch of the steps chart's grey background lines as one artist."""
    if not segments:
        return
    # Styled as ax.plot(..., color=GREY, linewidth=0.6, alpha=0.5) would draw each line: projecting caps, round joins.
    ax.add_collection(LineCollection(segments, colors=GREY_LINE, linewidths=0.6, alpha=0.5, capstyle="projecting",
                                     joinstyle="round"))


def gpu_figure(gm, lang: str = "en", culprits: dict | None = None, width: float = WIDE_IN) -> Figure | None:
    """Memory used per GPU over time (or snapshot index), capacity dashed, the first OOM as a red line.

    Up to MAX_LABELLED GPUs get a line, a colour and a legend entry each; more are drawn as grey lines with only the
    GPUs that matter in colour (see `_gpu_many`). `culprits` maps series keys to culprit ranks (`gpu_culprits`)."""
    if gm is None or not gm.series:
        return None
    narrow = width < WIDE_IN
    fig, ax, t, family = _new(lang, width, 3.0 if narrow else 3.4)
    if len(gm.series) > MAX_LABELLED:
        _gpu_many(ax, gm, t, family, culprits or {})
    else:
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
        from postmortem.reports.ranks import Axis
        _x_axis(ax, Axis("time", gm.origin), t, narrow)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(4 if narrow else 8, integer=True))
        ax.set_xlabel(t["fig_snapshot"])
    ax.legend(fontsize=7, loc="lower right", frameon=False,
              prop={"family": family, "size": 7} if family else {"size": 7})
    _readable(fig)
    return fig


def _gpu_many(ax, gm, t: dict, family, culprits: dict) -> None:
    """Many GPUs: grey lines as one artist, the GPUs that matter in colour with a legend entry, capacity once each."""
    rows = {r.key: r for r in gm.rows}
    picked = _gpu_highlights(gm, rows, culprits, t)
    grey = [np.column_stack(gm.series[k][:2]) for k in sorted(gm.series) if k not in picked]
    if grey:
        # Below the coloured lines: collections are drawn before lines at the same z-order.
        ax.add_collection(LineCollection(grey, colors=GREY_LINE, linewidths=0.6, alpha=0.5, capstyle="projecting",
                                         joinstyle="round"))
        ax.autoscale_view()
    for i, (key, why) in enumerate(picked.items()):
        xs, used, _total = gm.series[key]
        row = rows.get(key)
        name = f"{row.host} GPU {row.gpu}" if row is not None and row.host else key
        ax.plot(xs, used, marker="o" if len(xs) <= 40 else None, markersize=3, linewidth=1.4, color=f"C{i % 10}",
                label=i18n.fmt(t, "fig_gpu_flagged", gpu=name, why=", ".join(why)))
    if grey:
        ax.plot([], [], color=GREY_LINE, linewidth=0.8, label=i18n.fmt(t, "fig_other_gpus", n=len(grey)))
    for total in sorted({s[2] for s in gm.series.values() if s[2]}):
        ax.axhline(total, color=CAPACITY_LINE, linestyle="--", linewidth=0.8, alpha=0.7)
        ax.annotate(f"{t['fig_capacity']} {total:,.0f}", xy=(1.0, total), xycoords=("axes fraction", "data"),
                    xytext=(-2, 2), textcoords="offset points", ha="right", va="bottom", fontsize=7,
                    color=CAPACITY_LINE, fontfamily=family or "DejaVu Sans")


def _gpu_highlights(gm, rows: dict, culprits: dict, t: dict) -> dict:
    """Series key -> reasons, in legend order: lost GPUs, uncorrectable ECC, culprit ranks' GPUs (at most
    MAX_GPU_HIGHLIGHT); with none of those, the TOP_PEAK_GPUS closest to their capacity."""
    keys = sorted(gm.series)
    out: dict[str, list[str]] = {}
    for key in keys:
        if key in rows and rows[key].lost:
            out.setdefault(key, []).append(t["gpu_lost"])
    for key in sorted((k for k in keys if k in rows and rows[k].ecc), key=lambda k: -rows[k].ecc):
        out.setdefault(key, []).append(i18n.fmt(t, "gpu_ecc", n=rows[key].ecc))
    for key in keys:
        if culprits.get(key):
            out.setdefault(key, []).append(i18n.fmt(t, "fig_rank", rank=", ".join(map(str, culprits[key]))))
    if not out:
        peaks = []
        for key in keys:
            _xs, used, total = gm.series[key]
            if used:
                peak = max(used)
                # relative to capacity where it is known; GPUs without a capacity rank after those with one
                peaks.append(((0, -peak / total) if total else (1, -peak), key,
                              f"{peak / total:.0%}" if total else f"{peak:,.0f} MiB"))
        for _rank, key, text in sorted(peaks)[:TOP_PEAK_GPUS]:
            out[key] = [i18n.fmt(t, "fig_gpu_peak", peak=text)]
    return dict(list(out.items())[:MAX_GPU_HIGHLIGHT])

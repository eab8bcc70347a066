"""A chart's margins, fixed once from its text before it is drawn: the axes leave room for their tick labels, axis
labels, legend and annotations, and the PNG is the figure's own size.

matplotlib's constrained layout did this on every draw, and `savefig` drew each chart twice for it (once to lay it
out, once to render), then `bbox_inches="tight"` measured everything again to crop the picture: three passes over
every artist, the data's collections included, where one over the text is enough (data is clipped to the axes)."""
from __future__ import annotations

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.transforms import Bbox

PAD_IN = 0.1  # the space left around the text: what the tight crop left (savefig's pad_inches)


def fit(fig, ax) -> None:
    """Place `ax` so that everything drawn around it fits inside `fig` with PAD_IN to spare (measured again once
    where text is anchored at data points, which move with the axes)."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()  # savefig at the figure's dpi draws with this one: text measured once
    texts = [a for a in ax.get_children() if a.get_visible() and a.get_in_layout() and _is_text(a) and a.get_text()]
    legend = ax.get_legend()
    if legend is not None and legend.get_visible():
        texts.append(legend)
    pad = PAD_IN * fig.dpi
    width, height = fig.bbox.width, fig.bbox.height
    for _ in range(2 if texts else 1):
        # the layout's measure: an x axis label counts by its height only (a long one must not squeeze the axes)
        box = ax.get_tightbbox(renderer, bbox_extra_artists=texts, for_layout_only=True)
        inner = ax.get_window_extent(renderer).frozen()  # a live box would follow the new size
        if box is None:
            return
        box = Bbox.union([box, inner])
        left, right = inner.x0 - box.x0, box.x1 - inner.x1
        bottom, top = inner.y0 - box.y0, box.y1 - inner.y1
        x0, x1 = (left + pad) / width, 1 - (right + pad) / width
        y0, y1 = (bottom + pad) / height, 1 - (top + pad) / height
        if x1 <= x0 or y1 <= y0:   # more text than figure: leave matplotlib's default place
            return
        ax.set_position([x0, y0, x1 - x0, y1 - y0])
    label = ax.xaxis.label
    if label.get_visible() and label.get_text() and label.get_window_extent(renderer).width > width - 2 * pad:
        _grow_to_fit(fig, ax, renderer, texts, pad)


def _grow_to_fit(fig, ax, renderer, texts: list, pad: float) -> None:
    """An axis label wider than the figure (the layout leaves its width out: a long label on a phone's width): the
    canvas grows to hold it, the axes keep their size, as the tight crop did."""
    box = ax.get_tightbbox(renderer, bbox_extra_artists=texts)
    if box is None:
        return
    width, height = fig.bbox.width, fig.bbox.height
    grow = [max(0.0, pad - box.x0), max(0.0, box.x1 + pad - width), max(0.0, pad - box.y0),
            max(0.0, box.y1 + pad - height)]
    if max(grow) < 1:
        return
    inner = ax.get_window_extent(renderer).frozen()  # a live box would follow the new size
    new_w, new_h = width + grow[0] + grow[1], height + grow[2] + grow[3]
    fig.set_size_inches(new_w / fig.dpi, new_h / fig.dpi)
    ax.set_position([(inner.x0 + grow[0]) / new_w, (inner.y0 + grow[2]) / new_h, inner.width / new_w,
                     inner.height / new_h])


def _is_text(artist) -> bool:
    from matplotlib.text import Text
    return isinstance(artist, Text)

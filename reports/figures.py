"""matplotlib figures of an Analysis (Agg backend; returned, never shown)."""
from __future__ import annotations


def make_figures(analysis) -> dict:
    """Name -> matplotlib Figure for the report's charts."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figs = {}
    st = analysis.tables.steps
    st = st[st["rank"].notna() & st["step"].notna()]
    if len(st):
        fig, ax = plt.subplots(figsize=(7, 3))
        for rank, grp in st.groupby("rank"):
            ax.plot(grp["line"].to_numpy(), grp["step"].to_numpy(), label=f"rank {int(rank)}")
        ax.set_xlabel("log line"); ax.set_ylabel("step")
        figs["steps"] = fig
    return figs

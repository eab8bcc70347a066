"""postmortem: why did a distributed training job die or hang? Evidence from the logs it left behind."""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["Analysis", "analyze", "__version__"]


def __getattr__(name: str):
    # Lazy, so that parsers can import postmortem.discover without pulling the whole pipeline (and pandas).
    if name in ("Analysis", "analyze"):
        from postmortem import api
        return getattr(api, name)
    raise AttributeError(name)

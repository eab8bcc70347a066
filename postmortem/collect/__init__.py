"""`postmortem collect`: run a training launcher unchanged and make sure the evidence for a post-mortem exists."""
from __future__ import annotations

from postmortem.collect.runner import DEFAULT_SMI_INTERVAL, DEFAULT_STALL_AFTER, collect, exit_like

__all__ = ["collect", "exit_like", "DEFAULT_STALL_AFTER", "DEFAULT_SMI_INTERVAL"]

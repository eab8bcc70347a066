"""Parsers: one module per input kind; each turns a discovered source into rows for the tables."""
from __future__ import annotations

from postmortem.parsers.base import ParseResult, parse_source, register, registered_kinds  # noqa: F401

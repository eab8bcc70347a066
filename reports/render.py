"""HTML rendering: view model -> jinja2 template (autoescaped, StrictUndefined) -> one self-contained file."""
from __future__ import annotations

import os

import jinja2

from reports.viewmodel import build_view

TEMPLATES = os.path.join(os.path.dirname(__file__), "templates")


def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def render_html(analysis, fragment: bool = False, **options) -> str:
    """Render the report; `fragment=True` gives the notebook view (no <html> shell)."""
    view = build_view(analysis, **options)
    template = _env().get_template("fragment.html.j2" if fragment else "report.html.j2")
    return template.render(v=view)

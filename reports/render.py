"""HTML rendering: view model -> jinja2 templates (autoescaped, StrictUndefined) -> one self-contained file."""
from __future__ import annotations

import base64
import functools
import hashlib
import os

import jinja2

from postmortem.reports.viewmodel import build_view

TEMPLATES = os.path.join(os.path.dirname(__file__), "templates")


@functools.lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              trim_blocks=True, lstrip_blocks=True)


@functools.lru_cache(maxsize=1)
def _assets() -> tuple[str, str, str]:
    """(css, script, CSP hash of the script): static, so read once."""
    with open(os.path.join(TEMPLATES, "report.css"), encoding="utf-8") as fh:
        css = fh.read()
    script = _env().get_template("_script.js.j2").render()
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return css, script, f"sha256-{digest}"


def warm_up(charts: bool = True) -> None:
    """Load what a process's first report pays for besides its data: the compiled templates and, with `charts`,
    matplotlib, its Agg canvas and font (postmortem.api runs this in a thread while the files are parsed)."""
    for name in _env().list_templates(extensions=["j2"]):  # the included ones too: each compiles on first use
        _env().get_template(name)
    _assets()
    if charts:
        from postmortem.reports import figures
        figures.warm_up()


def render_html(analysis, fragment: bool = False, **options) -> str:
    """Render the report; `fragment=True` gives the notebook view (verdict and key sections, no <html> shell).

    Options: lang ("en" | "zh"), context (lines around evidence, default 2), generated_at (str or datetime shown as
    the analysis date; default SOURCE_DATE_EPOCH or now), figures (embed charts, default True).
    """
    view = build_view(analysis, fragment=fragment, **options)  # `version` comes from the caller (no import cycle)
    css, script, script_hash = _assets()
    template = _env().get_template("fragment.html.j2" if fragment else "report.html.j2")
    return template.render(v=view, t=view.t, css=css, script=script, script_hash=script_hash)

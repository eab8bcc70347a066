"""Accept HTML report gold files: `python -m tests.accept_gold` turns every tests/gold/*.actual.html into its gold.

A failing gold test (tests/test_report_gold.py) leaves `<name>.actual.html` beside `<name>.html` (unscrubbed, so it
can be opened in a browser); this script scrubs the volatile parts and overwrites the gold with it.
"""
from __future__ import annotations

import glob
import os
import re
import sys

GOLD_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gold")

# Volatile parts: the analysis date, the package version, embedded image bytes (fonts/matplotlib versions change
# pixels), and text owned by the rules (class pm-rt: titles, explanations, fixes, gaps) whose wording evolves with
# the rule engine rather than with the report.
_SCRUBS = [
    (re.compile(r'(<time id="pm-generated">)[^<]*(</time>)'), r"\1DATE\2"),
    (re.compile(r'(<span id="pm-version">)[^<]*(</span>)'), r"\1VERSION\2"),
    (re.compile(r"data:image/png;base64,[A-Za-z0-9+/=]+"), "data:image/png;base64,IMAGE"),
    (re.compile(r'(class="[^"]*\bpm-rt\b[^"]*"[^>]*>)[^<]*'), r"\1RULE-TEXT"),
]


def scrub(html: str) -> str:
    """The report with its volatile parts replaced by fixed markers."""
    for rx, repl in _SCRUBS:
        html = rx.sub(repl, html)
    return html


def accept(gold_dir: str = GOLD_DIR) -> list[str]:
    """Scrub each *.actual.html into its gold file and remove the actual; returns the gold paths written."""
    written = []
    for actual in sorted(glob.glob(os.path.join(gold_dir, "*.actual.html"))):
        gold = actual[: -len(".actual.html")] + ".html"
        with open(actual, encoding="utf-8") as fh:
            text = scrub(fh.read())
        with open(gold, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.remove(actual)
        written.append(gold)
    return written


def main() -> int:
    """Command-line entry: accept all pending actual files."""
    written = accept()
    for path in written:
        print(f"accepted {os.path.relpath(path)}")
    if not written:
        print("no tests/gold/*.actual.html to accept (run the gold tests first)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

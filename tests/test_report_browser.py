"""The report in a real headless Chromium (system `chromium`, driven by Playwright): verdict in the first viewport,
no console errors, no network requests, hostile log text shown as text, readable with JavaScript off.

Skips (with the reason) only when no browser can be found; under CI (CI=true) a missing browser is a failure,
since .ci/run installs Debian's chromium.
"""
from __future__ import annotations

import os
import shutil

import pytest

import postmortem

XSS = "<script>alert(1)</script>"
VIEWPORT = {"width": 1280, "height": 800}
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _unavailable(reason: str):
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"browser test cannot run in CI: {reason} (.ci/run should have installed it)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    exe = _chromium()
    if exe is None:
        _unavailable("no chromium on PATH (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install playwright; the system chromium is used)")
    with sync_playwright() as pw:
        try:
            # Playwright gives every launch a fresh temporary profile (--user-data-dir).
            br = pw.chromium.launch(executable_path=exe, args=BROWSER_ARGS)
        except Exception as exc:  # noqa: BLE001 - any launch failure means "no usable browser"
            _unavailable(f"chromium at {exe} did not start: {exc}")
        yield br
        br.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A real 4-rank tree whose crashing rank's exception message contains a script tag."""
    root = tmp_path_factory.mktemp("job")
    logs = root / "logs"
    for r in range(4):
        d = logs / f"rank_{r}"
        d.mkdir(parents=True)
        lines = [f"[rank{r}]: step {s} loss {2.0 - s * 0.01:.3f}" for s in range(30 if r != 2 else 21)]
        if r == 2:
            lines += [f"[rank{r}]: Traceback (most recent call last):",
                      f'[rank{r}]:   File "train.py", line 40, in <module>',
                      f"[rank{r}]:     batch = next(it)",
                      f"[rank{r}]: ValueError: corrupt sample {XSS}"]
        else:
            lines.append(f"[rank{r}]:[E ProcessGroupNCCL.cpp:475] [Rank {r}] Watchdog caught collective operation "
                         "timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                         "Timeout(ms)=600000) ran for 600123 milliseconds before timing out.")
        (d / "train.log").write_text("\n".join(lines) + "\n")
    out = {}
    for lang in ("en", "zh"):
        path = root / f"report_{lang}.html"
        path.write_text(postmortem.analyze(str(logs)).to_html(lang=lang), encoding="utf-8")
        out[lang] = path
    return out


def _open(browser, path, javascript: bool = True):
    context = browser.new_context(viewport=VIEWPORT, java_script_enabled=javascript)
    page = context.new_page()
    events = {"console": [], "requests": [], "dialogs": [], "pageerrors": []}
    url = path.as_uri()
    page.on("console", lambda m: events["console"].append(f"{m.type}: {m.text}") if m.type in ("error", "warning")
            else None)
    page.on("pageerror", lambda e: events["pageerrors"].append(str(e)))
    page.on("dialog", lambda d: (events["dialogs"].append(d.message), d.dismiss()))
    page.on("request", lambda r: events["requests"].append(r.url) if r.url != url and not r.url.startswith("data:")
            else None)
    page.goto(url, wait_until="load")
    return context, page, events


def _in_first_viewport(page, selector: str) -> bool:
    box = page.locator(selector).first.bounding_box()
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= VIEWPORT["height"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_report_in_chromium(browser, report, lang):
    context, page, events = _open(browser, report[lang])
    try:
        assert page.locator("#verdict h1").is_visible()
        for sel in ("#verdict h1", "#verdict .pm-culprits", "#verdict .pm-confidence", "#verdict .pm-fix"):
            assert _in_first_viewport(page, sel), f"{sel} is not in the first {VIEWPORT} viewport"
        assert events["console"] == [] and events["pageerrors"] == [], events
        assert events["requests"] == [], events["requests"]
        assert events["dialogs"] == []
        body = page.inner_text("body")
        assert XSS in body                                   # shown as text...
        assert page.evaluate("document.scripts.length") == 1  # ...never run as markup
        # The optional script works: sorting a table and revealing the sources filter raise no errors.
        page.locator("#pm-src-table thead th").first.click()
        assert page.locator("#pm-src-controls").is_visible()
        page.fill("#pm-src-filter", "rank_2")
        assert page.locator("#pm-src-table tbody tr:visible").count() == 1
        assert events["console"] == [] and events["pageerrors"] == [], events
    finally:
        context.close()


def test_report_reads_without_javascript(browser, report):
    context, page, events = _open(browser, report["en"], javascript=False)
    try:
        assert _in_first_viewport(page, "#verdict h1")
        assert page.locator("#evidence .pm-ev").first.is_visible()
        assert page.locator("#sources table").is_visible()
        assert not page.locator("#pm-src-controls").is_visible()   # controls need the script, so stay hidden
        assert events["requests"] == [] and events["console"] == []
    finally:
        context.close()

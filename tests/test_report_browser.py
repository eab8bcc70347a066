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


# --- issue 16: laptop and phone widths, both themes, screenshots kept as test artifacts

WIDTHS = (1280, 390)
SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples",
                      "uneven_batches_barrier", "logs")


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    """Where screenshots go: $PM_ARTIFACTS (CI uploads it) or a pytest temporary directory."""
    path = os.environ.get("PM_ARTIFACTS") or str(tmp_path_factory.mktemp("screenshots"))
    os.makedirs(path, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def sample_reports(tmp_path_factory):
    root = tmp_path_factory.mktemp("sample")
    a = postmortem.analyze(SAMPLE, quiet=True)
    out = {}
    for lang in ("en", "zh"):
        out[lang] = root / f"uneven_batches_{lang}.html"
        out[lang].write_text(a.to_html(lang=lang), encoding="utf-8")
    return out


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", WIDTHS)
def test_report_fits_laptop_and_phone_widths(browser, sample_reports, artifacts, lang, scheme, width):
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(sample_reports[lang].as_uri(), wait_until="load")
        page.screenshot(path=os.path.join(artifacts, f"report_{lang}_{width}px_{scheme}.png"), full_page=True)
        assert errors == []
        # no horizontal scroll of the page (wide tables and charts scroll inside their own box)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        # the verdict is one sentence in the report's language, on the first screen
        sentence = page.inner_text("#verdict .pm-where")
        assert sentence.endswith(("。", ".")) and _in_view(page, "#verdict .pm-where", width)
        if lang == "zh":
            assert any("\u4e00" <= ch <= "\u9fff" for ch in sentence)
            assert any("\u4e00" <= ch <= "\u9fff" for ch in page.inner_text("#verdict .pm-fix p"))
        # sections with nothing to show are left out, and so are their links
        ids = page.evaluate("[...document.querySelectorAll('section[id]')].map(s => s.id)")
        assert "gpu" not in ids and "nccl" not in ids             # the sample has no nvidia-smi or NCCL output
        assert page.locator(".pm-empty").count() == 0             # no section says it has nothing to show
        links = page.evaluate("[...document.querySelectorAll('.pm-nav a')].map(a => a.getAttribute('href'))")
        assert links == [f"#{i}" for i in ids if i != "verdict"]
        if width >= 1280:
            # the nav is one line on a laptop; charts are shown at their natural size (text readable at 100 %)
            heights = page.evaluate("[...document.querySelectorAll('.pm-nav a')].map(a => a.getBoundingClientRect().top)")
            assert len(set(round(h) for h in heights)) == 1, heights
            ratios = page.evaluate("[...document.querySelectorAll('figure img')].map(i => i.clientWidth / i.naturalWidth)")
            assert ratios and min(ratios) >= 0.95, ratios
        assert page.locator("#steps figure img").count() == 1    # its axis: tests/test_text_report.py
    finally:
        context.close()


def _in_view(page, selector: str, width: int) -> bool:
    box = page.locator(selector).first.bounding_box()
    return box is not None and box["y"] + box["height"] <= 900 and box["x"] + box["width"] <= width


def test_no_sample_report_scrolls_sideways_on_a_phone(browser, tmp_path):
    root = os.path.dirname(SAMPLE.rstrip("/").rsplit("/", 1)[0])
    context = browser.new_context(viewport={"width": 390, "height": 800})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        for name in sorted(os.listdir(root)):
            logs = os.path.join(root, name, "logs")
            if not os.path.isdir(logs):
                continue
            path = tmp_path / f"{name}.html"
            path.write_text(postmortem.analyze(logs, quiet=True).to_html(), encoding="utf-8")
            page.goto(path.as_uri(), wait_until="load")
            assert page.evaluate("document.documentElement.scrollWidth") <= 390, name
        assert errors == []
    finally:
        context.close()

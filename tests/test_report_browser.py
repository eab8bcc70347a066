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


# --- issue 26: every sample, both languages, laptop and phone: no placeholder where the tables hold the value, no
# mid-word cut, dates as written, nothing cut off at 390 px (screenshots kept as test artifacts)

SAMPLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples")
ALL_SAMPLES = sorted(n for n in os.listdir(SAMPLES_DIR) if os.path.isdir(os.path.join(SAMPLES_DIR, n, "logs")))

# Elements whose content is wider than their box and clipped (or scrolled inside it), and visible elements that
# reach past the viewport's right edge: what a phone reader cannot see without scrolling sideways.
_CUT_OFF_JS = """() => {
  const out = [];
  const vw = document.documentElement.clientWidth;
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('details:not([open])') && el.tagName !== 'SUMMARY') continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    const cs = getComputedStyle(el);
    if (cs.visibility === 'hidden' || cs.display === 'none') continue;
    if (r.right > vw + 1) out.push('past the edge: ' + el.tagName + '.' + el.className + ' ' + Math.round(r.right));
    const clips = ['hidden', 'auto', 'scroll', 'clip'].includes(cs.overflowX);
    if (clips && el.scrollWidth > el.clientWidth + 1)
      out.push('clipped inside: ' + el.tagName + '.' + el.className + ' ' + el.scrollWidth + '>' + el.clientWidth);
  }
  return out.slice(0, 10);
}"""


@pytest.fixture(scope="module")
def all_sample_reports(tmp_path_factory):
    root = tmp_path_factory.mktemp("samples")
    out = {}
    for name in ALL_SAMPLES:
        a = postmortem.analyze(os.path.join(SAMPLES_DIR, name, "logs"), quiet=True)
        for lang in ("en", "zh"):
            path = root / f"{name}_{lang}.html"
            path.write_text(a.to_html(lang=lang), encoding="utf-8")
            out[(name, lang)] = (a, path)
    return out


def _dates_of(analysis) -> set[str]:
    days = set()
    for df in analysis.tables.frames.values():
        for col in df.columns:
            if str(df[col].dtype).startswith("datetime64"):
                days |= set(df[col].dropna().dt.strftime("%Y-%m-%d"))
    return days


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", ALL_SAMPLES)
def test_every_sample_reads_right_at_laptop_and_phone_width(browser, all_sample_reports, artifacts, name, lang,
                                                            width):
    import re

    import pandas as pd
    a, path = all_sample_reports[(name, lang)]
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(path.as_uri(), wait_until="load")
        page.screenshot(path=os.path.join(artifacts, f"sample_{name}_{lang}_{width}px.png"), full_page=True)
        assert errors == []
        # nothing cut off: no sideways scroll, no content clipped inside a box, nothing past the right edge
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        assert page.evaluate(_CUT_OFF_JS) == [], name
        # no placeholder where the tables hold the value
        facts = dict(zip(page.locator("#verdict .pm-facts dt").all_inner_texts(),
                         page.locator("#verdict .pm-facts dd").all_inner_texts()))
        assert all(v.strip() and v.strip() != "—" for v in facts.values()), facts
        v, ranks = a.verdict, a.ranks
        if v.culprit_ranks and ranks is not None and len(ranks):
            mine = ranks[ranks["rank"].isin(v.culprit_ranks)]["last_step"].dropna()
            if len(mine) and mine.nunique() == 1:
                assert str(int(mine.iloc[0])) in facts.values() or str(v.step) in facts.values(), facts
        # the sources' Host column: there (and filled) when a file's own host or its rank's host is known
        src = a.tables.sources
        known = {int(r): h for r, h in zip(ranks["rank"], ranks["host"]) if isinstance(h, str) and h} \
            if ranks is not None and len(ranks) else {}
        hosted = src["host"].notna() | src["rank"].map(lambda r: not pd.isna(r) and int(r) in known).astype(bool)
        heads = page.locator("#pm-src-table thead th").all_inner_texts()
        host_word = i18n_cat(lang)["src_host"]
        if width >= 1280:
            assert (host_word in heads) == bool(hosted.any()), heads
        if hosted.any():
            cells = page.locator(f'#pm-src-table td[data-label="{host_word}"]').all_inner_texts()
            assert sum(bool(c.split(": ")[-1].strip()) for c in cells) >= int(hosted.sum()), cells
        # "What went wrong" never heads a clean run
        if v.category == "no_failure":
            assert i18n_cat(lang)["what_went_wrong"] not in page.inner_text("#verdict")
        body = page.inner_text(".pm-page")
        body = body.rsplit(i18n_cat(lang)["generated_by"], 1)[0]   # the footer's analysis date is today's, rightly
        # no mid-word cut: every shortened text ends at a word with an ellipsis ("Timed ou" never)
        assert not re.search(r"[A-Za-z]{2}…", body), re.findall(r".{30}[A-Za-z]{2}…", body)[:3]
        # a rank's first error is shown whole, or cut at a word with " …" (checked against the rank table's value)
        errors_full = [str(e) for e in (ranks["first_error"].dropna() if ranks is not None and len(ranks) else [])]
        label = i18n_cat(lang)["end_error"]
        for cell in page.locator(f'#pm-ranks td[data-label="{label}"]').all_inner_texts():
            text = cell[len(label) + 2:] if cell.startswith(label + ": ") else cell
            text = " ".join(text.split())
            if not text:
                continue
            whole = any(text == " ".join(e.split()) for e in errors_full)
            cut = text.endswith(" …") and any(
                " ".join(e.split()).startswith(text[:-2]) and " ".join(e.split())[len(text) - 2:len(text) - 1] in " ,;:([{"
                for e in errors_full)
            assert whole or cut, text
        # dates as written: every date shown is one the inputs carry (never today's unless the logs are today's)
        days = _dates_of(a)
        shown = set(re.findall(r"\b(20\d\d-\d\d-\d\d)\b", body))
        assert shown <= days, (shown - days, days)
        # jargon: no rule id standing in for a relation, no "process(es)"
        assert "cascade of" not in body and "(es)" not in body
        if lang == "zh" and name == "straggler_rank0_tokenizing":
            # known gap (issue 33, en/zh): the busy-past-timeout rule's why has no Chinese sentence yet
            pytest.xfail("busy-past-timeout's WHY is not translated to Chinese yet")
        if lang == "zh":
            assert any("\u4e00" <= ch <= "\u9fff" for ch in page.inner_text("#verdict .pm-why p")
                       ) if page.locator("#verdict .pm-why p").count() else True
    finally:
        context.close()


def i18n_cat(lang: str) -> dict:
    from postmortem.reports import i18n
    return i18n.catalogue(lang)

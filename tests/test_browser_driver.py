"""The browser helper (tests/browser.py) itself: a page of the system's chromium opens a local file, runs its script,
follows a link and takes a click, as the report's tests will need."""
from __future__ import annotations

import sys

import pytest

from browser import NO_CHROMIUM, NO_PLAYWRIGHT, browser_page, chromium_page, chromium_path, missing  # noqa: F401 (a fixture)

PAGE = """<!doctype html><html><head><meta charset=utf-8><title>sort</title></head><body>
<p><a id=to-bob href="#student-bob">Bob</a></p>
<table id=scores><thead><tr><th id=by-score>score</th></tr></thead>
<tbody><tr><td>3</td></tr><tr><td>10</td></tr><tr><td>7</td></tr></tbody></table>
<section id=student-bob><h2>Bob</h2></section>
<script>
document.getElementById("by-score").addEventListener("click", () => {
  const body = document.querySelector("#scores tbody");
  [...body.rows].sort((a, b) => Number(b.cells[0].textContent) - Number(a.cells[0].textContent)).forEach(r => body.append(r));
});
</script></body></html>"""


@pytest.mark.slow  # a browser is a process
def test_a_page_runs_its_script_follows_a_link_and_sorts_on_a_click(tmp_path, browser_page):
    (tmp_path / "page.html").write_text(PAGE)
    browser_page.goto((tmp_path / "page.html").as_uri())
    assert browser_page.title() == "sort"
    browser_page.click("#to-bob")
    assert browser_page.evaluate("location.hash") == "#student-bob"
    browser_page.click("#by-score")
    assert browser_page.locator("#scores tbody td").all_text_contents() == ["10", "7", "3"]
    assert browser_page.js_errors == []
    with browser_page.expect_event("pageerror"):
        browser_page.evaluate("setTimeout(() => undefinedFunction(), 0)")
    assert "undefinedFunction is not defined" in " ".join(browser_page.js_errors)


def test_without_chromium_a_browser_test_is_skipped_saying_what_to_install(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert chromium_path() is None and missing() == NO_CHROMIUM
    with pytest.raises(pytest.skip.Exception, match="apt-get install chromium"):  # before any process starts
        with chromium_page():
            pass


def test_without_playwright_a_browser_test_is_skipped_saying_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "playwright.sync_api", None)  # import fails, as where it is not installed
    assert missing() == NO_PLAYWRIGHT
    with pytest.raises(pytest.skip.Exception, match="playwright is not installed"):
        with chromium_page():
            pass

"""A real browser for the tests: Playwright driving the system's chromium (Debian's `chromium` package, which `make test`
installs where it can), never a browser Playwright downloads: nothing is downloaded at run time.

    from browser import chromium_page

    @pytest.mark.slow  # the browser is a process: tests/conftest.py fails an unmarked test that starts one
    def test_the_report_opens(tmp_path):
        with chromium_page() as page:
            page.goto((tmp_path / "report.html").as_uri())
            ...

It skips the test, saying why, where chromium or Playwright is missing. `open_browser()`
is the same without pytest (a benchmark's): it raises BrowserMissing instead.
"""
from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator

CHROMIUMS = ("chromium", "chromium-browser", "google-chrome")  # Debian's, Ubuntu's and Google's names
NO_CHROMIUM = "chromium is not installed: apt-get install chromium"
NO_PLAYWRIGHT = "playwright is not installed: pip install -e '.[test]'"
# Run as root (CI, a container), chromium refuses to start with its sandbox; the pages opened are the project's own.
ARGS = ("--no-sandbox", "--disable-dev-shm-usage")


class BrowserMissing(Exception):
    """No browser can be started here; the message says what to install."""


def chromium_path() -> str | None:
    """The system's chromium: the first of CHROMIUMS on PATH."""
    return next((found for found in map(shutil.which, CHROMIUMS) if found), None)


def missing() -> str | None:
    """Why no browser can be started here, or None when one can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return NO_PLAYWRIGHT
    return None if chromium_path() else NO_CHROMIUM


@contextlib.contextmanager
def open_browser() -> Iterator:
    """A headless chromium (Playwright's Browser) on the system's binary, closed on leaving. BrowserMissing where
    it cannot start for want of chromium or Playwright."""
    why = missing()
    if why:
        raise BrowserMissing(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium_path(), args=list(ARGS), headless=True)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def chromium_page(width: int = 1280, height: int = 900) -> Iterator:
    """A fresh page (Playwright's Page, in a context of its own: no cache, no storage) in a headless chromium; skips
    the calling test where chromium or Playwright is missing. `page.js_errors` collects the uncaught errors of the
    page's scripts (a test of a page with a script should assert it stays empty)."""
    with contextlib.ExitStack() as stack:
        try:
            browser = stack.enter_context(open_browser())
        except BrowserMissing as exc:
            import pytest

            pytest.skip(str(exc))
        context = browser.new_context(viewport={"width": width, "height": height})
        stack.callback(context.close)
        page = context.new_page()
        page.js_errors = []
        page.on("pageerror", lambda error: page.js_errors.append(str(error)))
        yield page

"""The browser helper (tests/browser.py) itself: where chromium is missing a browser test skips, saying what to install.
(tests/test_report.py drives the helper through a whole report: the page, its script, links and clicks.)"""
from __future__ import annotations

import sys

import pytest

from browser import NO_CHROMIUM, NO_PLAYWRIGHT, chromium_page, chromium_path, missing


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

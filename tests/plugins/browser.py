"""Pytest plugin: Debian's headless Chromium driven by Playwright (sync API).

Fixtures
--------
``chromium_browser`` (session)
    One headless Chromium per pytest process, launched from ``$CHROMIUM`` or
    ``/usr/bin/chromium`` (the Playwright browser download is never used).
``browser_context_factory`` (function)
    ``make(viewport=(w, h))`` → a fresh, isolated browser context (own cookies); all are
    closed after the test. Every Content-Security-Policy violation that Chromium reports in
    a context (a console message naming the policy) is kept in ``context.csp_violations``,
    and a test whose pages had any fails when its contexts close.
``artifacts_dir`` (session)
    ``test-artifacts/browser/`` (gitignored): screenshots and traces of browser tests.

Tests using these fixtures are marked ``browser`` automatically, so ``-m "not browser"``
deselects them. Without Chromium the fixture fails, or skips with ``BROWSER_SKIP=1``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = frozenset({"chromium_browser", "browser_context_factory"})
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]

# The sync API runs an event loop in the test's thread; Django refuses ORM calls from a
# thread with a running loop unless told that this is intended (it is: the test is sync).
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixturenames = getattr(item, "fixturenames", ())
        if FIXTURES.intersection(fixturenames) and item.get_closest_marker("browser") is None:
            item.add_marker(pytest.mark.browser)


def chromium_path() -> str | None:
    configured = os.environ.get("CHROMIUM")
    if configured:
        return configured
    for candidate in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if os.path.exists(candidate):
            return candidate
    return shutil.which("chromium")


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    path = REPO_ROOT / "test-artifacts" / "browser"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def chromium_browser() -> Iterator[Any]:
    executable = chromium_path()
    if executable is None:
        if os.environ.get("BROWSER_SKIP") == "1":
            pytest.skip("Chromium is not installed (BROWSER_SKIP=1)")
        pytest.fail("Chromium is not installed (apt-get install chromium)", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()


CSP_MARK = "Content Security Policy"


def _watch_csp(context: Any) -> list[str]:
    """Collect the CSP violations Chromium reports in this context's pages: its console
    messages ("Refused to execute inline script because it violates the following Content
    Security Policy directive …")."""
    violations: list[str] = []

    def on_console(message: Any) -> None:
        if CSP_MARK in message.text:
            violations.append(f"{message.location.get('url', '?')}: {message.text}")

    context.on("console", on_console)
    return violations


@pytest.fixture
def browser_context_factory(chromium_browser: Any) -> Iterator[Callable[..., Any]]:
    contexts: list[Any] = []

    def make(*, viewport: tuple[int, int] = (1280, 800), **kwargs: Any) -> Any:
        context = chromium_browser.new_context(
            viewport={"width": viewport[0], "height": viewport[1]}, **kwargs
        )
        context.set_default_timeout(15_000)
        context.csp_violations = _watch_csp(context)
        contexts.append(context)
        return context

    yield make
    violations = [v for context in contexts for v in context.csp_violations]
    for context in contexts:
        context.close()
    assert not violations, "Content-Security-Policy violations:\n" + "\n".join(violations)

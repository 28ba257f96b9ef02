"""Debian's Chromium, headless, driven by Playwright; every request off this machine is refused.

Without Chromium these tests skip, naming what to install; with ``CI`` set (``.ci/run``
installs Chromium) a missing browser fails them instead, so CI never passes by skipping.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import pytest

from tests.extras import ci_requires_extras

CHROMIUM = os.environ.get("FRACTAL_NB_CHROMIUM", "/usr/bin/chromium")
LOCAL_HOSTS = {"127.0.0.1", "localhost", ""}


@dataclass
class Traffic:
    """What a page asked for that did not work."""

    aborted: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


# Module scope: Playwright's sync API runs an event loop in this thread, which must be gone
# before other tests (asyncio.run, the views' kernel pump) run here.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not shutil.which(CHROMIUM):
        why = (
            f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium) "
            "or set FRACTAL_NB_CHROMIUM to a Chromium binary"
        )
        if ci_requires_extras():
            pytest.fail(f"{why}; CI is set, so the browser tests are required", pytrace=False)
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-quic",
                "--no-first-run",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield chromium
        chromium.close()


@contextmanager
def guarded_page(browser: Any, **context_options: Any) -> Iterator[tuple[Any, Traffic]]:
    """A new page whose requests off this machine are refused, with what failed on it."""
    context = browser.new_context(**{"viewport": {"width": 1280, "height": 1000}, **context_options})
    traffic = Traffic()

    def guard(route: Any) -> None:
        url = urlparse(route.request.url)
        if url.scheme in ("file", "data", "blob") or url.hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            traffic.aborted.append(route.request.url)
            route.abort()

    try:
        context.route("**/*", guard)
        page = context.new_page()
        page.on("requestfailed", lambda request: traffic.failed.append(request.url))
        page.on("pageerror", lambda error: traffic.errors.append(str(error)))
        yield page, traffic
    finally:
        context.close()


@pytest.fixture
def page(browser: Any) -> Iterator[tuple[Any, Traffic]]:
    with guarded_page(browser) as opened:
        yield opened

"""What every browser test shares: Debian's Chromium (never `playwright install`), launched
headless once per module."""

import os
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

# Playwright's sync API runs an event loop in this thread; Django refuses ORM calls from a
# thread with a running loop unless told it is fine (the tests call the ORM in between).
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
NEEDS_CHROMIUM = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is not installed")


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


DEMO_PASSWORD = "demo-pass-for-browser-tests"  # noqa: S105


def run_cycle() -> int:
    """One scheduling cycle, run for sure: the embedded cycle lock is a file that the test
    processes running in parallel share, so a cycle may be skipped while another holds it."""
    import time

    from scheduler.tasks import scheduling_cycle_run

    for _ in range(200):
        if (run_id := scheduling_cycle_run()) is not None:
            return run_id
        time.sleep(0.05)
    raise AssertionError("the scheduling cycle lock stayed taken for 10 s")


@pytest.fixture
def demo(transactional_db, monkeypatch):
    """A freshly seeded demo after one scheduling cycle (a module may define its own)."""
    monkeypatch.setenv("DEMO_PASSWORD", DEMO_PASSWORD)
    call_command("seed_demo", stdout=StringIO())
    run_cycle()


@pytest.fixture
def open_as(browser, live_server):
    """`open_as(role, path, ready)`: a page signed in as a demo user, at the desktop size
    (or `viewport=PHONE`), once `ready` is on it."""
    from tests.browser.chromium import DESKTOP, log_in

    contexts = []

    def open_page(role: str, path: str, ready: str = "main", viewport: dict | None = None):
        context = browser.new_context(viewport=viewport or DESKTOP)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(20000)
        log_in(page, live_server.url, role, DEMO_PASSWORD)
        page.goto(live_server.url + path)
        page.wait_for_selector(ready)
        return page

    yield open_page
    for context in contexts:
        context.close()

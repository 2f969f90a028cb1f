"""Screen sizes and sign-in for the browser tests and the screenshots; the browser itself is
tests/browser/conftest.py's (Debian's Chromium, never `playwright install`)."""

import pytest

# CHROMIUM and CHROMIUM_ARGS are re-exported for the screenshots script.
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, NEEDS_CHROMIUM  # noqa: F401

DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}

needs_chromium = [pytest.mark.browser, NEEDS_CHROMIUM]


def log_in(page, base_url: str, username: str, password: str) -> None:
    """Sign in through the login form and wait for the start page."""
    page.goto(f"{base_url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")

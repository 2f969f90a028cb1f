"""Every page, as every role that may open it, in a real Chromium on a seeded demo: axe finds
no serious or critical problem, and the pages marked `phone` fit a 390-px-wide screen with a
short top bar.

The page list is tests/browser/pages.py; a URL that is neither listed there nor in NOT_PAGES
fails `test_every_page_is_listed`.
"""

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import URLPattern, URLResolver, get_resolver

from tests.browser.chromium import DESKTOP, PHONE, log_in, needs_chromium
from tests.browser.pages import NOT_PAGES, PAGES, ROLES

pytestmark = needs_chromium

DEMO_PASSWORD = "demo-pass-for-browser-tests"  # noqa: S105
SERIOUS = {"serious", "critical"}
# The top bar on a phone: brand and account, then the links in rows, every one in sight (at
# most three rows, an admin's eleven links); it scrolls away with the page.
PHONE_HEADER_MAX_PX = 180


def _url_names(resolver=None, namespace=""):
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            if entry.namespace == "admin":
                continue
            inner = entry.namespace or ""
            yield from _url_names(entry, f"{namespace}:{inner}" if namespace and inner else inner)
        elif isinstance(entry, URLPattern) and entry.name:
            name = f"{namespace}:{entry.name}" if namespace else entry.name
            if not str(entry.pattern).startswith("v1/"):
                yield name


def test_every_page_is_listed():
    listed = {page.url_name for page in PAGES if page.url_name} | set(NOT_PAGES)
    assert set(_url_names()) - listed == set()
    assert len({page.name for page in PAGES}) == len(PAGES)  # the screenshots' file names


@pytest.fixture
def demo(transactional_db, monkeypatch):
    """The embedded demo, with its history, and one scheduling cycle run."""
    from portal.jobs.models import Job
    from portal.queues.models import Queue
    from tests.browser.conftest import run_cycle

    monkeypatch.setenv("DEMO_PASSWORD", DEMO_PASSWORD)
    call_command("seed_demo", stdout=StringIO())
    run_cycle()
    return {
        "job": str(Job.objects.get(name="bert-pretrain").pk),
        "queue": str(Queue.objects.get(name="nlp-train").pk),
        "tenant": str(Queue.objects.get(name="nlp-train").tenant_id),
    }


def _tab(browser, live_server, role: str, viewport: dict):
    """One tab per screen size, signed in as `role`, reused for every page: opening a tab
    starts a renderer process, the costliest part of a visit after axe itself."""
    page = browser.new_context(viewport=viewport).new_page()
    page.set_default_timeout(20000)
    if role != "anonymous":
        log_in(page, live_server.url, role, DEMO_PASSWORD)
    return page


def _axe_findings(page) -> dict[str, str]:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return {
        violation["id"]: f"{violation['help']} ({len(violation['nodes'])}x: "
        + ", ".join(", ".join(node["target"]) for node in violation["nodes"][:3])
        + ")"
        for violation in results.response["violations"]
        if violation["impact"] in SERIOUS
    }


def _phone_problems(page) -> list[str]:
    problems = []
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    if overflow > 1:
        problems.append(f"the page is {overflow}px wider than the screen")
    header = page.evaluate("document.querySelector('header.topbar').offsetHeight")
    if header > PHONE_HEADER_MAX_PX:
        problems.append(f"the top bar is {header}px high")
    return problems


@pytest.mark.parametrize("role", ["anonymous", *ROLES])
def test_every_page_as(role, demo, browser, live_server):
    problems = []
    tabs = {
        id(viewport): _tab(browser, live_server, role, viewport) for viewport in (DESKTOP, PHONE)
    }
    for spec in PAGES:
        if role not in spec.roles:
            continue
        for viewport in (DESKTOP, PHONE) if spec.phone else (DESKTOP,):
            page = tabs[id(viewport)]
            page.goto(live_server.url + spec.path.format(**demo))
            page.wait_for_selector(spec.ready)
            where = f"{spec.name} as {role} at {viewport['width']}px"
            findings = _axe_findings(page)
            problems += [f"{where}: {rule}: {text}" for rule, text in findings.items()]
            if viewport is PHONE:
                problems += [f"{where}: {problem}" for problem in _phone_problems(page)]
    for tab in tabs.values():
        tab.context.close()
    assert not problems, "\n".join(problems)

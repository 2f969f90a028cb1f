"""Every page works in Chromium under the production Content-Security-Policy: no violation is
reported, the scripts that build the pages still run (Plotly charts, Swagger UI, the submit
form's "add a role", confirmations), and the token page shows a secret once.

Uses Debian's /usr/bin/chromium (never `playwright install`), or is skipped.
"""

import os

import pytest

from portal.settings.headers import STRICT_CONTENT_SECURITY_POLICY, STRICT_PERMISSIONS_POLICY
from tests.browser.conftest import NEEDS_CHROMIUM

pytestmark = [pytest.mark.browser, NEEDS_CHROMIUM]

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

# Set by the page itself on every violation; read back after each page settles.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(event.violatedDirective + " " + event.blockedURI);
});
"""


@pytest.fixture
def strict_headers(settings):
    settings.CONTENT_SECURITY_POLICY = STRICT_CONTENT_SECURITY_POLICY
    settings.PERMISSIONS_POLICY = STRICT_PERMISSIONS_POLICY


@pytest.fixture
def world(transactional_db, strict_headers, nlp_queue, vision_queue, cluster, researcher, staff):
    from tests.factories import JobFactory, JobTaskFactory, QueueUsageSampleFactory

    job = JobFactory(queue=nlp_queue, submitter=researcher, name="csp-job")
    JobTaskFactory(job=job, name="worker", replicas=1, gpus=2)
    QueueUsageSampleFactory(queue=nlp_queue)
    return {"job": job, "nlp_queue": nlp_queue}


@pytest.fixture
def signed_in(browser, live_server, password):
    contexts = []

    def as_user(username: str):
        context = browser.new_context(viewport={"width": 1366, "height": 900})
        contexts.append(context)
        context.add_init_script(RECORD_VIOLATIONS)
        page = context.new_page()
        page.set_default_timeout(15000)
        page.console_messages = []
        page.on("console", lambda message: page.console_messages.append(message.text))
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", password)
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        return page

    yield as_user
    for context in contexts:
        context.close()


def _open(page, url: str):
    response = page.goto(url)
    assert response.status == 200, url
    assert response.headers["content-security-policy"] == STRICT_CONTENT_SECURITY_POLICY
    return response


def _clean(page) -> None:
    page.wait_for_load_state("networkidle")
    violations = page.evaluate("window.__cspViolations")
    refused = [m for m in page.console_messages if "Content Security Policy" in m]
    assert violations == [], (page.url, violations)
    assert refused == [], (page.url, refused)


def test_researcher_pages_run_their_scripts_under_the_policy(world, signed_in, live_server):
    from playwright.sync_api import expect

    page = signed_in("researcher")
    base = live_server.url
    for path in ("/", "/jobs/", "/queues/", "/jobs/upload/"):
        _open(page, base + path)
        _clean(page)

    _open(page, f"{base}/dashboards/")
    # Each chart loads its JSON and is drawn by plotly.js (/static/vendor/, from the plotly package) on arrival. (Not
    # wait_for_function: Playwright evaluates its string, which this very policy refuses.)
    charts = page.locator(".chart").count()
    assert charts >= 5
    expect(page.locator(".chart.js-plotly-plot")).to_have_count(charts)
    expect(page.locator(".chart .main-svg").first).to_be_visible()
    _clean(page)

    _open(page, f"{base}/jobs/new/")
    page.click("#add-role")
    page.wait_for_selector("#id_tasks-1-name")
    assert page.input_value("#id_tasks-1-name") == "worker-2"  # a name of its own
    _clean(page)

    _open(page, f"{base}/jobs/{world['job'].pk}/")
    questions = []
    page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.dismiss()))
    page.click("button:has-text('Cancel job')")
    assert questions == ["Cancel job csp-job?"]
    world["job"].refresh_from_db()
    assert world["job"].status == "pending"  # dismissed: nothing was sent
    _clean(page)

    _open(page, f"{base}/api/docs/")
    page.wait_for_selector(".swagger-ui .opblock")
    _clean(page)


def test_the_token_page_shows_a_secret_once_and_revokes_under_the_policy(
    world, signed_in, live_server
):
    page = signed_in("researcher")
    _open(page, f"{live_server.url}/api/tokens/")
    page.fill("#id_name", "browser")
    page.click("button:has-text('Create token')")
    secret = page.inner_text("#api-token").strip()
    assert secret.startswith("gpq_")
    _clean(page)
    _open(page, f"{live_server.url}/api/tokens/")
    assert secret not in page.content()
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#api-tokens button:has-text('Revoke')")
    page.wait_for_selector("text=revoked by its owner")
    _clean(page)


def test_admin_pages_run_under_the_policy(world, signed_in, live_server):
    from tests.factories import UserFactory

    UserFactory(username="root", is_staff=True, is_superuser=True)
    page = signed_in("root")
    base = live_server.url
    for path in (
        "/admin-area/preemptions/",
        "/admin-area/config/",
        "/cluster/nodes/",
        f"/queues/{world['nlp_queue'].pk}/edit/",
        "/admin/",
        "/admin/api/apitoken/",
        f"/admin/queues/queue/{world['nlp_queue'].pk}/change/",
    ):
        _open(page, base + path)
        _clean(page)

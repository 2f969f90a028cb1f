"""End-to-end: a real Chromium (Debian's /usr/bin/chromium) drives the portal via Playwright.

Never runs `playwright install`: the system browser is used or the module is skipped.
"""

import re

import pytest

from tests.browser.chromium import DESKTOP, log_in, needs_chromium

pytestmark = needs_chromium


@pytest.fixture
def world(transactional_db, nlp_queue, vision_queue, cluster, researcher, lead, staff):
    return {"nlp_queue": nlp_queue, "vision_queue": vision_queue}


@pytest.fixture
def login(browser, live_server, password):
    contexts = []

    def as_user(username: str):
        context = browser.new_context(viewport=DESKTOP)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15000)
        log_in(page, live_server.url, username, password)
        return page

    yield as_user
    for context in contexts:
        context.close()


def test_researcher_submits_job_and_watches_it_get_placed(world, login, live_server):
    from portal.jobs.models import Job
    from tests.browser.conftest import run_cycle

    page = login("researcher")
    page.click("nav >> text=Submit job")
    # Its script (the + Add role button) runs once the page has loaded, not when the link is.
    page.wait_for_url("**/jobs/new/", wait_until="load")
    page.select_option("#id_queue", label="nlp-train (nlp)")
    page.fill("#id_name", "browser-bert")
    page.fill("#id_tasks-0-name", "master")
    page.fill("#id_tasks-0-gpus", "4")
    page.fill("#id_tasks-0-memory", "16Gi")
    page.click("#add-role")
    page.fill("#id_tasks-1-name", "worker")
    page.fill("#id_tasks-1-replicas", "2")
    page.fill("#id_tasks-1-gpus", "2")
    page.click("button:has-text('Submit job')")
    page.wait_for_selector("text=was submitted to queue nlp-train")
    job = Job.objects.get(name="browser-bert")
    assert job.tasks.count() == 2

    page.click("nav >> text=Jobs")
    page.wait_for_selector("#jobs >> text=browser-bert")

    run_cycle()
    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    placements = page.inner_text("#placements")
    assert re.search(r"gpu-worker-\d", placements), placements
    assert "Not placed yet" not in placements


def test_submit_form_shows_service_errors_on_the_role(world, login):
    page = login("researcher")
    page.click("nav >> text=Submit job")
    # Its script (the + Add role button) runs once the page has loaded, not when the link is.
    page.wait_for_url("**/jobs/new/", wait_until="load")
    page.fill("#id_name", "dup-roles")
    page.click("#add-role")
    page.fill("#id_tasks-0-name", "worker")
    page.fill("#id_tasks-1-name", "worker")
    page.click("button:has-text('Submit job')")
    error = page.locator("#roles fieldset").nth(1).locator(".error")
    assert "used twice" in error.inner_text()


def test_lead_edits_weight_and_sees_the_preview_change(world, login, live_server):
    from tests.factories import JobFactory, JobTaskFactory, QueueFactory

    # The tenants split the cluster 16/16; inside nlp, nlp-train (weight 2) and nlp-dev split
    # nlp's 16.
    dev = QueueFactory(tenant=world["nlp_queue"].tenant, name="nlp-dev", weight=1)
    for queue in (world["nlp_queue"], dev, world["vision_queue"]):
        JobTaskFactory(job=JobFactory(queue=queue), replicas=4, gpus=8)
    page = login("lead")
    page.goto(f"{live_server.url}/queues/{world['nlp_queue'].pk}/edit/")
    row = page.locator("#preview tr[data-name='nlp-train'] td.after")
    assert row.inner_text().strip() == "10.7"
    page.fill("#id_weight", "3")
    page.wait_for_selector("#preview td.after.preview-cell-up")
    assert row.inner_text().startswith("12.0")
    sibling = page.locator("#preview tr[data-name='nlp-dev'] td.after")
    assert sibling.inner_text().startswith("4.0")
    tenant = page.locator("#preview tr[data-kind='tenant'][data-name='nlp'] td.after")
    assert tenant.inner_text().strip() == "16.0"
    vision = page.locator("#preview tr[data-name='vision-train'] td.after")
    assert vision.inner_text().strip() == "16.0"
    page.click("button:has-text('Save')")
    page.wait_for_selector("text=Queue nlp-train saved.")
    assert "\tWeight\t2\t3" in page.inner_text("#queue-changes")  # named as the form names it


def test_admin_opens_preemption_history_and_dashboard(world, login, live_server):
    from tests.factories import JobFactory, PreemptionEventFactory

    victim = JobFactory(queue=world["nlp_queue"], name="reclaimed-job")
    PreemptionEventFactory(victim_job=victim, sentence="reclaimed for vision-train")
    page = login("siteadmin")
    page.click("nav >> text=Preemptions")
    page.wait_for_selector("#preemptions >> text=reclaimed for vision-train")
    page.click("#preemptions >> text=reclaimed-job")
    page.wait_for_url(f"{live_server.url}/jobs/{victim.pk}/")
    page.click("nav >> text=Dashboard")
    page.wait_for_selector("#dashboard[data-loaded='1']")
    assert page.locator("#chart-occupancy .main-svg").count() > 0
    assert page.inner_text("#free-blocks [data-size='8']") == "4"


def test_researcher_cannot_reach_admin_pages(world, login, live_server):
    page = login("researcher")
    assert page.locator("nav >> text=Preemptions").count() == 0
    for path in ("/admin-area/preemptions/", "/admin-area/config/", "/cluster/nodes/"):
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 403, path
        assert "403" in page.inner_text("h1")

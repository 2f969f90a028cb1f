"""The job pages as a user meets them, in a real Chromium on a freshly seeded demo: the job page
follows the scheduler without a reload, says one state, speaks cores and GiB; the job list fits a
phone."""

from tests.browser.chromium import PHONE, needs_chromium

pytestmark = needs_chromium


def test_the_job_page_follows_the_job_without_a_reload(demo, open_as, monkeypatch):
    from portal.cluster.models import Node, Placement
    from portal.jobs.models import Job
    from portal.jobs.services import job_submit
    from portal.queues.models import Queue
    from tests.browser.conftest import run_cycle
    from tests.factories import PlacementFactory

    # The submission's own cycle waits: the page is open before the scheduler places the job.
    monkeypatch.setattr("portal.jobs.services.cycle_kick", lambda: None)
    job = job_submit(
        submitter=Job.objects.get(name="tokenizer-eval").submitter,
        queue=Queue.objects.get(name="nlp-train"),
        name="live-eval",
        tasks=[{"name": "worker", "replicas": 1, "image": "trainer:1", "gpus": 1}],
    )
    page = open_as("researcher", f"/jobs/{job.pk}/", "#placements")
    page.evaluate("window.__sameDocument = true")
    assert page.inner_text("#job-status") == "Waiting"
    assert "waiting for the next scheduling cycle" in page.inner_text("#pending-reason")
    assert "Not placed yet" in page.inner_text("#placements")
    assert "its pods appear here as they start" in page.inner_text("#no-logs")

    run_cycle()
    page.wait_for_function(
        "() => /gpu-worker-\\d/.test(document.getElementById('placements')?.innerText)"
    )
    assert page.inner_text("#job-status") in ("Admitted", "Running")
    # The logs follow too: the pod is there to choose, and its log is read, without a reload.
    page.wait_for_selector("#job-log-choice select[name=pod]")
    assert page.locator("#no-logs").count() == 0
    page.click("#log-form button[type=submit]")
    page.wait_for_function(
        "() => document.querySelector('#job-logs pre')?.innerText.includes('[simulated] pod')"
    )
    # Another pod of the job turns up (listed first, the latest): the pod chosen and the line
    # count typed stay as they were when the list is swapped in.
    chosen = page.input_value("#log-form select[name=pod]")
    page.fill("#log-form input[name=tail]", "50")
    PlacementFactory(
        task=job.tasks.get(), node=Node.objects.first(), pod_name="gp-later-0",
        state=Placement.State.DELETED,
    )  # fmt: skip
    page.wait_for_selector("#log-form option[value='gp-later-0']", state="attached")
    assert page.input_value("#log-form select[name=pod]") == chosen
    assert page.input_value("#log-form input[name=tail]") == "50"
    announced = page.text_content("#live-announce")
    assert announced in ("Job state: Admitted", "Job state: Running")
    assert page.locator("#pending-reason").count() == 0
    assert page.evaluate("window.__sameDocument") is True  # no reload happened

    job.refresh_from_db()
    Job.objects.filter(pk=job.pk).update(status=Job.Status.SUCCEEDED)
    page.wait_for_selector("#job-status:has-text('Succeeded')")
    page.wait_for_selector("#live-note:has-text('The job has ended.')")
    assert page.locator("button:has-text('Cancel job')").count() == 0


def test_a_job_that_can_never_run_says_only_that(demo, open_as):
    from portal.jobs.models import Job

    job = Job.objects.get(name="bert-pretrain")
    page = open_as("researcher", f"/jobs/{job.pk}/", "#placements")
    assert page.inner_text("#job-status") == "Never runnable as submitted"
    reason = page.inner_text("#pending-reason")
    assert reason.startswith("Why it cannot run:")
    assert "capability is 24 GPUs" in reason
    assert "Why it is waiting" not in page.inner_text("main")
    started = page.locator("#timeline li", has_text="Started").inner_text()
    assert "not yet" in started

    roles = page.inner_text("#roles")
    assert "64 cores" in roles
    assert "512 GiB" in roles
    assert "000m" not in roles
    assert "GB" not in roles.replace("GiB", "")
    # Nothing of the roles table is cut off: it fits its card at the desktop width.
    assert page.evaluate(
        "(() => { const t = document.getElementById('roles');"
        " return t.scrollWidth <= t.parentElement.clientWidth + 1; })()"
    )


def test_the_job_list_is_a_stack_of_cards_on_a_phone(demo, open_as):
    page = open_as("researcher", "/jobs/", "#jobs", viewport=PHONE)
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 1
    box = page.locator("#jobs").evaluate(
        "t => t.parentElement.scrollWidth - t.parentElement.clientWidth"
    )
    assert box <= 1  # the table does not scroll sideways either: each job is a card
    card = page.locator("#jobs tbody tr", has_text="bert-pretrain")
    assert card.bounding_box()["width"] <= PHONE["width"]
    status = card.locator("td[data-label='Status']")
    assert status.inner_text() == "Never runnable"
    assert status.evaluate("td => getComputedStyle(td, '::before').content") == '"Status"'
    # A long reason is three lines of the card (the job's page has all of it).
    reason = card.locator("td[data-label='Reason'] .reason-text")
    lines = reason.evaluate(
        "s => s.getBoundingClientRect().height / parseFloat(getComputedStyle(s).lineHeight)"
    )
    assert lines <= 3.05
    assert reason.evaluate("s => s.scrollHeight > s.clientHeight")  # this one is cut
    assert card.bounding_box()["height"] <= 230
    # Brand and account, then the links in as few rows as fit: every link in sight.
    assert page.evaluate("document.querySelector('header.topbar').offsetHeight") <= 140


def test_added_roles_get_names_of_their_own_and_the_form_submits(demo, open_as):
    from portal.jobs.models import Job

    page = open_as("researcher", "/jobs/new/", "#job-submit")
    assert not page.locator("#roles fieldset").first.locator(".role-remove").is_visible()
    page.fill("#id_name", "three-roles")
    page.click("#add-role")
    page.click("#add-role")
    names = [page.input_value(f"#id_tasks-{i}-name") for i in range(3)]
    assert names == ["worker", "worker-2", "worker-3"]
    assert page.locator("#roles legend").all_inner_texts() == ["Role 1", "Role 2", "Role 3"]
    assert page.locator("#roles .role-remove:visible").count() == 3

    # Remove two: the last role kept cannot be removed as well.
    page.check("#id_tasks-1-DELETE")
    page.check("#id_tasks-2-DELETE")
    assert not page.locator("#roles fieldset").first.locator(".role-remove").is_visible()
    page.uncheck("#id_tasks-2-DELETE")
    assert page.locator("#roles fieldset").first.locator(".role-remove").is_visible()

    page.click("button:has-text('Submit job')")
    page.wait_for_selector("text=was submitted to queue")
    job = Job.objects.get(name="three-roles")
    assert sorted(task.name for task in job.tasks.all()) == ["worker", "worker-3"]


def test_the_add_button_stops_at_the_most_roles_a_job_may_have(demo, open_as, settings):
    settings.JOB_MAX_TASKS = 2
    page = open_as("researcher", "/jobs/new/", "#job-submit")
    assert "at most 2 roles" in page.inner_text("#job-limits")
    page.click("#add-role")
    assert page.is_disabled("#add-role")
    assert page.locator("#role-count-note").is_visible()
    assert page.locator("#roles fieldset").count() == 2


def test_a_new_user_submits_the_sample_manifest(demo, open_as):
    page = open_as("researcher", "/jobs/upload/", "#job-upload")
    with page.expect_download() as download:
        page.click("text=Download a sample manifest")
    assert download.value.suggested_filename == "sample-volcano-job.yaml"
    # The link loads the page again: wait for the new document, not a poll that may read
    # the old one while it is torn down (a null text box).
    with page.expect_navigation(url="**/jobs/upload/?sample=1"):
        page.click("#use-sample")
    assert "sample-train" in page.input_value("#id_text")
    page.click("button:has-text('Submit the job')")
    page.wait_for_selector("text=Job sample-train was submitted to queue")
    assert page.inner_text("h1").startswith("Job sample-train")


def test_the_submit_and_upload_pages_fit_a_phone(demo, open_as):
    for path, ready in (("/jobs/new/", "#job-submit"), ("/jobs/upload/", "#job-upload")):
        page = open_as("researcher", path, ready, viewport=PHONE)
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 1


def test_a_gpu_memory_job_says_what_it_asked_on_its_page_and_in_the_list(demo, open_as):
    """10 GiB of GPU memory is a quarter of the demo's smallest card (40 GiB), as the
    scheduler counts it: never "0 GPUs" with the 10 GiB shown nowhere."""
    from portal.jobs.models import Job
    from portal.jobs.services import job_submit
    from portal.queues.models import Queue

    job = job_submit(
        submitter=Job.objects.get(name="tokenizer-eval").submitter,
        queue=Queue.objects.get(name="nlp-train"),
        name="embed-small",
        tasks=[{"name": "server", "replicas": 1, "image": "e:1", "gpu_memory_mib": 10240}],
    )
    for viewport in (None, PHONE):
        page = open_as("researcher", f"/jobs/{job.pk}/", "#placements", viewport=viewport)
        gpus = page.inner_text("#job-gpus")
        assert gpus.startswith("0.25 (10 GiB GPU memory)")
        assert "share of a 40 GiB GPU" in gpus
        role = page.locator("#roles td[data-label='GPUs']").inner_text()
        assert role == "0.25 (10 GiB GPU memory)"
        page.goto(page.url.replace(f"/jobs/{job.pk}/", "/jobs/"))
        row = page.locator("#jobs tbody tr", has_text="embed-small")
        assert row.locator("td[data-label='GPUs']").inner_text() == "0.25 (10 GiB GPU memory)"

"""The queue pages in a real Chromium on a freshly seeded demo: the list shows each queue's use
and links to its jobs, on a desktop and as cards on a phone; the edit form takes cores and GiB."""

import re

from tests.browser.chromium import PHONE, needs_chromium

pytestmark = needs_chromium


def test_the_queue_list_shows_use_and_links_to_the_jobs(demo, open_as):
    page = open_as("lead", "/queues/", "#queues")
    headers = page.locator("#queues thead th").all_inner_texts()
    assert [h.upper() for h in headers[3:6]] == ["ALLOCATED", "DESERVED", "PENDING"]
    row = page.locator("#queues tbody tr", has_text="nlp-train")
    # The demo's 32-GPU bert-pretrain waits in nlp-train, but can never run (nlp holds at most
    # 24): the pending demand leaves it out, as the quota plugins do.
    assert row.locator("td[data-label='Pending']").inner_text() == "0 GPUs"
    assert re.fullmatch(r"[\d.]+ GPUs?", row.locator("td[data-label='Deserved']").inner_text())
    row.locator("td[data-label=Queue] a").click()
    page.wait_for_selector("#jobs")
    assert "bert-pretrain" in page.inner_text("#jobs")
    assert page.input_value("#queue") == page.url.split("queue=")[1]


def test_the_queue_list_is_cards_on_a_phone(demo, open_as):
    page = open_as("lead", "/queues/", "#queues", viewport=PHONE)
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 1
    card = page.locator("#queues tbody tr", has_text="nlp-train")
    assert card.bounding_box()["width"] <= PHONE["width"]
    assert card.locator("a", has_text="Edit").is_visible()


def test_the_queue_edit_form_takes_cores_and_gib(demo, open_as):
    from portal.queues.models import Queue

    queue = Queue.objects.get(name="nlp-train")
    page = open_as("lead", f"/queues/{queue.pk}/edit/", "#preview")
    assert page.inner_text("label[for=id_capability_cpu_millis]") == "Capability (CPU cores)"
    page.fill("#id_capability_cpu_millis", "64")
    page.fill("#id_capability_memory_bytes", "512")
    page.click("#quota-form button[type=submit]")
    page.wait_for_selector("text=Queue nlp-train saved.")
    queue.refresh_from_db()
    assert (queue.capability_cpu_millis, queue.capability_memory_bytes) == (64000, 512 * 1024**3)
    assert page.input_value("#id_capability_cpu_millis") == "64"
    history = page.inner_text("#queue-changes")
    assert "64 cores" in history
    assert "512 GiB" in history


def test_the_preview_points_at_the_value_it_cannot_use(demo, open_as):
    from portal.queues.models import Queue

    queue = Queue.objects.get(name="nlp-train")
    page = open_as("lead", f"/queues/{queue.pk}/edit/", "#preview")
    # Queue names stay on one line in the preview, dashes and all.
    name = page.locator("#preview tr[data-name='nlp-interactive'] .indent")
    assert name.evaluate("span => span.getClientRects().length") == 1  # one line box
    saved = page.input_value("#id_guarantee_cpu_millis")
    page.fill("#id_guarantee_cpu_millis", "lots")
    page.wait_for_selector("#preview-status:has-text('fix the highlighted values')")
    cpu = page.locator(".field.has-error", has=page.locator("#id_guarantee_cpu_millis"))
    assert "cores" in cpu.locator(".error").inner_text()
    assert page.locator(".field.has-error").count() == 1
    page.fill("#id_guarantee_cpu_millis", saved)
    page.wait_for_selector("#preview-status:has-text('preview updated')")
    assert page.locator(".field.has-error").count() == 0
    # The time reads as every time the server writes: 24-hour, UTC.
    assert page.inner_text("#preview-status").endswith(" UTC")


def test_the_preview_shows_what_save_would_refuse_and_draws_no_shares(demo, open_as):
    from portal.queues.models import Queue

    queue = Queue.objects.get(name="nlp-train")
    page = open_as("lead", f"/queues/{queue.pk}/edit/", "#preview")
    page.fill("#id_capability_gpus", "24")
    page.fill("#id_guarantee_gpus", "30")
    page.wait_for_selector("#preview-status:has-text('fix the highlighted values')")
    gpus = page.locator(".field.has-error", has=page.locator("#id_guarantee_gpus"))
    assert "may not exceed capability (24 GPUs)" in gpus.locator(".error").inner_text()
    after = page.locator("#preview td.after").all_inner_texts()
    assert after
    assert set(after) == {"–"}
    assert page.locator("#preview .preview-cell-up, #preview .preview-cell-down").count() == 0
    page.fill("#id_guarantee_gpus", "0")
    page.wait_for_selector("#preview-status:has-text('preview updated')")
    assert page.locator(".field.has-error").count() == 0
    assert "–" not in page.locator("#preview td.after").all_inner_texts()


def test_the_quota_form_has_a_row_per_resource(demo, open_as):
    from portal.tenants.models import Tenant

    tenant = Tenant.objects.get(name="nlp")
    page = open_as("admin", f"/tenants/{tenant.pk}/edit/", "#preview")

    def top(field: str) -> float:
        return page.locator(f"#id_{field}").bounding_box()["y"]

    for resource in ("gpus", "cpu_millis", "memory_bytes"):
        limits = [f"{kind}_{resource}" for kind in ("guarantee", "capability", "borrowing_limit")]
        # one row: the inputs line up even where a label wraps onto two lines
        assert len({round(top(field)) for field in limits}) == 1, resource
    assert top("guarantee_gpus") < top("guarantee_cpu_millis") < top("guarantee_memory_bytes")


def test_the_preview_shows_the_change_on_a_phone_without_scrolling(demo, open_as):
    from portal.queues.models import Queue

    # nlp-interactive's demand (4 GPUs, its guarantee) gives it a share that no guarantee and
    # a cap of 2 lower; nlp-train's 32-GPU gang can never run (nlp holds at most 24), so it
    # asks for next to nothing.
    queue = Queue.objects.get(name="nlp-interactive")
    page = open_as("lead", f"/queues/{queue.pk}/edit/", "#preview", viewport=PHONE)
    page.fill("#id_guarantee_gpus", "0")
    page.fill("#id_capability_gpus", "2")
    page.wait_for_selector("#preview .preview-cell-down")
    box = page.locator("#preview").evaluate(
        "t => [t.parentElement.scrollWidth, t.parentElement.clientWidth]"
    )
    assert box[0] <= box[1] + 1
    after = page.locator("#preview tr[data-name='nlp-interactive'] td.after").bounding_box()
    assert after["x"] + after["width"] <= PHONE["width"]


def test_on_a_phone_the_preview_of_the_edited_queue_follows_the_fields(demo, open_as):
    from portal.queues.models import Queue

    # nlp-interactive's demand (4 GPUs, its guarantee) gives it a share that no guarantee and
    # a cap of 2 lower; nlp-train's 32-GPU gang can never run (nlp holds at most 24), so it
    # asks for next to nothing.
    queue = Queue.objects.get(name="nlp-interactive")
    page = open_as("lead", f"/queues/{queue.pk}/edit/", "#preview", viewport=PHONE)
    summary = page.locator("#preview-summary")
    # The table is far below the fields; the edited queue's line is at the screen's foot.
    assert page.locator("#preview").bounding_box()["y"] > PHONE["height"]
    page.fill("#id_guarantee_gpus", "0")
    page.fill("#id_capability_gpus", "2")
    page.wait_for_selector("#preview .preview-cell-down")
    row = page.locator("#preview tr[data-name='nlp-interactive'] td")
    now, after = row.nth(4).inner_text(), row.nth(5).inner_text().split(" ")[0]
    assert summary.inner_text() == (
        f"Preview: nlp-interactive deserves {now} GPUs now, {after} after the change"
    )
    page.locator("#id_guarantee_gpus").scroll_into_view_if_needed()
    box = summary.bounding_box()
    assert box["y"] + box["height"] <= PHONE["height"] + 1
    assert box["y"] + box["height"] >= PHONE["height"] - 2  # stuck to the foot
    page.fill("#id_guarantee_gpus", "30")
    page.wait_for_selector("#preview-summary:has-text('Save would refuse')")


def test_on_a_desktop_the_preview_is_beside_the_form_without_a_summary(demo, open_as):
    from portal.queues.models import Queue

    queue = Queue.objects.get(name="nlp-train")
    page = open_as("lead", f"/queues/{queue.pk}/edit/", "#preview")
    assert not page.locator("#preview-summary").is_visible()

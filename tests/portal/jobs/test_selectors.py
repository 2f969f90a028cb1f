from datetime import UTC, datetime, timedelta

import pytest
from django.http import Http404
from django.utils import timezone
from rest_framework.test import APIClient

from portal.jobs.models import Job
from portal.jobs.selectors import job_get, job_list, job_queue_position, job_queue_rank
from portal.jobs.services import job_submit
from portal.queues.services import queue_orders_record
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.orchestrator import scheduling_cycle_run
from tests.factories import JobFactory, NodeFactory, SchedulerConfigFactory

pytestmark = pytest.mark.django_db


def test_job_list_scoped_and_filtered(researcher, staff, nlp_queue, vision_queue):
    mine = JobFactory(queue=nlp_queue, submitter=researcher, status=Job.Status.RUNNING)
    colleague = JobFactory(queue=nlp_queue)
    foreign = JobFactory(queue=vision_queue)
    assert set(job_list(user=researcher)) == {mine, colleague}
    assert list(job_list(user=researcher, mine=True)) == [mine]
    assert list(job_list(user=researcher, status=Job.Status.RUNNING)) == [mine]
    assert set(job_list(user=staff)) == {mine, colleague, foreign}
    assert list(job_list(user=staff, queue_id=vision_queue.pk)) == [foreign]


def test_job_get_other_tenant_is_404(researcher, nlp_queue, vision_queue):
    own = JobFactory(queue=nlp_queue)
    foreign = JobFactory(queue=vision_queue)
    assert job_get(user=researcher, job_id=own.pk) == own
    with pytest.raises(Http404):
        job_get(user=researcher, job_id=foreign.pk)


NEVER = "can never run as submitted: its gang needs 32 GPUs at once"


def test_job_list_filters_never_runnable_waiting_jobs(researcher, nlp_queue):
    never = JobFactory(queue=nlp_queue, pending_kind=Job.PendingKind.NEVER, pending_reason=NEVER)
    JobFactory(queue=nlp_queue, pending_kind=Job.PendingKind.WAITS)
    # a stale kind on a job that no longer waits does not count
    JobFactory(queue=nlp_queue, pending_kind=Job.PendingKind.NEVER, status=Job.Status.CANCELLED)
    assert list(job_list(user=researcher, never_runnable=True)) == [never]


def test_a_job_waiting_again_after_preemption_is_waiting_with_its_history(
    researcher, nlp_queue, vision_queue
):
    from datetime import UTC, datetime

    from portal.jobs.selectors import job_state
    from portal.scheduling.models import PreemptionEvent
    from tests.factories import PreemptionEventFactory

    victim = JobFactory(
        queue=nlp_queue,
        status=Job.Status.PREEMPTED,
        preemption_count=2,
        pending_kind=Job.PendingKind.WAITS,
        pending_reason="job needs 8 GPUs; queue nlp-train deserves 4 GPUs",
    )
    earlier = datetime(2026, 12, 1, 11, 0, tzinfo=UTC)
    PreemptionEventFactory(victim_job=victim, occurred_at=earlier, preemptor_job=JobFactory())
    foreign = JobFactory(queue=vision_queue, name="secret-job")
    PreemptionEventFactory(
        victim_job=victim,
        preemptor_job=foreign,
        action=PreemptionEvent.Action.RECLAIM,
        occurred_at=datetime(2026, 12, 1, 12, 5, tzinfo=UTC),
    )
    state = job_state(user=researcher, job=victim)
    assert state.headline == (
        "Waiting (preempted 2 times, last by a job of another tenant at 2026-12-01 12:05 UTC)"
    )
    assert (state.waiting, state.never, state.reason_title) == (True, False, "Why it is waiting")

    mine = JobFactory(queue=nlp_queue, name="llama-finetune")
    PreemptionEventFactory(
        victim_job=victim, preemptor_job=mine, occurred_at=datetime(2026, 12, 1, 12, 9, tzinfo=UTC)
    )
    assert job_state(user=researcher, job=victim).note == (
        "preempted 2 times, last by llama-finetune at 2026-12-01 12:09 UTC"
    )


def test_never_runnable_and_finished_states(researcher, nlp_queue):
    from portal.jobs.selectors import job_state

    never = JobFactory(queue=nlp_queue, pending_kind=Job.PendingKind.NEVER, pending_reason=NEVER)
    state = job_state(user=researcher, job=never)
    assert (state.headline, state.reason_title, state.reason) == (
        "Never runnable as submitted",
        "Why it cannot run",
        NEVER,
    )
    done = JobFactory(queue=nlp_queue, status=Job.Status.SUCCEEDED, preemption_count=1)
    assert (job_state(user=researcher, job=done).headline, done.pending_reason) == (
        "Succeeded",
        "",
    )


# --- the queue line: where the last cycle put a waiting job ------------------------------------

# A conf whose job order has no priority plugin: gang, then creation time. The database's
# (priority, submitted_at, id) order puts a later high-priority job first; the scheduler does
# not, and the position must be the scheduler's.
CREATED_ORDER_CONF = """\
actions: "allocate"
tiers:
- plugins:
  - name: gang
  - name: conformance
- plugins:
  - name: proportion
  - name: binpack
"""


def _submitted(researcher, queue, name, gpus, priority, at):
    task = {"name": "worker", "replicas": 1, "image": "trainer:1", "gpus": gpus}
    job = job_submit(submitter=researcher, queue=queue, name=name, tasks=[task], priority=priority)
    Job.objects.filter(pk=job.pk).update(submitted_at=at)
    return job


@pytest.fixture
def line(researcher, nlp_queue):
    """One 8-GPU node that a first job fills; then `early` (priority 1) and `urgent`
    (priority 9, submitted later) wait, after one cycle."""
    SchedulerConfigFactory(text=CREATED_ORDER_CONF, active=True)
    NodeFactory(name="gpu-worker-1")
    start = datetime(2026, 1, 1, 12, tzinfo=UTC)
    jobs = {
        name: _submitted(researcher, nlp_queue, name, gpus, priority, start + timedelta(minutes=i))
        for i, (name, gpus, priority) in enumerate(
            [("big", 8, 0), ("early", 4, 1), ("urgent", 4, 9)]
        )
    }
    backend = SimulatedBackend(default_run_seconds=600, now=lambda: start)
    run = scheduling_cycle_run(backend=backend, now=lambda: start + timedelta(minutes=5))
    assert not run.error, run.error
    for job in jobs.values():
        job.refresh_from_db()
    assert jobs["big"].status == Job.Status.ADMITTED
    return jobs


def _client(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_position_is_the_schedulers_where_its_job_order_and_the_databases_differ(
    line, researcher, client
):
    urgent, early = line["urgent"], line["early"]
    # what the database's order would say: urgent first
    assert list(
        Job.objects.filter(status=Job.Status.PENDING).order_by("-priority", "submitted_at")
    ) == [urgent, early]
    api = _client(researcher)
    why = api.get(f"/api/v1/jobs/{urgent.pk}/why/").json()
    assert (why["position"], why["hidden_jobs_ahead"]) == (2, 0)
    assert [job["name"] for job in why["jobs_ahead"]] == ["early"]
    assert "1 job of queue nlp-train comes first" in why["pending_reason"]
    first = api.get(f"/api/v1/jobs/{early.pk}/why/").json()
    assert (first["position"], first["jobs_ahead"]) == (1, [])
    assert "come first" not in first["pending_reason"]
    client.force_login(researcher)
    page = client.get(f"/jobs/{urgent.pk}/").content.decode()
    assert "Position 2 in queue nlp-train: 1 job ahead" in page
    # One sentence, computed once, for the page, the why endpoint and so the CLI.
    assert why["position_text"] == "position 2 in queue nlp-train: 1 job ahead"
    assert first["position_text"] == "position 1 in queue nlp-train: next in line"


def test_a_job_no_cycle_has_seen_has_no_position(line, researcher, nlp_queue):
    newcomer = JobFactory(queue=nlp_queue, submitter=researcher, name="newcomer", priority=99)
    assert job_queue_position(user=researcher, job=newcomer) is None
    assert job_queue_rank(job=newcomer) is None
    assert job_queue_rank(job=line["urgent"]) == 2


def test_jobs_ahead_of_other_tenants_are_counted_not_named(line, outsider, vision_queue):
    """A job of another tenant in the line ahead (here recorded by hand: its queue's line as
    a cycle would store it)."""
    foreign = JobFactory(queue=vision_queue, submitter=outsider, name="foreign")
    queue_orders_record(orders={vision_queue.pk: [line["early"].pk, foreign.pk]}, at=timezone.now())
    position = job_queue_position(user=outsider, job=foreign)
    assert position is not None
    assert (position.position, position.ahead, position.hidden) == (2, [], 1)


def test_a_notice_says_preempted_by_its_event_even_while_the_elastic_job_runs(nlp_queue):
    from portal.jobs.selectors import job_pod_notice
    from tests.factories import JobTaskFactory, PlacementFactory, PreemptionEventFactory

    job = JobFactory(queue=nlp_queue, status=Job.Status.RUNNING)
    task = JobTaskFactory(job=job, replicas=3)
    given = datetime(2026, 12, 1, 12, 0, 10, tzinfo=UTC)
    PlacementFactory(task=task, replica=0, state="running")  # keeps the job running
    limit = PlacementFactory(
        task=task, replica=1, state="running", notice_given_at=given,
        notice_deadline=given + timedelta(minutes=9),
    )  # fmt: skip
    assert not job_pod_notice(job=job).preempted  # only its run-time limit's notice yet
    assert job_pod_notice(job=job).text.startswith("at its run-time limit: its pod is")
    victim = PlacementFactory(
        task=task, replica=2, state="releasing", notice_given_at=given,
        notice_deadline=given + timedelta(minutes=5),
    )  # fmt: skip
    PreemptionEventFactory(victim_job=job, placement=victim)
    notice = job_pod_notice(job=job)
    assert (notice.preempted, notice.pods, notice.deadline) == (True, 2, victim.notice_deadline)
    assert notice.text.startswith("preempted: 2 of its pods are deleted at 12:05:10 UTC")
    limit.notice_end = victim.notice_end = "itself"
    limit.save()
    victim.save()
    assert job_pod_notice(job=job) is None

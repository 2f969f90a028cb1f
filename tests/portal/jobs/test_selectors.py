import pytest
from django.http import Http404

from portal.jobs.models import Job
from portal.jobs.selectors import job_get, job_list
from tests.factories import JobFactory

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

"""The preemption notice through whole cycles on the simulated cluster and clock: a victim of
a queue with a notice is told its deadline (annotation, stored on its placement), kept until
then while the preemptor waits pipelined, and deleted at the deadline unless it ends by
itself first; the history says which. A queue without a notice behaves as before."""

from datetime import UTC, datetime, timedelta

import kmock
import pytest
from django.conf import settings
from django.db.models import Sum
from django.urls import reverse

from jobspec.notice import DEADLINE_ANNOTATION, deadline_text
from portal.accounting.models import LedgerEntry
from portal.cluster.models import Placement, SimulatedPod
from portal.jobs.models import Job
from portal.jobs.selectors import job_pod_notice
from portal.jobs.services import job_cancel
from portal.scheduling.models import PreemptionEvent
from portal.tenants.models import Membership
from scheduler.adapters import orchestrator as cycle_module
from scheduler.adapters.cluster.base import ClusterError, ObservedPod
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.notice import (
    Held,
    Notice,
    grace_left,
    notice_deadline,
    notices_apply,
    notices_hold,
)
from scheduler.adapters.orchestrator import scheduling_cycle_run
from scheduler.adapters.reconcile import ReconcilePlan, ReconcileReport
from tests.factories import MembershipFactory, NodeFactory, UserFactory
from tests.scheduler.adapters.cluster.fakes import EmptyCluster
from tests.scheduler.adapters.conftest import CycleClock
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db
NOTICE = 300  # far longer than the 5 s between cycles
START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def clock():
    return CycleClock(START)


@pytest.fixture
def results(monkeypatch):
    """Each cycle's core result, in order."""
    seen = []
    run = cycle_module.run_cycle_paused

    def recorded(snapshot, conf):
        result = run(snapshot, conf)
        seen.append(result)
        return result

    monkeypatch.setattr(cycle_module, "run_cycle_paused", recorded)
    return seen


@pytest.fixture
def people(nlp, vision):
    """alice submits in both tenants; nora sees nlp only, victor vision only."""
    alice, nora, victor = (UserFactory(username=n) for n in ("alice", "nora", "victor"))
    for user, tenants in ((alice, (nlp, vision)), (nora, (nlp,)), (victor, (vision,))):
        for tenant in tenants:
            MembershipFactory(user=user, tenant=tenant, role=Membership.Role.RESEARCHER)
    return alice, nora, victor


def cycle(clock, seconds: float = 5):
    """A cycle by a fresh worker (a new backend object: nothing carried in memory), then the
    clock moves on."""
    run = scheduling_cycle_run(
        backend=SimulatedBackend(default_run_seconds=3600, now=clock), now=clock
    )
    assert not run.error, run.error
    clock.now += timedelta(seconds=seconds)
    return run


def _reclaimed(people, nlp_queue, vision_queue, clock, *, notice: int):
    """nlp's two 8-GPU jobs run on two nodes; vision's newcomer reclaims one. Returns the
    victim, the newcomer and the eviction's instant."""
    NodeFactory(name="gpu-worker-1")
    NodeFactory(name="gpu-worker-2")
    alice = _hogs(people, nlp_queue, notice=notice)
    cycle(clock)
    cycle(clock)
    newcomer = submit_job(alice, vision_queue, "newcomer", gpus=8)
    evicted_at = clock.now
    cycle(clock)
    (event,) = PreemptionEvent.objects.all()
    assert event.preemptor_job == newcomer
    return Job.objects.get(pk=event.victim_job_id), newcomer, evicted_at


def _hogs(people, nlp_queue, *, notice: int):
    """nlp (weight 1, `notice` s) submits two 8-GPU jobs as alice; returns alice."""
    nlp_queue.weight = 1
    nlp_queue.preemption_notice_seconds = notice
    nlp_queue.save()
    alice = people[0]
    for i in range(2):
        submit_job(alice, nlp_queue, f"hog-{i}", gpus=8)
    return alice


def _lost_gpu_seconds(queue) -> float:
    lost = LedgerEntry.objects.filter(queue=queue).aggregate(Sum("gpu_milli_seconds_lost"))
    return (lost["gpu_milli_seconds_lost__sum"] or 0) / 1000


def _victim_pod(victim) -> SimulatedPod | None:
    placement = Placement.objects.get(job=victim, state=Placement.State.RELEASING)
    return SimulatedPod.objects.filter(name=placement.pod_name).first()


def test_a_victim_is_told_its_deadline_and_kept_until_then_while_the_preemptor_waits(
    people, nlp_queue, vision_queue, clock, results
):
    victim, newcomer, evicted_at = _reclaimed(people, nlp_queue, vision_queue, clock, notice=NOTICE)
    deadline = evicted_at + timedelta(seconds=NOTICE)
    placement = Placement.objects.get(job=victim)
    assert (placement.state, placement.notice_given_at, placement.notice_deadline) == (
        Placement.State.RELEASING,
        evicted_at,
        deadline,
    )
    assert PreemptionEvent.objects.get().placement == placement
    pod = _victim_pod(victim)
    assert pod.delete_after is None  # not deleted: told
    assert pod.annotations[DEADLINE_ANNOTATION] == deadline_text(deadline) == "2026-12-01T12:05:10Z"

    # Cycle after cycle, each by a fresh worker, until just before the deadline: the victim
    # stays, the newcomer is pipelined onto its GPUs each time, and no one else is evicted.
    results.clear()
    while clock.now < deadline - timedelta(seconds=5):
        cycle(clock)
    assert len(results) > NOTICE // 5 - 5
    for result in results:
        assert [p.job for p in result.pipelined] == [str(newcomer.pk)]
        assert result.evictions == ()
        assert result.binds == ()
    assert PreemptionEvent.objects.count() == 1
    assert _victim_pod(victim).delete_after is None
    newcomer.refresh_from_db()
    assert newcomer.status == Job.Status.PENDING

    # At the deadline it is deleted, with the grace period; once gone the newcomer binds.
    while clock.now < deadline:
        cycle(clock)
    cycle(clock)
    pod = _victim_pod(victim)
    assert pod.delete_after is not None
    assert pod.delete_after <= deadline + timedelta(seconds=settings.EVICTION_GRACE_SECONDS)
    clock.now = pod.delete_after
    for _ in range(3):
        cycle(clock)
    newcomer.refresh_from_db()
    victim.refresh_from_db()
    assert newcomer.status == Job.Status.RUNNING
    assert victim.status == Job.Status.PENDING
    assert PreemptionEvent.objects.count() == 1
    placement.refresh_from_db()
    assert placement.notice_end == Placement.NoticeEnd.DEADLINE
    assert PreemptionEvent.objects.get().notice_text == (
        "notice given 12:00:10, deadline 12:05:10, deleted at the deadline 12:05:10"
    )
    # Its work from its start to its deadline was thrown away, booked once.
    assert _lost_gpu_seconds(nlp_queue) == 8 * (deadline - placement.started_at).total_seconds()


def test_a_victim_that_ends_by_itself_frees_its_gpus_before_the_deadline(
    people, nlp_queue, vision_queue, clock
):
    victim, newcomer, evicted_at = _reclaimed(people, nlp_queue, vision_queue, clock, notice=NOTICE)
    clock.now = evicted_at + timedelta(seconds=190)
    # It checkpointed and exited, as its deadline's file asked.
    SimulatedPod.objects.filter(pk=_victim_pod(victim).pk).update(phase="Succeeded", exit_code=0)
    for _ in range(3):
        cycle(clock)
    newcomer.refresh_from_db()
    assert newcomer.status == Job.Status.RUNNING
    placement = Placement.objects.get(job=victim)
    assert placement.notice_end == Placement.NoticeEnd.ITSELF
    victim.refresh_from_db()
    assert victim.status == Job.Status.PENDING  # placed again later, from its checkpoint
    assert PreemptionEvent.objects.get().notice_text == (
        "notice given 12:00:10, deadline 12:05:10, ended by itself 12:03:20"
    )
    clock.now = evicted_at + timedelta(seconds=NOTICE + 60)
    cycle(clock)
    assert _lost_gpu_seconds(nlp_queue) == 0  # it checkpointed: nothing booked as lost


def test_a_cancel_under_notice_deletes_the_pods_at_once(people, nlp_queue, vision_queue, clock):
    victim, _, evicted_at = _reclaimed(people, nlp_queue, vision_queue, clock, notice=NOTICE)
    job_cancel(job=victim, actor=people[0])
    cycle(clock)
    pod = _victim_pod(victim)
    assert pod.delete_after == clock.now - timedelta(seconds=5 - settings.EVICTION_GRACE_SECONDS)
    cycle(clock)
    assert Placement.objects.get(job=victim).notice_end == Placement.NoticeEnd.EARLY


def test_without_a_notice_the_victim_is_deleted_at_once_as_before(
    people, nlp_queue, vision_queue, clock
):
    victim, _, evicted_at = _reclaimed(people, nlp_queue, vision_queue, clock, notice=0)
    placement = Placement.objects.get(job=victim)
    assert placement.notice_deadline is None
    pod = SimulatedPod.objects.get(name=placement.pod_name)
    assert pod.delete_after == evicted_at + timedelta(seconds=settings.EVICTION_GRACE_SECONDS)
    assert DEADLINE_ANNOTATION not in pod.annotations
    assert PreemptionEvent.objects.get().notice_text == ""


def test_the_history_shows_the_notice_only_to_who_may_read_the_eviction(
    people, nlp_queue, vision_queue, clock, client
):
    alice, nora, victor = people
    victim, newcomer, _ = _reclaimed(people, nlp_queue, vision_queue, clock, notice=NOTICE)
    notice = "notice given 12:00:10, deadline 12:05:10"
    client.force_login(nora)
    assert notice in client.get(reverse("jobs:job_detail", args=[victim.pk])).content.decode()
    # victor sees his tenant's newcomer preempted someone, and nothing of the victim's.
    client.force_login(victor)
    page = client.get(reverse("jobs:job_detail", args=[newcomer.pk])).content.decode()
    assert "a job of another tenant" in page
    assert notice not in page
    assert "12:05:10" not in page


def test_the_victim_reads_its_deadline_where_it_looks_until_its_pod_is_gone(
    people, nlp_queue, vision_queue, clock, client
):
    """Its page, its `why` and its placements in the API say when its pod is deleted while it
    runs under notice; nothing once the pod has ended; nothing to another tenant."""
    alice, nora, victor = people
    victim, newcomer, _ = _reclaimed(people, nlp_queue, vision_queue, clock, notice=NOTICE)
    told = "its pod is deleted at 12:05:10 UTC (told at 12:00:10 UTC)"
    client.force_login(nora)
    page = client.get(reverse("jobs:job_detail", args=[victim.pk])).content.decode()
    assert f"<strong>Notice:</strong> Preempted: {told}" in page
    assert "/etc/podinfo/preemption-deadline" in page
    why = client.get(reverse("api:job_why", kwargs={"job_id": victim.pk})).json()
    assert why["notice"] == {
        "deadline": "2026-12-01T12:05:10Z",
        "given_at": "2026-12-01T12:00:10Z",
        "pods": 1,
        "cause": "preempted",
        "text": why["notice"]["text"],
    }
    assert told in why["notice"]["text"]
    detail = client.get(reverse("api:job_detail", kwargs={"job_id": victim.pk})).json()
    assert [p["notice_deadline"] for p in detail["placements"]] == ["2026-12-01T12:05:10Z"]

    client.force_login(victor)
    assert client.get(reverse("api:job_why", kwargs={"job_id": victim.pk})).status_code == 404
    page = client.get(reverse("jobs:job_detail", args=[newcomer.pk])).content.decode()
    assert "Notice:" not in page

    # It checkpoints and exits: the notice is over.
    clock.now += timedelta(seconds=60)
    SimulatedPod.objects.filter(pk=_victim_pod(victim).pk).update(phase="Succeeded", exit_code=0)
    cycle(clock)
    client.force_login(nora)
    assert client.get(reverse("api:job_why", kwargs={"job_id": victim.pk})).json()["notice"] is None
    page = client.get(reverse("jobs:job_detail", args=[victim.pk])).content.decode()
    assert "Notice:" not in page


def test_the_preemptors_estimated_start_is_the_victims_deadline(
    people, nlp_queue, vision_queue, clock
):
    """Plan ahead counts the victim's pod as gone at its deadline (it may exit earlier, and
    the deletion takes up to the grace period): not when some other job ends."""
    from portal.jobs.models import StartEstimate
    from scheduler.adapters.plan_ahead import plan_ahead_run

    victim, newcomer, evicted_at = _reclaimed(people, nlp_queue, vision_queue, clock, notice=NOTICE)
    deadline = evicted_at + timedelta(seconds=NOTICE)
    plan_ahead_run(now=clock.now)
    estimate = StartEstimate.objects.get(job=newcomer)
    assert estimate.outlook == StartEstimate.Outlook.STARTS
    assert estimate.likely == deadline
    assert estimate.latest == deadline + timedelta(seconds=settings.EVICTION_GRACE_SECONDS)
    assert clock.now < estimate.earliest <= clock.now + timedelta(seconds=60)


def test_a_job_within_its_notice_of_its_run_time_limit_is_told_the_limits_end(
    people, nlp_queue, clock
):
    NodeFactory(name="gpu-worker-1")
    nlp_queue.preemption_notice_seconds = 120
    nlp_queue.save()
    job = submit_job(people[0], nlp_queue, "ddp", gpus=8, max_runtime_seconds=600)
    cycle(clock)
    cycle(clock)
    job.refresh_from_db()
    end = job.started_at + timedelta(seconds=600)
    clock.now = end - timedelta(seconds=121)
    cycle(clock)
    pod = SimulatedPod.objects.get()
    assert DEADLINE_ANNOTATION not in pod.annotations
    clock.now = end - timedelta(seconds=120)
    cycle(clock)
    placement = Placement.objects.get(job=job)
    assert (placement.state, placement.notice_deadline) == (Placement.State.RUNNING, end)
    assert SimulatedPod.objects.get().annotations[DEADLINE_ANNOTATION] == deadline_text(end)
    assert job_pod_notice(job=job).text.startswith(
        f"at its run-time limit: its pod is deleted at {end:%H:%M:%S} UTC"
    )
    clock.now = end
    cycle(clock)
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED
    assert "reached its run-time limit of 600 s" in job.pending_reason
    told = (end - timedelta(seconds=120)).strftime("%H:%M:%S")
    assert f"its pods were told at {told} UTC that they are deleted then" in job.pending_reason
    pod = SimulatedPod.objects.get()
    assert pod.delete_after == end + timedelta(seconds=settings.EVICTION_GRACE_SECONDS)
    clock.now = pod.delete_after
    cycle(clock)
    cycle(clock)
    assert Placement.objects.get(job=job).notice_end == Placement.NoticeEnd.DEADLINE
    assert _lost_gpu_seconds(nlp_queue) == 0  # its own limit, not a preemption


def test_a_worker_back_after_the_deadline_reads_it_from_the_row_and_gives_only_the_grace_left(
    people, nlp_queue, vision_queue, clock
):
    """No worker ran between the notice and 20 s past its deadline: the next one deletes the
    pod with what is left of the grace period counted from the deadline."""
    victim, _, evicted_at = _reclaimed(people, nlp_queue, vision_queue, clock, notice=NOTICE)
    deadline = evicted_at + timedelta(seconds=NOTICE)
    clock.now = deadline + timedelta(seconds=20)
    cycle(clock)
    pod = _victim_pod(victim)
    left = settings.EVICTION_GRACE_SECONDS - 20
    assert pod.delete_after == deadline + timedelta(seconds=20 + left)


# -- the parts, without a cycle ---------------------------------------------------------------


def _pod(name, **changes):
    fields = {"namespace": "gpu-jobs", "node_name": "gpu-a", "phase": "Running", **changes}
    return ObservedPod(name=name, **fields)


@pytest.mark.parametrize(
    ("late", "grace"),
    [(-5, 30), (0, 30), (10, 20), (29, 1), (300, 1)],
)
def test_the_grace_left_counts_from_the_deadline_and_never_reaches_zero(late, grace):
    assert grace_left(START, START + timedelta(seconds=late), 30) == grace


def test_a_deadline_is_a_whole_second_never_earlier_than_asked():
    assert notice_deadline(START, 300) == START + timedelta(seconds=300)
    ragged = START + timedelta(microseconds=1)
    assert notice_deadline(ragged, 300) == START + timedelta(seconds=301)


def test_hold_keeps_pods_under_notice_until_their_deadline_and_finished_pods_go():
    kept, due, finished, plain = (
        _pod("kept"),
        _pod("due"),
        _pod("finished", phase="Succeeded"),
        _pod("plain"),
    )
    notices = {
        ("gpu-jobs", "kept"): Notice("kept", "gpu-jobs", START + timedelta(seconds=1)),
        ("gpu-jobs", "due"): Notice("due", "gpu-jobs", START),
        ("gpu-jobs", "finished"): Notice("finished", "gpu-jobs", START + timedelta(hours=1)),
    }
    plan = ReconcilePlan(delete=[due, finished, kept, plain])

    held_plan, held = notices_hold(plan, notices, START, 30)

    assert held_plan.delete == [finished, plain]
    assert held.kept == [kept]
    assert held.due == [(due, 30)]
    assert notices_hold(plan, {}, START, 30) == (plan, Held([], []))


class _Refusing(EmptyCluster):
    def __init__(self):
        self.annotated = []

    def annotate_pod(self, name, namespace, annotations):
        if name == "refused":
            raise ClusterError("HTTP 403: forbidden")
        self.annotated.append((name, dict(annotations)))


def test_apply_annotates_once_records_an_event_and_reports_a_refusal():
    deadline = START + timedelta(seconds=NOTICE)
    text = deadline_text(deadline)
    pods = [
        _pod("told", annotations={DEADLINE_ANNOTATION: text}),
        _pod("untold"),
        _pod("refused"),
        _pod("leaving", deletion_requested=True),
    ]
    notices = {("gpu-jobs", p.name): Notice(p.name, "gpu-jobs", deadline) for p in pods}
    backend, report = _Refusing(), ReconcileReport()

    notices_apply(backend, report, observed=pods, notices=notices, held=Held([], []), evictions={})

    assert backend.annotated == [("untold", {DEADLINE_ANNOTATION: text})]
    assert [(e.name, e.reason) for e in report.events] == [("untold", "PreemptionNotice")]
    assert text in report.events[0].message
    assert report.errors == ["annotate gpu-jobs/refused: HTTP 403: forbidden"]


def test_the_site_admins_history_shows_the_notice(people, nlp_queue, vision_queue, clock, client):
    _reclaimed(people, nlp_queue, vision_queue, clock, notice=NOTICE)
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    page = client.get(reverse("scheduling:preemption_list")).content.decode()
    assert "notice given 12:00:10, deadline 12:05:10 UTC" in page
    csv = b"".join(client.get(reverse("scheduling:preemption_csv")).streaming_content).decode()
    assert csv.splitlines()[0].endswith(",sentence,notice")
    assert "notice given 12:00:10, deadline 12:05:10" in csv


# -- on Kubernetes (the emulated API server) ---------------------------------------------------

GPU_NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}


def _kube_events(cluster, pod: str) -> list[tuple[str, str]]:
    table = cluster.on_loop(lambda: list(cluster.store.table("events").values()))
    return [
        (e["reason"], e["message"])
        for e in sorted(table, key=lambda e: int(e["metadata"]["resourceVersion"]))
        if e["involvedObject"]["name"] == pod
    ]


def test_on_kubernetes_the_victim_is_annotated_told_by_an_event_and_deleted_at_the_deadline(
    cluster, kube_cycle, cycle_clock, people, nlp_queue, vision_queue
):
    for node in ("gpu-a", "gpu-b"):
        cluster.add_node(node, GPU_NODE)
    alice = _hogs(people, nlp_queue, notice=NOTICE)
    kube_cycle()
    cluster.advance(5)
    kube_cycle()
    submit_job(alice, vision_queue, "newcomer", gpus=8)
    evicted_at = cycle_clock.now
    kube_cycle()

    (placement,) = Placement.objects.filter(state=Placement.State.RELEASING)
    deadline = evicted_at + timedelta(seconds=NOTICE)
    assert placement.notice_deadline == notice_deadline(evicted_at, NOTICE)
    text = deadline_text(placement.notice_deadline)
    pod = cluster.pod("gpu-jobs", placement.pod_name)
    assert pod["metadata"]["annotations"][DEADLINE_ANNOTATION] == text
    assert "deletionTimestamp" not in pod["metadata"]
    assert _kube_events(cluster, placement.pod_name)[-1] == (
        "PreemptionNotice",
        f"this pod is deleted at {text} (/etc/podinfo/preemption-deadline): "
        "checkpoint and exit before then",
    )
    kube_cycle()  # annotated already: no second patch, no second event
    assert len(cluster.requests(kmock.action.UPDATE)) == 1

    cycle_clock.now = max(deadline, placement.notice_deadline)
    kube_cycle()
    assert _kube_events(cluster, placement.pod_name)[-1][0] == "Preempted"
    assert PreemptionEvent.objects.get().placement == placement

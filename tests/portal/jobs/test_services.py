import importlib

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from portal.cluster.models import Placement
from portal.common.validators import DNS_LABEL_INVALID, STR_DICT_INVALID, STR_LIST_INVALID
from portal.jobs import services
from portal.jobs.models import Job, JobTask
from portal.jobs.services import (
    job_cancel,
    job_quarantine,
    job_quarantine_release,
    job_submit,
)
from portal.queues.models import Queue
from tests.factories import JobFactory, JobTaskFactory, PlacementFactory

pytestmark = pytest.mark.django_db


def task(**overrides):
    spec = {
        "name": "worker",
        "replicas": 2,
        "image": "ghcr.io/example/trainer:1",
        "command": ["python", "train.py"],
        "env": {"EPOCHS": "3"},
        "gpus": 8,
        "cpu_millis": 16000,
        "memory_bytes": 64 * 1024**3,
        "node_selector": {"gpu-model": "H200"},
    }
    spec.update(overrides)
    return spec


class TestJobSubmit:
    def test_creates_pending_job_with_tasks(self, researcher, nlp_queue):
        job = job_submit(
            submitter=researcher,
            queue=nlp_queue,
            name="bert",
            tasks=[task(name="master", replicas=1), task()],
            priority=5,
            expected_duration_seconds=600,
        )
        assert job.status == Job.Status.PENDING
        assert job.tenant == nlp_queue.tenant
        assert job.min_available == 3  # defaults to all replicas
        assert job.pending_reason == services.JOB_PENDING_REASON_SUBMITTED
        assert list(job.tasks.values_list("name", "replicas")) == [("master", 1), ("worker", 2)]
        worker = job.tasks.get(name="worker")
        assert worker.node_selector == {"gpu-model": "H200"}
        assert worker.command == ["python", "train.py"]
        assert job.gpu_ask.number == 24

    def test_optional_task_fields_default(self, researcher, nlp_queue):
        job = job_submit(
            submitter=researcher,
            queue=nlp_queue,
            name="tiny",
            tasks=[{"name": "main", "image": "busybox"}],
        )
        created = job.tasks.get()
        assert (created.replicas, created.gpus, created.command, created.env) == (1, 0, [], {})

    def test_staff_may_submit_anywhere(self, staff, vision_queue):
        assert job_submit(submitter=staff, queue=vision_queue, name="x", tasks=[task()]).pk

    def test_non_member_refused(self, researcher, vision_queue):
        with pytest.raises(ValidationError) as info:
            job_submit(submitter=researcher, queue=vision_queue, name="x", tasks=[task()])
        assert info.value.message_dict == {
            "queue": [
                services.JOB_SUBMIT_NOT_A_MEMBER.format(tenant="vision", queue="vision-train")
            ]
        }
        assert not Job.objects.exists()

    def test_closed_queue_refused(self, researcher, nlp_queue):
        nlp_queue.state = Queue.State.CLOSED
        nlp_queue.save()
        with pytest.raises(ValidationError) as info:
            job_submit(submitter=researcher, queue=nlp_queue, name="x", tasks=[task()])
        assert info.value.message_dict == {
            "queue": [services.JOB_SUBMIT_QUEUE_CLOSED.format(queue="nlp-train")]
        }

    def test_tasks_required(self, researcher, nlp_queue):
        with pytest.raises(ValidationError) as info:
            job_submit(submitter=researcher, queue=nlp_queue, name="x", tasks=[])
        assert info.value.message_dict == {"tasks": [services.JOB_SUBMIT_NO_TASKS]}

    def test_tasks_must_be_a_list(self, researcher, nlp_queue):
        with pytest.raises(ValidationError) as info:
            job_submit(submitter=researcher, queue=nlp_queue, name="x", tasks={"a": 1})
        assert info.value.message_dict == {"tasks": [services.JOB_SUBMIT_TASKS_NOT_A_LIST]}

    def test_one_problem_one_message(self, researcher, nlp_queue):
        """A 10,000-character name is too long (not also "not a DNS label"); a role's
        negative replicas are its own error, not the gang size's too."""
        with pytest.raises(ValidationError) as info:
            job_submit(
                submitter=researcher,
                queue=nlp_queue,
                name="x" * 10000,
                tasks=[task(replicas=-1)],
            )
        assert info.value.message_dict == {
            "name": ["Ensure this value has at most 63 characters (it has 10000)."],
            "tasks[0].replicas": ["Ensure this value is greater than or equal to 1."],
        }

    def test_field_errors_carry_task_paths(self, researcher, nlp_queue):
        with pytest.raises(ValidationError) as info:
            job_submit(
                submitter=researcher,
                queue=nlp_queue,
                name="Bad Name",
                tasks=[
                    task(name="master", replicas=1),
                    task(gpus=-1, replicas=0, command="python train.py", env={"A": 1}),
                    "not a mapping",
                    task(name="w2", node_selector=["gpu"], color="red", image=""),
                ],
            )
        errors = info.value.message_dict
        assert errors["name"] == [DNS_LABEL_INVALID]
        assert set(errors) == {
            "name",
            "tasks[1].gpus",
            "tasks[1].replicas",
            "tasks[1].command",
            "tasks[1].env",
            "tasks[2]",
            "tasks[3].node_selector",
            "tasks[3].color",
            "tasks[3].image",
        }
        assert errors["tasks[1].command"] == [STR_LIST_INVALID]
        assert errors["tasks[1].env"] == [STR_DICT_INVALID]
        assert errors["tasks[3].node_selector"] == [STR_DICT_INVALID]
        assert errors["tasks[2]"] == [services.JOB_SUBMIT_TASK_NOT_A_MAPPING]
        assert not Job.objects.exists()
        assert not JobTask.objects.exists()

    def test_non_integer_gpus(self, researcher, nlp_queue):
        with pytest.raises(ValidationError) as info:
            job_submit(submitter=researcher, queue=nlp_queue, name="x", tasks=[task(gpus="many")])
        assert set(info.value.message_dict) == {"tasks[0].gpus"}

    def test_duplicate_task_names(self, researcher, nlp_queue):
        with pytest.raises(ValidationError) as info:
            job_submit(submitter=researcher, queue=nlp_queue, name="x", tasks=[task(), task()])
        assert info.value.message_dict == {
            "tasks[1].name": [services.JOB_SUBMIT_TASK_NAME_DUPLICATE.format(name="worker")]
        }

    def test_min_available_above_replicas(self, researcher, nlp_queue):
        with pytest.raises(ValidationError) as info:
            job_submit(
                submitter=researcher, queue=nlp_queue, name="x", tasks=[task()], min_available=3
            )
        assert info.value.message_dict == {
            "min_available": [
                services.JOB_SUBMIT_MIN_AVAILABLE_ABOVE_REPLICAS.format(min_available=3, total=2)
            ]
        }

    def test_min_available_at_least_one(self, researcher, nlp_queue):
        with pytest.raises(ValidationError) as info:
            job_submit(
                submitter=researcher, queue=nlp_queue, name="x", tasks=[task()], min_available=0
            )
        assert set(info.value.message_dict) == {"min_available"}

    def test_explicit_min_available_kept(self, researcher, nlp_queue):
        job = job_submit(
            submitter=researcher, queue=nlp_queue, name="x", tasks=[task()], min_available=1
        )
        assert job.min_available == 1

    def test_expected_duration_positive(self, researcher, nlp_queue):
        with pytest.raises(ValidationError) as info:
            job_submit(
                submitter=researcher,
                queue=nlp_queue,
                name="x",
                tasks=[task()],
                expected_duration_seconds=0,
            )
        assert set(info.value.message_dict) == {"expected_duration_seconds"}


class TestJobSubmitLimits:
    """Every limit of portal.jobs.limits is enforced by job_submit, so by every entry point."""

    def _refused(self, researcher, queue, **kwargs):
        kwargs.setdefault("name", "big")
        kwargs.setdefault("tasks", [task()])
        before = (Job.objects.count(), JobTask.objects.count())
        with pytest.raises(ValidationError) as info:
            job_submit(submitter=researcher, queue=queue, **kwargs)
        assert (Job.objects.count(), JobTask.objects.count()) == before
        return info.value.message_dict

    @override_settings(JOB_MAX_GPUS_PER_POD=8, JOB_MAX_REPLICAS_PER_TASK=4)
    def test_per_pod_and_per_task_limits_name_the_task_field(self, researcher, nlp_queue):
        errors = self._refused(
            researcher, nlp_queue, tasks=[task(), task(name="w2", gpus=9, replicas=5)]
        )
        assert errors == {
            "tasks[1].gpus": ["at most 8 GPUs per pod (JOB_MAX_GPUS_PER_POD); this asks for 9"],
            "tasks[1].replicas": [
                "at most 4 replicas per task (JOB_MAX_REPLICAS_PER_TASK); this asks for 5"
            ],
        }

    def test_a_number_too_large_for_any_column_gets_the_limit_message_only(
        self, researcher, nlp_queue
    ):
        errors = self._refused(researcher, nlp_queue, tasks=[task(gpus=10**5000)])
        assert errors == {
            "tasks[0].gpus": [
                "at most 64 GPUs per pod (JOB_MAX_GPUS_PER_POD); this asks for more than 2^64"
            ]
        }

    @override_settings(JOB_MAX_REPLICAS_PER_JOB=5)
    def test_replicas_per_job_count_every_task(self, researcher, nlp_queue):
        errors = self._refused(researcher, nlp_queue, tasks=[task(), task(name="w2", replicas=4)])
        assert errors == {
            "tasks": ["at most 5 replicas per job (JOB_MAX_REPLICAS_PER_JOB); this asks for 6"]
        }

    @override_settings(JOB_MAX_TASKS=2)
    def test_too_many_tasks_is_refused_before_any_task_is_checked(self, researcher, nlp_queue):
        tasks = [task(name=f"t{i}", gpus=-1) for i in range(3)]
        errors = self._refused(researcher, nlp_queue, tasks=tasks)
        assert errors == {"tasks": ["at most 2 tasks per job (JOB_MAX_TASKS); this asks for 3"]}

    @override_settings(JOB_MAX_COMMAND_CHARS=10, JOB_MAX_ENV_VARS=1)
    def test_sizes_of_command_and_env(self, researcher, nlp_queue):
        errors = self._refused(
            researcher, nlp_queue, tasks=[task(command=["x" * 11], env={"A": "1", "B": "2"})]
        )
        assert set(errors) == {"tasks[0].command", "tasks[0].env"}

    def test_priority_and_duration_are_bounded(self, researcher, nlp_queue):
        errors = self._refused(
            researcher, nlp_queue, priority=10**12, expected_duration_seconds=10**9
        )
        assert set(errors) == {"priority", "expected_duration_seconds"}
        assert errors["priority"] == [
            "at most 1000000000 for priority (fixed); this asks for 1000000000000"
        ]

    @override_settings(JOB_MAX_PENDING_PODS_PER_TENANT=5)
    def test_pending_pods_per_tenant_are_capped(self, researcher, nlp_queue, vision_queue, staff):
        job_submit(submitter=researcher, queue=nlp_queue, name="a", tasks=[task(replicas=3)])
        errors = self._refused(researcher, nlp_queue, tasks=[task(replicas=3)])
        assert errors == {
            "tasks": [
                "tenant nlp may have at most 5 pods waiting to be scheduled "
                "(JOB_MAX_PENDING_PODS_PER_TENANT); it has 3 and this job adds 3"
            ]
        }
        job_submit(submitter=researcher, queue=nlp_queue, name="b", tasks=[task(replicas=2)])
        # Another tenant's pods are its own.
        job_submit(submitter=staff, queue=vision_queue, name="c", tasks=[task(replicas=5)])

    @override_settings(JOB_MAX_PENDING_PODS_PER_TENANT=4)
    def test_placed_and_finished_pods_do_not_count_as_pending(self, researcher, nlp_queue):
        placed = job_submit(
            submitter=researcher, queue=nlp_queue, name="a", tasks=[task(replicas=3)]
        )
        worker = placed.tasks.get()
        for replica in range(2):
            PlacementFactory(task=worker, replica=replica)
        done = job_submit(submitter=researcher, queue=nlp_queue, name="b", tasks=[task(replicas=1)])
        job_cancel(job=done, actor=researcher)
        # Pending now: replica 2 of job a (1 pod); 3 more fit under the cap of 4, 4 do not.
        self._refused(researcher, nlp_queue, tasks=[task(replicas=4)])
        job_submit(submitter=researcher, queue=nlp_queue, name="c", tasks=[task(replicas=3)])

    @override_settings(JOB_MAX_PENDING_PODS_PER_TENANT=1)
    def test_pending_cap_refusal_leaves_the_callers_transaction_usable(self, researcher, nlp_queue):
        with transaction.atomic():
            self._refused(researcher, nlp_queue, tasks=[task(replicas=2)])
            assert Job.objects.count() == 0  # TransactionManagementError if broken


# Jobs of one tenant as (status, replicas, placement states): pending pods 0, 3 and 2, with
# placements in every state and jobs the cycle no longer schedules.
PENDING_PODS_TABLES = {
    "none": [],
    "some placed": [
        (Job.Status.RUNNING, 3, [Placement.State.RUNNING, Placement.State.BOUND]),
        (Job.Status.PENDING, 2, []),
        (Job.Status.SUCCEEDED, 4, [Placement.State.SUCCEEDED] * 4),
        (Job.Status.CANCELLED, 2, []),
    ],
    "ended pods": [
        (
            Job.Status.RUNNING,
            4,
            [Placement.State.SUCCEEDED, Placement.State.FAILED, Placement.State.RELEASING],
        ),
        (Job.Status.ADMITTED, 1, [Placement.State.DELETED, Placement.State.BOUND]),
        (Job.Status.PREEMPTED, 1, [Placement.State.RUNNING]),
    ],
}


class TestPendingPodsRefusal:
    """The refusal reads the database's count (portal.jobs.pod_count), never the tenant's jobs:
    the same answer as a recount of the rows, for every cap and job size around the boundary."""

    @pytest.mark.parametrize("table", sorted(PENDING_PODS_TABLES))
    def test_same_answer_as_the_full_count(self, table, nlp_queue):
        from dataclasses import replace

        from django.db.models import Sum

        from jobspec.limits import pending_pods_error
        from portal.jobs import pod_count
        from portal.jobs.limits import job_limits
        from portal.jobs.selectors import tenant_pending_pods_recount

        for index, (status, replicas, states) in enumerate(PENDING_PODS_TABLES[table]):
            job = JobFactory(queue=nlp_queue, status=status)
            job_task = JobTask.objects.create(job=job, name=f"t{index}", replicas=replicas)
            for replica, state in enumerate(states):
                PlacementFactory(task=job_task, replica=replica, state=state)
        tenant = nlp_queue.tenant
        pending = tenant_pending_pods_recount(tenant_id=tenant.pk)
        assert pending == {"none": 0, "some placed": 3, "ended pods": 2}[table]
        stored = JobTask.objects.filter(job__tenant=tenant).aggregate(n=Sum("replicas"))["n"] or 0
        for cap in range(stored + 8):
            limits = replace(job_limits(), pending_pods_per_tenant=cap)
            for adding in range(1, 8):
                expected = pending_pods_error(
                    tenant=tenant.name, pending=pending, adding=adding, limits=limits
                )
                with CaptureQueriesContext(connection) as queries:
                    refusal = services._pending_pods_refusal(
                        job=Job(tenant=tenant), adding=adding, limits=limits
                    )
                assert refusal == expected, (cap, adding)
                if pod_count.counted_by_database(connection.vendor):
                    read = " ".join(q["sql"] for q in queries.captured_queries)
                    assert "jobs_jobtask" not in read, read
                    assert "cluster_placement" not in read, read


class TestJobCancel:
    def test_submitter_cancels(self, researcher, nlp_queue):
        job = JobFactory(queue=nlp_queue, submitter=researcher)
        job = job_cancel(job=job, actor=researcher)
        assert job.status == Job.Status.CANCELLED
        assert job.cancelled_at is not None
        assert job.finished_at == job.cancelled_at

    def test_lead_cancels_tenant_job(self, lead, researcher, nlp_queue):
        job = JobFactory(queue=nlp_queue, submitter=researcher, status=Job.Status.RUNNING)
        assert job_cancel(job=job, actor=lead).status == Job.Status.CANCELLED

    def test_staff_cancels_any_job(self, staff, vision_queue):
        job = JobFactory(queue=vision_queue)
        assert job_cancel(job=job, actor=staff).status == Job.Status.CANCELLED

    def test_other_researcher_cannot_cancel(self, researcher, nlp_queue):
        job = JobFactory(queue=nlp_queue)
        with pytest.raises(PermissionDenied, match=services.JOB_CANCEL_FORBIDDEN):
            job_cancel(job=job, actor=researcher)

    def test_lead_of_other_tenant_cannot_cancel(self, lead, vision_queue):
        job = JobFactory(queue=vision_queue)
        with pytest.raises(PermissionDenied):
            job_cancel(job=job, actor=lead)

    @pytest.mark.parametrize("status", sorted(Job.TERMINAL_STATUSES))
    def test_terminal_jobs_cannot_be_cancelled(self, researcher, nlp_queue, status):
        job = JobFactory(queue=nlp_queue, submitter=researcher, status=status)
        with pytest.raises(ValidationError) as info:
            job_cancel(job=job, actor=researcher)
        assert info.value.message_dict == {
            "status": [services.JOB_CANCEL_TERMINAL.format(status=status)]
        }

    def test_preempted_job_can_be_cancelled(self, researcher, nlp_queue):
        job = JobFactory(queue=nlp_queue, submitter=researcher, status=Job.Status.PREEMPTED)
        assert job_cancel(job=job, actor=researcher).status == Job.Status.CANCELLED


class TestJobQuarantine:
    @pytest.mark.parametrize(
        "status",
        [Job.Status.PENDING, Job.Status.ADMITTED, Job.Status.RUNNING, Job.Status.PREEMPTED],
    )
    def test_any_job_the_scheduler_works_on_can_be_quarantined(self, nlp_queue, status):
        job = JobFactory(queue=nlp_queue, status=status)
        quarantined = job_quarantine(job_id=job.pk, phase="core", error="ValueError: boom")
        job.refresh_from_db()
        assert quarantined is not None
        assert job.status == Job.Status.QUARANTINED
        assert job.pending_reason == services.JOB_QUARANTINED.format(
            phase="core", error="ValueError: boom"
        )
        assert job.pending_reason_at is not None

    def test_its_pods_are_released(self, nlp_queue):
        job = JobFactory(queue=nlp_queue, status=Job.Status.RUNNING)
        running = PlacementFactory(task__job=job, state=Placement.State.RUNNING)
        done = PlacementFactory(task=running.task, replica=1, state=Placement.State.SUCCEEDED)
        job_quarantine(job_id=job.pk, phase="reconcile", error="KeyError: 'x'")
        running.refresh_from_db()
        done.refresh_from_db()
        assert (running.state, done.state) == (Placement.State.RELEASING, Placement.State.SUCCEEDED)

    @pytest.mark.parametrize(
        "status", [Job.Status.SUCCEEDED, Job.Status.CANCELLED, Job.Status.QUARANTINED]
    )
    def test_finished_and_already_quarantined_jobs_are_left_alone(self, nlp_queue, status):
        job = JobFactory(queue=nlp_queue, status=status, pending_reason="before")
        assert job_quarantine(job_id=job.pk, phase="core", error="boom") is None
        job.refresh_from_db()
        assert (job.status, job.pending_reason) == (status, "before")

    def test_a_job_whose_stored_data_is_invalid_is_still_quarantined(self, nlp_queue):
        job = JobFactory(queue=nlp_queue)
        Job.objects.filter(pk=job.pk).update(name="nl-name\n", min_available=0)
        job_quarantine(job_id=job.pk, phase="snapshot", error="boom")
        assert Job.objects.get(pk=job.pk).status == Job.Status.QUARANTINED

    def test_long_errors_are_cut(self, nlp_queue):
        job = JobFactory(queue=nlp_queue)
        job_quarantine(job_id=job.pk, phase="core", error="x" * 5000)
        job.refresh_from_db()
        assert "x" * services.QUARANTINE_ERROR_CHARS + ")" in job.pending_reason
        assert "x" * (services.QUARANTINE_ERROR_CHARS + 1) not in job.pending_reason

    def test_a_site_admin_releases_it_to_pending(self, nlp_queue, staff):
        job = JobFactory(queue=nlp_queue, status=Job.Status.QUARANTINED)
        job = job_quarantine_release(job=job, actor=staff)
        assert job.status == Job.Status.PENDING
        assert job.pending_reason == services.JOB_RELEASED.format(actor=staff.username)

    def test_only_a_site_admin_may_release_it(self, researcher, lead, nlp_queue):
        job = JobFactory(queue=nlp_queue, submitter=researcher, status=Job.Status.QUARANTINED)
        for actor in (researcher, lead):
            with pytest.raises(PermissionDenied):
                job_quarantine_release(job=job, actor=actor)
        assert Job.objects.get(pk=job.pk).status == Job.Status.QUARANTINED

    def test_only_a_quarantined_job_is_released(self, nlp_queue, staff):
        job = JobFactory(queue=nlp_queue, status=Job.Status.RUNNING)
        with pytest.raises(ValidationError):
            job_quarantine_release(job=job, actor=staff)

    def test_its_owner_may_cancel_it(self, researcher, nlp_queue):
        job = JobFactory(queue=nlp_queue, submitter=researcher, status=Job.Status.QUARANTINED)
        assert job_cancel(job=job, actor=researcher).status == Job.Status.CANCELLED


ROOT_WITH_SYS_ADMIN = {
    "spec": {
        "containers": [
            {
                "name": "trainer",
                "image": "trainer:1",
                "securityContext": {"runAsUser": 0, "capabilities": {"add": ["SYS_ADMIN"]}},
            }
        ]
    }
}


def _stored_job(queue, template=None, tolerations=(), status=Job.Status.PENDING):
    """A job stored as it was before the policy existed (no check on the way in)."""
    job = JobFactory(queue=queue, status=status)
    JobTaskFactory(job=job, pod_template=template or {}, tolerations=list(tolerations))
    return job


class TestClusterPolicyHold:
    """A job the tenant's cluster policy refuses (stored before it, or before an admin
    narrowed it) is quarantined with what to change, never deleted; its release waits for a
    policy that allows it."""

    def test_a_job_the_policy_refuses_is_quarantined_saying_what_to_change(self, nlp_queue):
        refused = _stored_job(nlp_queue, template=ROOT_WITH_SYS_ADMIN)
        running = PlacementFactory(task=refused.tasks.get(), state=Placement.State.RUNNING)
        fine = _stored_job(
            nlp_queue,
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        )
        assert services.jobs_policy_hold(tenant_ids=[nlp_queue.tenant_id]) == [refused.pk]
        refused.refresh_from_db()
        assert refused.status == Job.Status.QUARANTINED
        assert "tenant nlp's jobs may not do on the cluster" in refused.pending_reason
        assert "tasks[0].pod_template.spec.containers[0].securityContext.capabilities.add" in (
            refused.pending_reason
        )
        assert "may not add SYS_ADMIN" in refused.pending_reason
        running.refresh_from_db()
        assert running.state == Placement.State.RELEASING
        assert Job.objects.get(pk=fine.pk).status == Job.Status.PENDING

    def test_tolerating_every_taint_is_held_and_released_once_an_admin_lists_it(
        self, nlp_queue, staff
    ):
        job = _stored_job(nlp_queue, tolerations=[{"operator": "Exists"}])
        assert services.jobs_policy_hold(queue_ids=[nlp_queue.pk]) == [job.pk]
        job.refresh_from_db()
        with pytest.raises(ValidationError) as info:
            job_quarantine_release(job=job, actor=staff)
        assert "tolerates every taint" in info.value.message_dict["status"][0]
        nlp_queue.allowed_tolerations = [{"operator": "Exists"}]
        nlp_queue.save()
        assert job_quarantine_release(job=job, actor=staff).status == Job.Status.PENDING

    def test_finished_jobs_are_left_alone(self, nlp_queue):
        job = _stored_job(nlp_queue, template=ROOT_WITH_SYS_ADMIN, status=Job.Status.SUCCEEDED)
        assert services.jobs_policy_hold() == []
        assert Job.objects.get(pk=job.pk).status == Job.Status.SUCCEEDED

    def test_the_migration_holds_the_jobs_stored_before_the_policy(self, nlp_queue):
        from django.apps import apps

        migration = importlib.import_module(
            "portal.jobs.migrations.0016_hold_jobs_the_cluster_policy_refuses"
        )
        refused = _stored_job(nlp_queue, template=ROOT_WITH_SYS_ADMIN)
        fine = _stored_job(nlp_queue)
        migration.hold(apps, None)
        assert Job.objects.get(pk=refused.pk).status == Job.Status.QUARANTINED
        assert Job.objects.get(pk=fine.pk).status == Job.Status.PENDING

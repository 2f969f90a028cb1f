import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from portal.jobs.models import Job
from portal.queues import services
from portal.queues.models import Queue, QueueChange, QueueOrder
from portal.queues.selectors import queue_order_job_ids
from portal.queues.services import queue_create, queue_delete, queue_orders_record, queue_update
from tests.factories import JobFactory, JobTaskFactory, QueueFactory

pytestmark = pytest.mark.django_db


def _tenant_guarantees(tenant, **values):
    """Give the tenant guarantees (a site admin's step) so its queues can split them."""
    for resource, value in values.items():
        setattr(tenant, f"guarantee_{resource}", value)
    tenant.save()


class TestQueueCreate:
    def test_creates_open_queue_with_defaults(self, nlp, cluster):
        _tenant_guarantees(nlp, gpus=8)
        queue = queue_create(tenant=nlp, name="nlp-train", weight=3, guarantee_gpus=8)
        assert queue.pk is not None
        assert queue.state == Queue.State.OPEN
        assert queue.capability_gpus is None
        assert queue.reclaimable is True

    @pytest.mark.parametrize("weight", [0, 65536, -1])
    def test_weight_out_of_range(self, nlp, weight):
        with pytest.raises(ValidationError) as info:
            queue_create(tenant=nlp, name="q", weight=weight)
        assert set(info.value.message_dict) == {"weight"}

    @pytest.mark.parametrize("weight", [1, 65535])
    def test_weight_bounds_accepted(self, nlp, weight):
        assert queue_create(tenant=nlp, name="q", weight=weight).weight == weight

    @pytest.mark.parametrize("name", ["Upper", "under_score", "-dash", "a" * 64, ""])
    def test_name_must_be_dns_label(self, nlp, name):
        with pytest.raises(ValidationError) as info:
            queue_create(tenant=nlp, name=name)
        assert "name" in info.value.message_dict

    def test_name_unique(self, nlp, vision):
        queue_create(tenant=nlp, name="shared")
        with pytest.raises(ValidationError) as info:
            queue_create(tenant=vision, name="shared")
        assert "name" in info.value.message_dict

    @pytest.mark.parametrize(
        ("resource", "unit", "words"),
        [
            ("gpus", 1, "guarantee (5 GPUs) may not exceed capability (4 GPUs)"),
            ("cpu_millis", 1000, "guarantee (5 cores) may not exceed capability (4 cores)"),
            ("memory_bytes", 1024**3, "guarantee (5 GiB) may not exceed capability (4 GiB)"),
        ],
    )
    def test_guarantee_above_capability(self, nlp, cluster, resource, unit, words):
        # The message reads in the units the form takes, not the stored millicores and bytes.
        with pytest.raises(ValidationError) as info:
            queue_create(
                tenant=nlp,
                name="q",
                **{f"guarantee_{resource}": 5 * unit, f"capability_{resource}": 4 * unit},
            )
        assert info.value.message_dict == {f"guarantee_{resource}": [words]}

    def test_negative_guarantee_refused(self, nlp):
        with pytest.raises(ValidationError) as info:
            queue_create(tenant=nlp, name="q", guarantee_gpus=-1)
        assert "guarantee_gpus" in info.value.message_dict

    def test_queue_guarantees_may_not_exceed_the_tenants(self, nlp, cluster):
        _tenant_guarantees(nlp, gpus=20)
        queue_create(tenant=nlp, name="a", guarantee_gpus=16)
        with pytest.raises(ValidationError) as info:
            queue_create(tenant=nlp, name="b", guarantee_gpus=8)
        assert info.value.message_dict == {
            "guarantee_gpus": [
                "guarantee_gpus: nlp's queues would guarantee 24 GPUs (a 16 GPUs + b 8 GPUs) but "
                "tenant nlp guarantees 20 GPUs"
            ]
        }
        assert not Queue.objects.filter(name="b").exists()

    def test_queue_guarantees_may_equal_the_tenants(self, nlp, cluster):
        _tenant_guarantees(nlp, gpus=16)
        queue_create(tenant=nlp, name="a", guarantee_gpus=8)
        assert queue_create(tenant=nlp, name="b", guarantee_gpus=8).guarantee_gpus == 8

    def test_other_tenants_queues_do_not_count(self, nlp, vision, cluster):
        _tenant_guarantees(nlp, gpus=8)
        _tenant_guarantees(vision, gpus=8)
        queue_create(tenant=vision, name="v", guarantee_gpus=8)
        assert queue_create(tenant=nlp, name="n", guarantee_gpus=8).guarantee_gpus == 8

    def test_cpu_guarantee_checked_against_the_tenant(self, nlp, cluster):
        _tenant_guarantees(nlp, cpu_millis=100_000)
        with pytest.raises(ValidationError) as info:
            queue_create(tenant=nlp, name="a", guarantee_cpu_millis=100_001)
        assert info.value.message_dict["guarantee_cpu_millis"] == [
            "guarantee_cpu_millis: nlp's queues would guarantee 100.001 cores (a 100.001 cores) "
            "but tenant nlp guarantees 100 cores"
        ]

    def test_empty_cluster_allows_zero_guarantees(self, nlp):
        assert queue_create(tenant=nlp, name="a").guarantee_gpus == 0

    def test_researcher_cannot_create(self, nlp, researcher):
        with pytest.raises(PermissionDenied):
            queue_create(tenant=nlp, name="a", actor=researcher)

    def test_lead_creates_in_own_tenant_only(self, nlp, vision, lead):
        assert queue_create(tenant=nlp, name="a", actor=lead).tenant == nlp
        with pytest.raises(PermissionDenied):
            queue_create(tenant=vision, name="b", actor=lead)


class TestQueueUpdate:
    def test_writes_one_audit_row_per_changed_field(self, nlp_queue, lead, cluster):
        _tenant_guarantees(nlp_queue.tenant, gpus=4)
        queue = queue_update(
            queue=nlp_queue,
            actor=lead,
            weight=5,
            guarantee_gpus=4,
            capability_gpus=16,
            borrowing_limit_gpus=4,
            reclaimable=False,
            priority=3,
            state=Queue.State.CLOSED,
        )
        assert queue.weight == 5
        rows = {
            change.field: (change.old_value, change.new_value, change.changed_by)
            for change in QueueChange.objects.filter(queue=nlp_queue)
        }
        assert rows == {
            "weight": ("2", "5", lead),
            "guarantee_gpus": ("0", "4", lead),
            "capability_gpus": ("", "16", lead),
            "borrowing_limit_gpus": ("", "4", lead),
            "reclaimable": ("true", "false", lead),
            "priority": ("0", "3", lead),
            "state": ("open", "closed", lead),
        }

    def test_unchanged_values_write_nothing(self, nlp_queue, lead):
        queue_update(queue=nlp_queue, actor=lead, weight=nlp_queue.weight)
        assert not QueueChange.objects.exists()

    def test_back_to_unlimited_is_audited(self, nlp, lead):
        queue = QueueFactory(tenant=nlp, capability_gpus=8)
        queue_update(queue=queue, actor=lead, capability_gpus=None)
        change = QueueChange.objects.get()
        assert (change.field, change.old_value, change.new_value) == ("capability_gpus", "8", "")

    def test_invalid_change_saves_nothing(self, nlp_queue, lead):
        with pytest.raises(ValidationError) as info:
            queue_update(queue=nlp_queue, actor=lead, weight=0, priority=9)
        assert set(info.value.message_dict) == {"weight"}
        nlp_queue.refresh_from_db()
        assert (nlp_queue.weight, nlp_queue.priority) == (2, 0)
        assert not QueueChange.objects.exists()

    def test_guarantee_above_capability(self, nlp_queue, lead, cluster):
        with pytest.raises(ValidationError) as info:
            queue_update(queue=nlp_queue, actor=lead, guarantee_gpus=9, capability_gpus=8)
        assert info.value.message_dict == {
            "guarantee_gpus": ["guarantee (9 GPUs) may not exceed capability (8 GPUs)"]
        }

    def test_sum_of_guarantees_on_update(self, nlp, nlp_queue, cluster):
        _tenant_guarantees(nlp, gpus=32)
        other = QueueFactory(tenant=nlp, name="nlp-dev")
        queue_update(queue=other, actor=None, guarantee_gpus=30)
        with pytest.raises(ValidationError) as info:
            queue_update(queue=nlp_queue, actor=None, guarantee_gpus=10)
        assert info.value.message_dict == {
            "guarantee_gpus": [
                "guarantee_gpus: nlp's queues would guarantee 40 GPUs (nlp-dev 30 GPUs + "
                "nlp-train 10 GPUs) but tenant nlp guarantees 32 GPUs"
            ]
        }
        nlp_queue.refresh_from_db()
        assert nlp_queue.guarantee_gpus == 0

    def test_own_guarantee_is_not_counted_twice(self, nlp, nlp_queue, cluster):
        _tenant_guarantees(nlp, gpus=32)
        queue_update(queue=nlp_queue, actor=None, guarantee_gpus=30)
        assert queue_update(queue=nlp_queue, actor=None, guarantee_gpus=32).guarantee_gpus == 32

    def test_lowering_a_guarantee_is_allowed_on_a_shrunk_cluster(self, nlp, nlp_queue, cluster):
        _tenant_guarantees(nlp, gpus=32)
        queue_update(queue=nlp_queue, actor=None, guarantee_gpus=32)
        for node in cluster[:2]:
            node.schedulable = False
            node.save()
        assert queue_update(queue=nlp_queue, actor=None, guarantee_gpus=20).guarantee_gpus == 20
        assert queue_update(queue=nlp_queue, actor=None, weight=7).weight == 7

    def test_unknown_field_refused(self, nlp_queue, lead):
        with pytest.raises(ValidationError) as info:
            queue_update(queue=nlp_queue, actor=lead, name="renamed")
        assert info.value.message_dict == {"name": [services.FIELD_NOT_EDITABLE]}

    def test_researcher_cannot_update(self, nlp_queue, researcher):
        with pytest.raises(PermissionDenied, match=services.QUEUE_EDIT_FORBIDDEN):
            queue_update(queue=nlp_queue, actor=researcher, weight=3)

    def test_lead_cannot_update_other_tenant(self, vision_queue, lead):
        with pytest.raises(PermissionDenied):
            queue_update(queue=vision_queue, actor=lead, weight=3)

    def test_staff_updates_any_queue(self, vision_queue, staff):
        assert queue_update(queue=vision_queue, actor=staff, weight=3).weight == 3

    def test_string_input_is_coerced(self, nlp_queue, lead):
        queue = queue_update(queue=nlp_queue, actor=lead, weight="7")
        assert queue.weight == 7
        assert QueueChange.objects.get().new_value == "7"


class TestQueueDelete:
    def test_deletes_unused_queue(self, nlp_queue, lead):
        queue_delete(queue=nlp_queue, actor=lead)
        assert not Queue.objects.exists()

    def test_refuses_with_active_jobs(self, nlp_queue, lead):
        JobFactory(queue=nlp_queue, status=Job.Status.RUNNING)
        with pytest.raises(ValidationError) as info:
            queue_delete(queue=nlp_queue, actor=lead)
        assert info.value.message_dict == {
            "queue": [services.QUEUE_DELETE_ACTIVE_JOBS.format(count=1)]
        }

    def test_refuses_with_finished_jobs(self, nlp_queue, lead):
        JobFactory(queue=nlp_queue, status=Job.Status.SUCCEEDED)
        with pytest.raises(ValidationError) as info:
            queue_delete(queue=nlp_queue, actor=lead)
        assert info.value.message_dict == {
            "queue": [services.QUEUE_DELETE_HAS_HISTORY.format(count=1)]
        }

    def test_researcher_cannot_delete(self, nlp_queue, researcher):
        with pytest.raises(PermissionDenied):
            queue_delete(queue=nlp_queue, actor=researcher)


class TestQueueOrdersRecord:
    def test_writes_only_the_lines_that_changed_and_drops_the_emptied_ones(
        self, nlp_queue, vision_queue
    ):
        at = timezone.now()
        lines = {nlp_queue.pk: [3, 1, 2], vision_queue.pk: [5]}
        assert queue_orders_record(orders=lines, at=at) == 2
        assert queue_orders_record(orders=lines, at=at) == 0  # nothing moved: nothing written
        assert queue_orders_record(orders={nlp_queue.pk: [1, 2], vision_queue.pk: []}, at=at) == 2
        assert list(queue_order_job_ids(queue_id=nlp_queue.pk)) == [1, 2]
        assert list(queue_order_job_ids(queue_id=vision_queue.pk)) == []
        assert not QueueOrder.objects.filter(queue=vision_queue).exists()

    def test_a_line_is_one_row_however_long(self, nlp_queue):
        ids = list(range(1, 100_001))
        queue_orders_record(orders={nlp_queue.pk: ids}, at=timezone.now())
        assert QueueOrder.objects.count() == 1
        assert queue_order_job_ids(queue_id=nlp_queue.pk).tolist() == ids


class TestQueuePolicyUpdate:
    """The taints and priority classes a queue's jobs may use besides its tenant's: a site
    admin's to set, audited; narrowing them quarantines the queue's jobs they refuse."""

    def test_a_lead_may_not_widen_them(self, nlp_queue, lead):
        with pytest.raises(PermissionDenied):
            services.queue_policy_update(
                queue=nlp_queue, actor=lead, allowed_tolerations=[{"operator": "Exists"}]
            )
        assert Queue.objects.get(pk=nlp_queue.pk).allowed_tolerations == []

    def test_the_quota_is_not_changed_here(self, nlp_queue, staff):
        with pytest.raises(ValidationError) as info:
            services.queue_policy_update(queue=nlp_queue, actor=staff, weight=5)
        assert "weight" in info.value.message_dict

    def test_narrowing_quarantines_the_jobs_it_refuses(self, nlp_queue, staff):
        dedicated = {"key": "dedicated", "operator": "Exists"}
        services.queue_policy_update(queue=nlp_queue, actor=staff, allowed_tolerations=[dedicated])
        job = JobFactory(queue=nlp_queue)
        JobTaskFactory(job=job, tolerations=[dedicated])
        held = services.queue_policy_update(queue=nlp_queue, actor=staff, allowed_tolerations=[])
        assert held == [job.pk]
        assert Job.objects.get(pk=job.pk).status == Job.Status.QUARANTINED
        fields = list(QueueChange.objects.filter(queue=nlp_queue).values_list("field", flat=True))
        assert fields == ["allowed_tolerations", "allowed_tolerations"]

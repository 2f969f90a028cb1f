"""Run-time limits: a tenant maximum (site admins), a queue's limit within it and a job's
within the queue's; a queue's minimum run time and preemption notice. Bad values are refused
naming the field."""

import pytest
from django.core.exceptions import ValidationError

from portal.jobs.services import JOB_SUBMIT_BAD_MAX_RUNTIME, job_submit
from portal.queues.services import queue_create, queue_update
from portal.tenants.runtime_limits import (
    ABOVE_QUEUE_MAXIMUM,
    ABOVE_TENANT_MAXIMUM,
    MIN_ABOVE_MAX,
    NOTICE_MAX_SECONDS,
    RUNTIME_MAX_SECONDS,
)
from portal.tenants.services import tenant_update

pytestmark = pytest.mark.django_db

TASK = {"name": "worker", "replicas": 1, "image": "ghcr.io/example/trainer:1", "gpus": 1}


def _errors(call, **kwargs):
    with pytest.raises(ValidationError) as info:
        call(**kwargs)
    return info.value.message_dict


class TestTenantMaximum:
    def test_site_admin_sets_it_and_it_is_audited(self, nlp, staff):
        tenant = tenant_update(tenant=nlp, actor=staff, max_runtime_seconds=7200)
        assert tenant.max_runtime_seconds == 7200
        change = tenant.changes.get(field="max_runtime_seconds")
        assert (change.old_value, change.new_value) == ("", "7200")

    @pytest.mark.parametrize("value", [0, -5, RUNTIME_MAX_SECONDS + 1])
    def test_out_of_range_is_refused_naming_the_field(self, nlp, value):
        assert set(_errors(tenant_update, tenant=nlp, actor=None, max_runtime_seconds=value)) == {
            "max_runtime_seconds"
        }


class TestQueueLimits:
    def test_defaults_keep_volcanos_behaviour(self, nlp):
        queue = queue_create(tenant=nlp, name="q")
        assert (queue.max_runtime_seconds, queue.min_runtime_seconds) == (None, 0)
        assert queue.preemption_notice_seconds == 0
        assert queue.runtime_limit is None

    def test_a_queue_limit_above_the_tenant_maximum_is_refused(self, nlp):
        tenant_update(tenant=nlp, actor=None, max_runtime_seconds=3600)
        errors = _errors(queue_create, tenant=nlp, name="q", max_runtime_seconds=3601)
        assert errors == {"max_runtime_seconds": [ABOVE_TENANT_MAXIMUM.format(limit=3600)]}

    def test_an_empty_queue_limit_is_the_tenants(self, nlp):
        tenant_update(tenant=nlp, actor=None, max_runtime_seconds=3600)
        assert queue_create(tenant=nlp, name="q").runtime_limit == 3600
        assert queue_create(tenant=nlp, name="r", max_runtime_seconds=60).runtime_limit == 60

    def test_a_lead_edits_them_and_each_change_is_audited(self, nlp, lead):
        queue = queue_create(tenant=nlp, name="q")
        queue = queue_update(
            queue=queue,
            actor=lead,
            max_runtime_seconds=600,
            min_runtime_seconds=300,
            preemption_notice_seconds=120,
        )
        fields = set(queue.changes.values_list("field", flat=True))
        assert fields == {"max_runtime_seconds", "min_runtime_seconds", "preemption_notice_seconds"}

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            pytest.param("max_runtime_seconds", 0, id="max-zero"),
            pytest.param("max_runtime_seconds", RUNTIME_MAX_SECONDS + 1, id="max-huge"),
            pytest.param("min_runtime_seconds", -1, id="min-negative"),
            pytest.param("min_runtime_seconds", RUNTIME_MAX_SECONDS + 1, id="min-huge"),
            pytest.param("preemption_notice_seconds", -1, id="notice-negative"),
            pytest.param("preemption_notice_seconds", NOTICE_MAX_SECONDS + 1, id="notice-huge"),
        ],
    )
    def test_out_of_range_is_refused_naming_the_field(self, nlp, field, value):
        queue = queue_create(tenant=nlp, name="q")
        assert set(_errors(queue_update, queue=queue, actor=None, **{field: value})) == {field}

    def test_a_minimum_longer_than_the_limit_is_refused(self, nlp):
        errors = _errors(
            queue_create, tenant=nlp, name="q", max_runtime_seconds=60, min_runtime_seconds=61
        )
        assert errors == {"min_runtime_seconds": [MIN_ABOVE_MAX.format(limit=60)]}


class TestJobLimit:
    def test_a_job_may_ask_for_less_than_its_queue(self, researcher, nlp_queue):
        queue = queue_update(queue=nlp_queue, actor=None, max_runtime_seconds=3600)
        job = job_submit(
            submitter=researcher, queue=queue, name="j", tasks=[TASK], max_runtime_seconds=60
        )
        job.refresh_from_db()
        assert job.max_runtime_seconds == 60

    def test_more_than_its_queue_is_refused(self, researcher, nlp_queue):
        queue = queue_update(queue=nlp_queue, actor=None, max_runtime_seconds=3600)
        errors = _errors(
            job_submit,
            submitter=researcher,
            queue=queue,
            name="j",
            tasks=[TASK],
            max_runtime_seconds=3601,
        )
        assert errors == {"max_runtime_seconds": [ABOVE_QUEUE_MAXIMUM.format(limit=3600)]}

    @pytest.mark.parametrize("value", [0, -1, "60", True, 1.5, RUNTIME_MAX_SECONDS + 1])
    def test_bad_values_are_refused_naming_the_field(self, researcher, nlp_queue, value):
        errors = _errors(
            job_submit,
            submitter=researcher,
            queue=nlp_queue,
            name="j",
            tasks=[TASK],
            max_runtime_seconds=value,
        )
        assert errors == {"max_runtime_seconds": [JOB_SUBMIT_BAD_MAX_RUNTIME]}

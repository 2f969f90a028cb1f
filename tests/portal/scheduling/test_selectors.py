from datetime import timedelta

import pytest
from django.utils import timezone

from portal.scheduling.models import PreemptionEvent
from portal.scheduling.selectors import (
    cycle_run_list,
    preemption_event_list,
    scheduler_config_get_active,
)
from tests.factories import (
    CycleRunFactory,
    JobFactory,
    PreemptionEventFactory,
    SchedulerConfigFactory,
)

pytestmark = pytest.mark.django_db


def test_active_config():
    assert scheduler_config_get_active() is None
    SchedulerConfigFactory(active=False)
    active = SchedulerConfigFactory(active=True)
    assert scheduler_config_get_active() == active


def test_preemption_filters(nlp_queue, vision_queue):
    now = timezone.now()
    old = PreemptionEventFactory(
        victim_job=JobFactory(queue=nlp_queue), occurred_at=now - timedelta(days=2)
    )
    new = PreemptionEventFactory(
        victim_job=JobFactory(queue=vision_queue),
        action=PreemptionEvent.Action.PREEMPT,
        occurred_at=now,
    )
    assert list(preemption_event_list()) == [new, old]
    assert list(preemption_event_list(action="preempt")) == [new]
    assert list(preemption_event_list(queue_id=nlp_queue.pk)) == [old]
    assert list(preemption_event_list(tenant_id=vision_queue.tenant_id)) == [new]
    assert list(preemption_event_list(since=now - timedelta(days=1))) == [new]
    assert list(preemption_event_list(until=now - timedelta(days=1))) == [old]


def test_cycle_runs_newest_first():
    now = timezone.now()
    older = CycleRunFactory(started_at=now - timedelta(seconds=5))
    newer = CycleRunFactory(started_at=now)
    assert list(cycle_run_list()) == [newer, older]

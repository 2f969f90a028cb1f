import pytest
from django.http import Http404

from portal.queues.selectors import queue_change_list, queue_get, queue_list, queue_list_editable
from tests.factories import QueueChangeFactory

pytestmark = pytest.mark.django_db


def test_queue_list_scoped(researcher, staff, nlp_queue, vision_queue):
    assert list(queue_list(user=researcher)) == [nlp_queue]
    assert list(queue_list(user=staff)) == [nlp_queue, vision_queue]


def test_queue_list_filter_by_tenant(staff, nlp_queue, vision_queue):
    assert list(queue_list(user=staff, tenant_id=vision_queue.tenant_id)) == [vision_queue]


def test_queue_list_editable(lead, researcher, nlp_queue, vision_queue):
    assert list(queue_list_editable(user=lead)) == [nlp_queue]
    assert list(queue_list_editable(user=researcher)) == []


def test_queue_get_other_tenant_is_404(researcher, vision_queue, nlp_queue):
    assert queue_get(user=researcher, queue_id=nlp_queue.pk) == nlp_queue
    with pytest.raises(Http404):
        queue_get(user=researcher, queue_id=vision_queue.pk)


def test_queue_change_list_newest_first(nlp_queue):
    first = QueueChangeFactory(queue=nlp_queue)
    second = QueueChangeFactory(queue=nlp_queue)
    assert list(queue_change_list(queue=nlp_queue)) == [second, first]

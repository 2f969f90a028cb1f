"""GET /api/v1/nodes/: what the portal's pods hold, what other workloads' pods hold, and what
is free, as the nodes page and the scheduler count them."""

import pytest

from portal.cluster.models import Placement
from tests.factories import JobTaskFactory, PlacementFactory

pytestmark = pytest.mark.django_db


def test_a_node_says_what_the_portal_others_and_nobody_hold(staff_client, cluster, nlp_queue):
    node = cluster[0]
    node.used_by_others = {"nvidia.com/gpu": 2}
    node.save()
    PlacementFactory(
        task=JobTaskFactory(job__queue=nlp_queue, gpus=1), node=node, state=Placement.State.BOUND
    )
    answer = staff_client.get(f"/api/v1/nodes/{node.pk}/").json()
    assert (answer["gpus_used"], answer["gpus_others"], answer["gpus_free"]) == (1, 2, 5)

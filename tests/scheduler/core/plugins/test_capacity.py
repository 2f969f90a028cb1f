"""capacity (flat): the deserved share as upstream's buildQueueAttrs builds it."""

from scheduler.core.plugins.capacity import deserved_share
from scheduler.core.resources import Resources

GI = 1024**3


def test_a_share_of_cpu_and_memory_deserves_no_gpu():
    # upstream's MinDimensionResource(realCapability, Infinity) caps only the names the share
    # has: a GPU the queue does not state stays out of it, it does not become the cluster's
    real = Resources({"cpu": 8000, "memory": 16 * GI, "gpu": 8, "pods": 110})
    share = deserved_share(Resources({"cpu": 2000, "memory": 2 * GI}), real, Resources())
    assert share.explicit() == {"cpu": 2000, "memory": 2 * GI}
    assert share.get("gpu") == 0
    assert share.get("pods") == 0


def test_stated_names_are_capped_where_the_real_capability_names_them():
    real = Resources({"cpu": 8000, "memory": 16 * GI, "gpu": 8})
    stated = Resources({"cpu": 20000, "gpu": 12, "example.com/fpga": 3})
    share = deserved_share(stated, real, Resources())
    # cpu and memory always exist (memory unstated: 0); the fpga the cluster does not name is
    # left as stated, as Infinity's default leaves it upstream
    assert share.explicit() == {"cpu": 8000, "memory": 0, "gpu": 8, "example.com/fpga": 3}


def test_the_guarantee_floors_the_share_and_adds_its_names():
    real = Resources({"cpu": 8000, "memory": 16 * GI, "gpu": 8})
    share = deserved_share(Resources({"cpu": 1000}), real, Resources({"cpu": 2000, "gpu": 1}))
    assert share.get("cpu") == 2000
    assert share.get("gpu") == 1

"""Pod names: id-based, DNS-label safe, unique per (job, task, replica, attempt)."""

import re

from hypothesis import given
from hypothesis import strategies as st

from jobspec.labels import pod_name

DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
task_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyzAB_-.0123456789", min_size=1, max_size=70)


def test_plain_names_read_as_their_parts():
    assert pod_name(7, "worker", 0) == "gp-7-worker-0"
    assert pod_name(7, "worker", 0, attempt=2) == "gp-7-worker-0-a2"


@given(job=st.integers(1, 10**12), task=task_names, replica=st.integers(0, 10**4))
def test_every_name_is_a_dns_label(job, task, replica):
    for attempt in (0, 3):
        assert DNS_LABEL.match(pod_name(job, task, replica, attempt))


@given(
    st.tuples(st.integers(1, 50), task_names, st.integers(0, 12), st.integers(0, 3)),
    st.tuples(st.integers(1, 50), task_names, st.integers(0, 12), st.integers(0, 3)),
)
def test_different_replicas_never_share_a_name(a, b):
    if a != b:
        assert pod_name(*a) != pod_name(*b)

"""Object names: id-based, carrying the instance, within Kubernetes' rules for the longest
job ids and task names, unique per (instance, job, task, replica, attempt); a job from before
names carried the instance keeps its `gp-<job id>` names."""

import re

from hypothesis import given
from hypothesis import strategies as st

from jobspec.job_plugins import (
    JobShape,
    hostname,
    hosts_config_map_name,
    ray_service_name,
    service_name,
    ssh_secret_name,
)
from jobspec.labels import (
    INSTANCE,
    MANAGED,
    instance_tag,
    job_object_name,
    name_holder,
    object_prefix,
    pod_name,
)
from jobspec.names import SUBDOMAIN_MAX, object_name_error

DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
# Service names (and so the subdomain of the job's host names) are DNS-1035 labels.
DNS_1035_LABEL = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")
JOB_IDS = st.integers(1, 2**63 - 1)  # the id column is a 64-bit integer
instances = st.text(min_size=1, max_size=80)
prefixes = st.one_of(st.just(""), instances.map(object_prefix))
# Job and task names as stored: DNS labels of up to 63 characters (jobspec.limits).
dns_labels = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True)
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


def test_the_instance_tag_is_stable_short_and_starts_with_a_letter():
    # Stable across releases: a running job's names are derived from it every cycle.
    assert instance_tag("gpuportal") == "u92veo"
    assert object_prefix("gpuportal") == "gp-u92veo"
    assert instance_tag("staging") != instance_tag("gpuportal")


@given(instances)
def test_every_tag_is_six_characters_a_letter_first(instance):
    tag = instance_tag(instance)
    assert len(tag) == 6
    assert re.fullmatch(r"[a-z][a-z0-9]{5}", tag)


def test_a_job_from_before_keeps_its_names():
    assert job_object_name(42, "") == job_object_name(42, None) == "gp-42"
    assert pod_name(42, "worker", 1) == pod_name(42, "worker", 1, prefix="") == "gp-42-worker-1"
    assert pod_name(42, "worker", 1, prefix="gp-u92veo") == "gp-u92veo-42-worker-1"


@given(
    job=JOB_IDS,
    task=dns_labels,
    replica=st.integers(0, 10**6),
    attempt=st.integers(0, 10**6),
    prefix=prefixes,
)
def test_every_pod_name_is_a_dns_label_for_the_longest_ids_and_names(
    job, task, replica, attempt, prefix
):
    assert DNS_LABEL.match(pod_name(job, task, replica, attempt, prefix=prefix))


@given(job=JOB_IDS, prefix=prefixes, name=dns_labels, task=dns_labels, index=st.integers(0, 10**6))
def test_every_object_name_is_within_its_kinds_rule(job, prefix, name, task, index):
    shape = JobShape(job_id=job, name=name, tasks=((task, index + 1),), prefix=prefix)
    for service in (service_name(shape.object_name), ray_service_name(shape.object_name)):
        assert DNS_1035_LABEL.match(service), service
    for other in (shape.object_name, hosts_config_map_name(shape.object_name)):
        assert object_name_error(other) is None
    assert len(ssh_secret_name(shape.object_name)) <= SUBDOMAIN_MAX
    assert object_name_error(ssh_secret_name(shape.object_name)) is None
    # <hostname>.<subdomain>: each part a DNS label.
    assert DNS_LABEL.match(hostname(name, task, index))


@given(
    st.tuples(st.integers(1, 50), st.sampled_from(["w", "worker"]), st.integers(0, 3)),
    instances,
    instances,
)
def test_two_instances_never_ask_for_the_same_name(replica, a, b):
    if instance_tag(a) == instance_tag(b):
        return  # a hash collision of two instance names (one in 2^30): not the property
    job, task, index = replica
    assert job_object_name(job, object_prefix(a)) != job_object_name(job, object_prefix(b))
    assert pod_name(job, task, index, prefix=object_prefix(a)) != pod_name(
        job, task, index, prefix=object_prefix(b)
    )
    # ... nor a name of a job from before names carried the instance.
    assert pod_name(job, task, index, prefix=object_prefix(a)) != pod_name(job, task, index)


@given(job=JOB_IDS, task=dns_labels, a=instances, b=instances)
def test_long_names_of_two_instances_differ_too(job, task, a, b):
    """A name cut to a DNS label ends with a hash of what it stands for, the instance in it."""
    long_task = ("t" * 63 + task)[-63:]
    if instance_tag(a) != instance_tag(b):
        assert pod_name(job, long_task, 0, prefix=object_prefix(a)) != pod_name(
            job, long_task, 0, prefix=object_prefix(b)
        )


def test_the_holder_of_a_name_is_told_by_its_portal_only():
    assert name_holder({MANAGED: "true", INSTANCE: "staging", "gpuportal.io/job-id": "7"},
                       "gpuportal") == "an object of portal instance staging"  # fmt: skip
    assert name_holder({MANAGED: "true"}, "gpuportal") == (
        "a portal's object from before objects carried their instance"
    )
    assert name_holder({}, "gpuportal") == "an object no portal made"
    assert name_holder(None, "gpuportal") == "an object this portal may not read"
    assert name_holder({MANAGED: "true", INSTANCE: "gpuportal"}, "gpuportal").startswith(
        "an object of another job of this portal instance"
    )

"""One namespace per tenant: the rule, what placements remember, where the pages say it."""

import re
from datetime import UTC, datetime

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from hypothesis import given
from hypothesis import strategies as st

from jobspec.labels import tenant_namespace
from jobspec.podsecurity import ENFORCE_LABEL
from portal.cluster.models import Placement, SimulatedPod
from portal.cluster.namespaces import (
    job_namespace,
    job_namespaces,
    level_drift,
    namespace_levels,
    placing_namespaces,
)
from portal.tenants.models import Membership
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.desired import desired_pods
from scheduler.adapters.orchestrator import scheduling_cycle_run
from scheduler.adapters.pod_logs import pod_log_read
from tests.factories import MembershipFactory, NodeFactory, TenantFactory, UserFactory
from tests.scheduler.conftest import submit_job

DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
PER_TENANT = {"KUBERNETES_NAMESPACE_PER_TENANT": True, "KUBERNETES_NAMESPACE_PREFIX": "gpu-"}
tenant_names = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", fullmatch=True)


def test_a_tenants_namespace_is_the_prefix_and_its_name():
    assert tenant_namespace("vision", "gpu-") == "gpu-vision"
    assert tenant_namespace("vision", "") == "vision"


@given(a=tenant_names, b=tenant_names)
def test_every_tenant_namespace_is_a_dns_label_of_its_own(a, b):
    first, second = tenant_namespace(a, "team-gpu-"), tenant_namespace(b, "team-gpu-")
    assert DNS_LABEL.fullmatch(first), first
    assert (first == second) == (a == b)


def test_a_name_too_long_for_a_label_is_cut_and_hashed():
    name = "a" * 63
    namespace = tenant_namespace(name, "gpu-")
    assert len(namespace) == 63
    assert namespace.startswith("gpu-aaaa")
    assert namespace != tenant_namespace("a" * 62 + "b", "gpu-")


@pytest.mark.parametrize("prefix", ["GPU-", "gpu_", "-gpu", "x" * 41])
def test_a_prefix_that_cannot_start_a_namespace_is_refused_naming_the_setting(prefix):
    with pytest.raises(ValueError, match="KUBERNETES_NAMESPACE_PREFIX"):
        tenant_namespace("nlp", prefix)
    with (
        override_settings(KUBERNETES_NAMESPACE_PER_TENANT=True, KUBERNETES_NAMESPACE_PREFIX=prefix),
        pytest.raises(ImproperlyConfigured, match="KUBERNETES_NAMESPACE_PREFIX"),
    ):
        job_namespace("nlp")


def test_off_every_tenant_shares_the_jobs_namespace(settings):
    settings.KUBERNETES_NAMESPACE = "batch"
    assert job_namespace("nlp") == job_namespace("vision") == "batch"
    with override_settings(**PER_TENANT):
        assert job_namespace("nlp") == "gpu-nlp"


@pytest.fixture
def alice(nlp, vision):
    user = UserFactory(username="alice")
    for tenant in (nlp, vision):
        MembershipFactory(user=user, tenant=tenant, role=Membership.Role.RESEARCHER)
    return user


def simulated_cycle():
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    backend = SimulatedBackend(default_run_seconds=600, now=lambda: now)
    finished = scheduling_cycle_run(backend=backend, now=lambda: now)
    assert not finished.error, finished.error
    return backend


@pytest.mark.django_db
def test_each_tenants_jobs_are_placed_in_its_namespace_and_stay_there_when_the_setting_changes(
    alice, nlp_queue, vision_queue
):
    NodeFactory(name="gpu-a")
    with override_settings(**PER_TENANT):
        nlp_job = submit_job(alice, nlp_queue, "bert", gpus=1)
        vision_job = submit_job(alice, vision_queue, "resnet", gpus=1)
        simulated_cycle()
        assert job_namespaces() == {"gpu-jobs", "gpu-nlp", "gpu-vision"}
    placed = dict(Placement.objects.values_list("job_id", "namespace"))
    assert placed == {nlp_job.id: "gpu-nlp", vision_job.id: "gpu-vision"}
    pods = dict(SimulatedPod.objects.values_list("name", "namespace"))
    assert sorted(pods.values()) == ["gpu-nlp", "gpu-vision"]

    # Switched off with both running: they stay where they run, a new job takes the new rule.
    later = submit_job(alice, nlp_queue, "gpt", gpus=1)
    simulated_cycle()
    desired = {
        pod.labels["gpuportal.io/job-id"]: pod.namespace for pod in desired_pods(gpu_resource_of={})
    }
    assert desired == {
        str(nlp_job.id): "gpu-nlp",
        str(vision_job.id): "gpu-vision",
        str(later.id): "gpu-jobs",
    }
    assert dict(SimulatedPod.objects.values_list("name", "namespace")) == {
        **pods,
        Placement.objects.get(job=later).pod_name: "gpu-jobs",
    }
    assert job_namespaces() == {"gpu-jobs", "gpu-nlp", "gpu-vision"}


@pytest.mark.django_db
def test_a_job_placed_again_while_some_of_its_pods_run_joins_them(alice, nlp_queue):
    NodeFactory(name="gpu-a")
    job = submit_job(alice, nlp_queue, "bert", gpus=1, replicas=2)
    simulated_cycle()
    Placement.objects.filter(job=job).update(namespace="gpu-jobs-old")
    with override_settings(**PER_TENANT):
        assert placing_namespaces({job.id: "nlp"}) == {job.id: "gpu-jobs-old"}
        Placement.objects.filter(job=job).update(state=Placement.State.DELETED)
        assert placing_namespaces({job.id: "nlp"}) == {job.id: "gpu-nlp"}


@pytest.mark.django_db
def test_a_placement_from_before_namespaces_were_stored_is_in_the_jobs_namespace(alice, nlp_queue):
    NodeFactory(name="gpu-a")
    submit_job(alice, nlp_queue, "bert", gpus=1)
    simulated_cycle()
    Placement.objects.update(namespace="")
    with override_settings(**PER_TENANT):
        assert [pod.namespace for pod in desired_pods(gpu_resource_of={})] == ["gpu-jobs"]


@pytest.mark.django_db
def test_a_pods_log_is_read_in_the_namespace_its_placement_was_made_in(alice, vision_queue):
    NodeFactory(name="gpu-a")
    with override_settings(**PER_TENANT):
        submit_job(alice, vision_queue, "resnet", gpus=1)
        simulated_cycle()
    pod = Placement.objects.get().pod_name
    log = pod_log_read(pod_name=pod, tail=20)  # the setting is off again: still gpu-vision
    assert log.phase is not None
    assert any(pod in line for line in log.lines)


@pytest.mark.django_db
def test_the_tenant_api_and_page_name_its_namespace(staff_client, nlp):
    TenantFactory(name="a" * 63)
    with override_settings(**PER_TENANT):
        body = staff_client.get(f"/api/v1/tenants/{nlp.pk}/").json()
        assert body["namespace"] == "gpu-nlp"
        page = staff_client.get(f"/tenants/{nlp.pk}/").content.decode()
        assert "<code>gpu-nlp</code>" in page
    assert staff_client.get(f"/api/v1/tenants/{nlp.pk}/").json()["namespace"] == "gpu-jobs"


def test_a_bad_prefix_is_reported_at_start_by_the_system_checks():
    from django.core.checks import run_checks

    with override_settings(KUBERNETES_NAMESPACE_PREFIX="Team_"):
        errors = [e for e in run_checks() if e.id == "cluster.E001"]
    assert len(errors) == 1
    assert "KUBERNETES_NAMESPACE_PREFIX" in errors[0].msg
    assert not [e for e in run_checks() if e.id == "cluster.E001"]


@pytest.mark.django_db
def test_each_tenants_namespace_should_enforce_its_level():
    TenantFactory(name="vision", security_level="restricted")
    TenantFactory(name="nlp")
    with override_settings(**PER_TENANT):
        assert namespace_levels() == {
            "gpu-nlp": ("baseline", "tenant nlp's level"),
            "gpu-vision": ("restricted", "tenant vision's level"),
        }


@pytest.mark.django_db
def test_a_shared_namespace_should_enforce_the_least_restrictive_level():
    TenantFactory(name="vision", security_level="restricted")
    TenantFactory(name="nlp")
    assert namespace_levels() == {
        "gpu-jobs": ("baseline", "the least restrictive of its tenants' levels")
    }


def test_a_label_that_drifted_is_a_warning_with_the_command_that_mends_it():
    expected = {
        "gpu-nlp": ("baseline", "tenant nlp's level"),
        "gpu-vision": ("restricted", "tenant vision's level"),
        "gpu-hpc": ("baseline", "tenant hpc's level"),
        "gpu-absent": ("baseline", "tenant absent's level"),
    }
    labels = {
        "gpu-nlp": {ENFORCE_LABEL: "baseline"},
        "gpu-vision": {ENFORCE_LABEL: "privileged"},
        "gpu-hpc": {"team": "hpc"},
    }
    assert level_drift(expected, labels) == [
        "namespace gpu-hpc enforces pod security level none (no "
        "pod-security.kubernetes.io/enforce label: privileged), but tenant hpc's level is "
        "baseline: kubectl label namespace gpu-hpc pod-security.kubernetes.io/enforce=baseline "
        "--overwrite",
        "namespace gpu-vision enforces pod security level privileged, but tenant vision's level "
        "is restricted: kubectl label namespace gpu-vision "
        "pod-security.kubernetes.io/enforce=restricted --overwrite",
    ]

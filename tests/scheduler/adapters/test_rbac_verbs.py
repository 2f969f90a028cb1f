"""deploy/rbac.yaml grants exactly what the portal calls: every request the code sends in a
run that exercises each path (the watch cache and the plain lists, a gang with the svc
and ssh plugins' objects, a name taken (409, read back), binding, eviction), in the shared jobs
namespace and then with a namespace per tenant, is allowed by the file (and, in a tenant's
namespace, by deploy/tenant-namespace.yaml), and every verb they grant is used. Requests are
read from the emulated API server's log."""

from __future__ import annotations

from pathlib import Path

import kmock
import pytest
import yaml
from django.test import override_settings

from jobspec.labels import owned_selector, replica_labels
from jobspec.notice import DEADLINE_ANNOTATION
from jobspec.pods import DesiredPod
from portal.cluster.namespaces import job_namespaces
from portal.jobs.services import job_cancel, job_submit
from portal.tenants.models import Membership
from scheduler.adapters.cluster.watch_cache import ClusterCache, manifests_translation
from scheduler.adapters.desired import desired_pods
from tests.factories import MembershipFactory, QueueFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db
RBAC = Path(__file__).resolve().parents[3] / "deploy" / "rbac.yaml"
TEMPLATE = RBAC.parent / "tenant-namespace.yaml"
TENANT_NAMESPACE = "NAMESPACE"  # the template's placeholder, for every tenant's namespace
PER_TENANT = {"KUBERNETES_NAMESPACE_PER_TENANT": True, "KUBERNETES_NAMESPACE_PREFIX": "gpu-"}
JOBS_NAMESPACE = "gpu-jobs"
GPU_NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}

Grant = tuple[str, str, str, str | None]  # (api group, resource, verb, namespace or None)


def granted(account: str = "gpu-portal", path: Path = RBAC) -> set[Grant]:
    """(group, resource, verb, namespace) the file grants `account` (in namespace gpu-portal);
    namespace None: every namespace."""
    documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    bound = {
        (doc["roleRef"]["kind"], doc["roleRef"]["name"], doc["metadata"].get("namespace"))
        for doc in documents
        if doc["kind"] in ("RoleBinding", "ClusterRoleBinding")
        and {"kind": "ServiceAccount", "name": account, "namespace": "gpu-portal"}
        in doc["subjects"]
    }
    grants: set[Grant] = set()
    for doc in documents:
        if doc["kind"] not in ("Role", "ClusterRole"):
            continue
        namespace = doc["metadata"].get("namespace")
        if (doc["kind"], doc["metadata"]["name"], namespace) not in bound:
            continue
        for rule in doc["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        grants.add((group, resource, verb, namespace))
    return grants


def allowed(call: Grant, grants: set[Grant]) -> Grant | None:
    """The grant that allows `call`, if any: a cluster-wide grant allows it in any namespace."""
    group, resource, verb, namespace = call
    for grant in ((group, resource, verb, None), (group, resource, verb, namespace)):
        if grant in grants:
            return grant
    return None


def called(cluster) -> set[Grant]:
    return called_from(cluster.on_loop(lambda: list(cluster.handler._requests)))


def called_from(requests) -> set[Grant]:
    calls: set[Grant] = set()
    for request in requests:
        resource = request.resource
        if resource is None:
            continue  # discovery
        name = resource.plural
        if request.subresource:
            name = f"{name}/{request.subresource}"
        if request.subresource == "binding" or request.action == kmock.action.CREATE:
            verb = "create"
        elif request.action == kmock.action.WATCH or request.params.get("watch") == "true":
            verb = "watch"
        else:
            verb = {
                kmock.action.LIST: "list",
                kmock.action.FETCH: "get",
                kmock.action.DELETE: "delete",
                kmock.action.UPDATE: "patch",
            }[request.action]
        calls.add((resource.group, name, verb, request.namespace))
    return calls


def test_the_verbs_the_portal_calls_are_the_verbs_deploy_rbac_grants(
    cluster, backend, kube_cycle, nlp, nlp_queue
):
    user = UserFactory(username="alice")
    MembershipFactory(user=user, tenant=nlp, role=Membership.Role.RESEARCHER)
    cluster.add_node("gpu-a", GPU_NODE)
    task = {"replicas": 1, "image": "trainer:1", "gpus": 4, "cpu_millis": 1000}
    job = job_submit(
        submitter=user,
        queue=nlp_queue,
        name="ddp",
        tasks=[{"name": "master", **task}, {"name": "worker", **task}],
        plugins={"pytorch": [], "ssh": []},
    )
    backend.list_nodes()  # the plain list path
    backend.list_pods()
    cache = ClusterCache(
        backend.core_v1,
        manifests_translation(backend.instance),
        object_namespaces=(JOBS_NAMESPACE,),
        object_selector=owned_selector(backend.instance),
    )
    backend.cache = cache
    try:
        kube_cycle()  # the cache's list+watch, the svc objects, the gang's pods and binds
        taken = desired_pods(gpu_resource_of={})[0]
        backend.create_pod(taken)
        # A victim told its preemption deadline: patch.
        backend.annotate_pod(taken.name, taken.namespace, {DEADLINE_ANNOTATION: "x"})
        job_cancel(job=job, actor=user)
        kube_cycle()  # evicts: delete
        # The same with a namespace per tenant: vision's namespace exists, speech's not yet.
        backend.namespaces = job_namespaces
        for namespace in (JOBS_NAMESPACE, "gpu-nlp", "gpu-vision"):
            cluster.add_namespace(namespace)
        vision = QueueFactory(tenant=TenantFactory(name="vision"), name="vision-train")
        speech = QueueFactory(tenant=TenantFactory(name="speech"), name="speech-train")
        for queue in (vision, speech):
            MembershipFactory(user=user, tenant=queue.tenant, role=Membership.Role.RESEARCHER)
        with override_settings(**PER_TENANT):
            jobs = [
                job_submit(
                    submitter=user,
                    queue=queue,
                    name="ddp",
                    tasks=[{"name": "master", **task}, {"name": "worker", **task}],
                    plugins={"pytorch": [], "ssh": []},
                )
                for queue in (vision, speech)
            ]
            kube_cycle()  # namespaces listed, vision's gang made in gpu-vision, speech waits
            taken = desired_pods(gpu_resource_of={})[0]
            assert taken.namespace == "gpu-vision"
            backend.create_pod(taken)
            backend.annotate_pod(taken.name, taken.namespace, {DEADLINE_ANNOTATION: "x"})
            job_cancel(job=jobs[0], actor=user)
            kube_cycle()
    finally:
        cache.stop()

    tenants = ("gpu-nlp", "gpu-vision", "gpu-speech")
    grants = granted() | granted(path=TEMPLATE)
    assert_exactly_granted(in_template(called(cluster), tenants), grants)
    grants = granted()
    # Writes only ever in the jobs namespace; nothing is written cluster-wide.
    assert {ns for (_, _, verb, ns) in grants if verb not in ("get", "list", "watch")} == {
        JOBS_NAMESPACE
    }


def test_the_web_account_reads_a_pods_log_and_the_namespaces_labels_and_nothing_else(
    cluster, backend
):
    """The logs API and the configuration check run in the web process, under its own account
    (gpu-portal-web)."""
    cluster.add_node("gpu-a", GPU_NODE)
    pod = DesiredPod(
        name="gp-7-worker-0",
        namespace=JOBS_NAMESPACE,
        node_name="gpu-a",
        image="trainer:1",
        command=["sleep", "60"],
        env={},
        requests={"cpu": 1000},
        labels=replica_labels(job_id=7, task="worker", replica=0, queue="q", tenant="t"),
        annotations={},
    )
    backend.create_pod(pod)
    cluster.advance(1)
    before = cluster.on_loop(lambda: len(cluster.handler._requests))

    backend.pod_log(pod.name, JOBS_NAMESPACE, tail=10)
    backend.namespace_labels([JOBS_NAMESPACE])  # portal.ops.health.config_warnings

    requests = cluster.on_loop(lambda: list(cluster.handler._requests))
    calls = called_from(requests[before:])
    assert_exactly_granted(calls, granted("gpu-portal-web"))


def in_template(calls: set[Grant], tenant_namespaces: tuple[str, ...]) -> set[Grant]:
    """`calls`, each in a tenant's namespace shown in the template's placeholder namespace."""
    return {
        (group, resource, verb, TENANT_NAMESPACE if ns in tenant_namespaces else ns)
        for group, resource, verb, ns in calls
    }


def assert_exactly_granted(calls: set[Grant], grants: set[Grant]) -> None:
    refused = sorted(call for call in calls if allowed(call, grants) is None)
    assert refused == [], f"called but not granted by deploy/rbac.yaml: {refused}"
    used = {allowed(call, grants) for call in calls}
    unused = sorted(grants - used, key=str)
    assert unused == [], f"granted by deploy/rbac.yaml but never called: {unused}"

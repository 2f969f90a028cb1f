"""The real-cluster leg: the portal's Kubernetes path against kube-apiserver, etcd and
kube-controller-manager (scheduler/adapters/cluster/testing/control_plane.py), with a fake
kubelet per test driving the pods on that test's nodes.

Collected only when REALCLUSTER_KUBECONFIG names the admin kubeconfig of a running plane
(`./dev cluster-up` prints it; `./dev test-realcluster` and CI's third leg set it). The portal
runs as its own ServiceAccount, gpu-portal/gpu-portal, with exactly deploy/rbac.yaml's grants,
never as the admin: what RBAC refuses the portal, it refuses here too.

Tests share the cluster, so each one works with its own instance label, its own nodes (named
after the test) and its own kubelet, and removes them afterwards; run them one at a time
(-n 0): every test's cycle sees every node of the cluster.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from scheduler.adapters.cluster.kubernetes import KubernetesBackend, RetryPolicy
from scheduler.adapters.cluster.testing.control_plane import apply_manifests, service_account_token
from scheduler.adapters.cluster.testing.fake_kubelet import FakeKubelet
from scheduler.adapters.cluster.testing.kubelet import Kubelet
from tests.scheduler.conftest import wait_for

KUBECONFIG = os.environ.get("REALCLUSTER_KUBECONFIG", "")
if not KUBECONFIG:
    collect_ignore_glob = ["test_*.py"]

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "gpu-jobs"
PORTAL_SA = ("gpu-portal", "gpu-portal")
GPU_RESOURCE_NAMES = ("nvidia.com/gpu",)
Raw = dict[str, Any]


@pytest.fixture(scope="session")
def admin_client() -> client.ApiClient:
    return config.new_client_from_config(KUBECONFIG)


@pytest.fixture(scope="session")
def admin(admin_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(admin_client)


@pytest.fixture(scope="session")
def portal_rbac(admin_client: client.ApiClient, admin: client.CoreV1Api) -> None:
    """deploy/rbac.yaml applied as a cluster admin would, and the jobs namespace usable (its
    default ServiceAccount exists, which ServiceAccount admission wants before any pod)."""
    documents = [
        doc for doc in yaml.safe_load_all((ROOT / "deploy" / "rbac.yaml").read_text()) if doc
    ]
    apply_manifests(admin_client, documents)
    wait_for(
        lambda: any(
            account.metadata.name == "default"
            for account in admin.list_namespaced_service_account(NAMESPACE).items
        ),
        f"the default ServiceAccount of {NAMESPACE}",
        timeout=30,
    )


def service_account_configuration(
    admin: client.CoreV1Api, namespace: str, name: str
) -> client.Configuration:
    """A client Configuration authenticated as that ServiceAccount (a TokenRequest token)."""
    token = service_account_token(admin.api_client, namespace, name, hours=6)
    admin_configuration = admin.api_client.configuration
    configuration = client.Configuration(host=admin_configuration.host)
    configuration.ssl_ca_cert = admin_configuration.ssl_ca_cert
    configuration.api_key = {"authorization": token}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    return configuration


@pytest.fixture(scope="session")
def portal_configuration(portal_rbac: None, admin: client.CoreV1Api) -> client.Configuration:
    return service_account_configuration(admin, *PORTAL_SA)


@pytest.fixture(scope="session")
def portal_kubeconfig(
    portal_configuration: client.Configuration, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The portal's ServiceAccount as a kubeconfig file, for processes (deploy/smoke.sh)."""
    from scheduler.adapters.cluster.testing.control_plane import token_kubeconfig

    path = tmp_path_factory.mktemp("portal") / "kubeconfig"
    token_kubeconfig(
        path,
        server=portal_configuration.host,
        ca_file=Path(portal_configuration.ssl_ca_cert),
        token=portal_configuration.api_key["authorization"],
        user="gpu-portal",
    )
    return path


@pytest.fixture
def portal_api(portal_configuration: client.Configuration) -> client.CoreV1Api:
    """The API as the portal's ServiceAccount sees it (a fresh copy of the Configuration:
    the backend switches its retries off)."""
    return client.CoreV1Api(client.ApiClient(_copy(portal_configuration)))


@pytest.fixture
def instance(settings: Any) -> str:
    """This test's portal instance: its label on every object the portal makes (the
    backend's and the desired pods', which read the setting)."""
    settings.KUBERNETES_INSTANCE = f"t-{secrets.token_hex(4)}"
    return str(settings.KUBERNETES_INSTANCE)


@pytest.fixture
def kubelet(request: pytest.FixtureRequest, admin: client.CoreV1Api) -> Iterator[FakeKubelet]:
    """A kubelet for the nodes this test registers, running in a thread; afterwards its nodes
    and every pod on them are removed."""
    owner = f"k-{secrets.token_hex(4)}"
    agent = FakeKubelet(admin, owner=owner, kubelet=Kubelet(start_seconds=0.0)).start(0.1)
    try:
        yield agent
    finally:
        agent.stop()
        nodes = {
            node.metadata.name
            for node in admin.list_node(label_selector=f"{agent_label(agent)}").items
        }
        for pod in admin.list_pod_for_all_namespaces().items:
            if pod.spec.node_name in nodes:
                _force_delete(admin, pod)
        agent.remove_nodes()


def agent_label(agent: FakeKubelet) -> str:
    from scheduler.adapters.cluster.testing.fake_kubelet import OWNER_LABEL

    return f"{OWNER_LABEL}={agent.owner}"


@pytest.fixture
def backend(
    portal_configuration: client.Configuration, instance: str, admin: client.CoreV1Api
) -> Iterator[KubernetesBackend]:
    """The portal's Kubernetes backend as its ServiceAccount, this test's instance; the
    instance's pods and objects are removed afterwards (by the admin, whatever the test did)."""
    made = KubernetesBackend.from_configuration(
        _copy(portal_configuration),
        NAMESPACE,
        GPU_RESOURCE_NAMES,
        RetryPolicy(attempts=3, base_delay=0.05, max_delay=0.5),
        instance=instance,
    )
    try:
        yield made
    finally:
        selector = f"gpuportal.io/instance={instance}"
        for pod in admin.list_pod_for_all_namespaces(label_selector=selector).items:
            _force_delete(admin, pod)
        admin.delete_collection_namespaced_config_map(NAMESPACE, label_selector=selector)
        admin.delete_collection_namespaced_secret(NAMESPACE, label_selector=selector)
        for service in admin.list_namespaced_service(NAMESPACE, label_selector=selector).items:
            admin.delete_namespaced_service(service.metadata.name, NAMESPACE)
        networking = client.NetworkingV1Api(admin.api_client)
        networking.delete_collection_namespaced_network_policy(NAMESPACE, label_selector=selector)


class WallClock:
    """The cycle's clock: the real time (the API server's and the kubelet's), readable as a
    callable like the emulator's CycleClock."""

    def __call__(self) -> datetime:
        return datetime.now(tz=UTC)


@pytest.fixture
def real_cycle(backend: KubernetesBackend) -> Callable[..., Any]:
    """One whole scheduling cycle against the real API server; fails the test on a cycle
    error unless `errors=True`."""
    from scheduler.adapters.orchestrator import scheduling_cycle_run

    def cycle(*, errors: bool = False) -> Any:
        finished = scheduling_cycle_run(backend=backend, now=WallClock())
        if not errors:
            assert not finished.error, finished.error
        return finished

    return cycle


def _copy(configuration: client.Configuration) -> client.Configuration:
    fresh = client.Configuration(host=configuration.host)
    fresh.ssl_ca_cert = configuration.ssl_ca_cert
    fresh.api_key = dict(configuration.api_key)
    fresh.api_key_prefix = dict(configuration.api_key_prefix)
    return fresh


def _force_delete(api: client.CoreV1Api, pod: client.V1Pod) -> None:
    try:
        api.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0)
    except ApiException as exc:
        if exc.status != 404:
            raise

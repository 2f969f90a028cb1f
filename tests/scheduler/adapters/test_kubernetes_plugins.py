"""The svc plugin's objects reach the cluster before the job's pods (emulated API server)."""

from __future__ import annotations

import kmock
import pytest

from jobspec import labels
from jobspec.job_plugins import JobShape, job_objects, pod_additions
from jobspec.pods import DesiredPod, plugin_objects
from scheduler.adapters.cluster.base import NameTakenError

NAMESPACE = "gpu-jobs"
JOB = JobShape(job_id=7, name="ddp", tasks=(("master", 1), ("worker", 1)))
PLUGINS = {"pytorch": [], "svc": []}


def _desired(task: str) -> DesiredPod:
    selector = {
        labels.MANAGED: "true",
        labels.INSTANCE: labels.DEFAULT_INSTANCE,
        labels.JOB_ID: "7",
    }
    objects = job_objects(PLUGINS, JOB, namespace=NAMESPACE, labels=selector, selector=selector)
    return DesiredPod(
        name=labels.pod_name(7, task, 0),
        namespace=NAMESPACE,
        node_name="gpu-a",
        image="trainer:1",
        command=[],
        env={},
        requests={"cpu": 1000, "memory": 2**30},
        labels=labels.replica_labels(job_id=7, task=task, replica=0, queue="q", tenant="t"),
        annotations={},
        additions=pod_additions(PLUGINS, JOB, task, 0).as_dict(),
        job_objects=tuple(objects),
    )


def _stored(cluster, resource: str) -> dict:
    return cluster.on_loop(lambda: dict(cluster.store.table(resource)))


def test_the_jobs_service_config_map_and_network_policy_are_created_once(cluster, backend):
    cluster.add_node("gpu-a", {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"})
    backend.create_pod(_desired("master"))
    backend.create_pod(_desired("worker"))

    assert set(_stored(cluster, "services")) == {(NAMESPACE, "gp-7")}
    config_map = _stored(cluster, "configmaps")[(NAMESPACE, "gp-7-svc")]
    assert config_map["data"]["master.host"] == "ddp-master-0.gp-7"
    assert set(_stored(cluster, "networkpolicies.networking.k8s.io")) == {(NAMESPACE, "gp-7")}
    service = kmock.resource("v1/services")
    assert len(cluster.requests(kmock.action.CREATE, service)) == 1
    master = cluster.pod(NAMESPACE, labels.pod_name(7, "master", 0))
    assert (master["spec"]["hostname"], master["spec"]["subdomain"]) == ("ddp-master-0", "gp-7")
    env = {e["name"]: e.get("value") for e in master["spec"]["containers"][0]["env"]}
    assert env["MASTER_ADDR"] == "ddp-master-0.gp-7"


def _add_service(cluster, object_labels: dict[str, str]) -> None:
    cluster.on_loop(
        lambda: cluster.store.create(
            "services", NAMESPACE, {"apiVersion": "v1", "kind": "Service",
                                    "metadata": {"name": "gp-7", "namespace": NAMESPACE,
                                                 "labels": object_labels},
                                    "spec": {"clusterIP": "None"}},
        )
    )  # fmt: skip


def test_an_existing_object_of_this_instance_is_success(cluster, backend):
    cluster.add_node("gpu-a", {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"})
    # Made by an earlier attempt whose answer was lost.
    _add_service(cluster, dict(_desired("master").job_objects[1]["metadata"]["labels"]))
    backend.create_pod(_desired("master"))
    assert cluster.pod_names() == [labels.pod_name(7, "master", 0)]


@pytest.mark.parametrize(
    ("object_labels", "holder"),
    [
        ({labels.MANAGED: "true", labels.INSTANCE: "portal-b", labels.JOB_ID: "7"},
         "an object of portal instance portal-b"),
        ({}, "an object no portal made"),
    ],
)  # fmt: skip
def test_an_object_name_someone_else_holds_is_refused_naming_the_holder(
    cluster, backend, object_labels, holder
):
    cluster.add_node("gpu-a", {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"})
    _add_service(cluster, object_labels)

    with pytest.raises(NameTakenError) as raised:
        backend.create_pod(_desired("master"))

    assert str(raised.value) == f"create Service {NAMESPACE}/gp-7: name taken by {holder}"
    assert cluster.pod_names() == []  # no pod resolving another's Service
    assert _stored(cluster, "services")[(NAMESPACE, "gp-7")]["metadata"].get("labels", {}) == (
        object_labels
    )


def test_the_sweep_deletes_only_this_instances_objects_that_no_pod_needs(cluster, backend):
    ended = plugin_objects({"svc": []}, JobShape(job_id=7, name="a", tasks=(("w", 1),)),
                           namespace=NAMESPACE, instance=backend.instance)  # fmt: skip
    running = plugin_objects({"svc": []}, JobShape(job_id=8, name="b", tasks=(("w", 1),)),
                             namespace=NAMESPACE, instance=backend.instance)  # fmt: skip
    foreign = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "gp-7x", "namespace": NAMESPACE,
                            "labels": {labels.MANAGED: "true", labels.INSTANCE: "other-portal"}},
               "spec": {"clusterIP": "None"}}  # fmt: skip
    resource = {"ConfigMap": "configmaps", "Service": "services",
                "NetworkPolicy": "networkpolicies.networking.k8s.io"}  # fmt: skip
    for obj in (*ended, *running, foreign):
        cluster.on_loop(lambda obj=obj: cluster.store.create(resource[obj["kind"]], NAMESPACE, obj))
    keep = {(o["kind"], NAMESPACE, o["metadata"]["name"]) for o in running}

    deleted = backend.sweep_job_objects(keep)

    assert sorted(deleted) == [
        f"ConfigMap {NAMESPACE}/gp-7-svc",
        f"NetworkPolicy {NAMESPACE}/gp-7",
        f"Service {NAMESPACE}/gp-7",
    ]
    assert set(_stored(cluster, "services")) == {(NAMESPACE, "gp-8"), (NAMESPACE, "gp-7x")}
    assert set(_stored(cluster, "configmaps")) == {(NAMESPACE, "gp-8-svc")}

"""A template's affinity reaches the scheduler and the pod: required node affinity keeps the
job's pods on matching nodes; pod anti-affinity spreads the job's own pods one per node, and
never repels another job's pods that happen to carry the same labels."""

from datetime import UTC, datetime

import pytest

from jobspec.labels import JOB_ID
from portal.cluster.models import Placement, SimulatedPod
from portal.jobs.models import Job
from portal.jobs.services import job_submit
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.orchestrator import scheduling_cycle_run
from tests.factories import NodeFactory

pytestmark = pytest.mark.django_db

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SPREAD = {
    "podAntiAffinity": {
        REQ: [
            {
                "labelSelector": {"matchLabels": {"app": "ddp"}},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}


def _submit(user, queue, name, affinity, *, replicas, gpus=1):
    template = {
        "metadata": {"labels": {"app": "ddp"}},
        "spec": {
            "containers": [{"name": "t", "image": "trainer:1",
                            "resources": {"limits": {"nvidia.com/gpu": gpus, "cpu": "1"}}}],
            "affinity": affinity,
        },
    }  # fmt: skip
    return job_submit(
        submitter=user,
        queue=queue,
        name=name,
        tasks=[{"name": "worker", "replicas": replicas, "pod_template": template}],
    )


def _cycle():
    backend = SimulatedBackend(default_run_seconds=600, now=lambda: NOW)
    scheduling_cycle_run(backend=backend, now=lambda: NOW)


def _nodes_of(job):
    return list(Placement.objects.filter(job=job).values_list("node_name", flat=True))


def test_required_node_affinity_places_pods_only_on_matching_nodes(researcher, nlp_queue):
    NodeFactory(name="a100-1", gpu_model="A100", labels={"gpu-model": "A100", "gen": "3"})
    NodeFactory(name="h100-1", gpu_model="H100", labels={"gpu-model": "H100", "gen": "4"})
    NodeFactory(name="h100-old", gpu_model="H100", labels={"gpu-model": "H100", "gen": "2"})
    affinity = {"nodeAffinity": {REQ: {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "gpu-model", "operator": "In", "values": ["H100"]},
        {"key": "gen", "operator": "Gt", "values": ["3"]},
    ]}]}}}  # fmt: skip
    job = _submit(researcher, nlp_queue, "pinned", affinity, replicas=3, gpus=2)
    _cycle()
    assert _nodes_of(job) == ["h100-1"] * 3
    pod = SimulatedPod.objects.filter(node_name="h100-1").first()
    assert pod.spec["affinity"] == affinity


def test_no_matching_node_leaves_the_job_pending(researcher, nlp_queue):
    NodeFactory(name="a100-1", gpu_model="A100", labels={"gpu-model": "A100"})
    affinity = {"nodeAffinity": {REQ: {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "gpu-model", "operator": "In", "values": ["H100"]}]}]}}}  # fmt: skip
    job = _submit(researcher, nlp_queue, "pinned", affinity, replicas=1)
    _cycle()
    assert _nodes_of(job) == []
    assert Job.objects.get(id=job.id).status == Job.Status.PENDING


def test_anti_affinity_spreads_the_jobs_pods_one_per_node(researcher, nlp_queue):
    for index in range(3):
        NodeFactory(name=f"gpu-{index}")
    job = _submit(researcher, nlp_queue, "spread", SPREAD, replicas=3)
    _cycle()
    assert sorted(_nodes_of(job)) == ["gpu-0", "gpu-1", "gpu-2"]
    # The pod's selector is confined to its own job by the job-id label.
    spec = SimulatedPod.objects.first().spec
    term = spec["affinity"]["podAntiAffinity"][REQ][0]
    assert term["labelSelector"]["matchLabels"] == {"app": "ddp", JOB_ID: str(job.id)}


def test_anti_affinity_with_more_pods_than_nodes_starts_none_of_the_gang(researcher, nlp_queue):
    NodeFactory(name="gpu-0")
    NodeFactory(name="gpu-1")
    job = _submit(researcher, nlp_queue, "spread", SPREAD, replicas=3)
    _cycle()
    assert _nodes_of(job) == []


def test_anti_affinity_does_not_repel_another_jobs_pods_with_the_same_labels(researcher, nlp_queue):
    NodeFactory(name="gpu-0")
    first = _submit(researcher, nlp_queue, "one", SPREAD, replicas=1)
    second = _submit(researcher, nlp_queue, "two", SPREAD, replicas=1)
    _cycle()
    assert _nodes_of(first) == _nodes_of(second) == ["gpu-0"]

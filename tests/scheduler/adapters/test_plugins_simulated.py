"""A 2-pod PyTorch job on the simulated cluster gets what a DDP script needs: RANK 0 and 1 and
one MASTER_ADDR, the host name of the master's pod in the job's headless Service."""

from datetime import UTC, datetime

import pytest

from portal.cluster.models import SimulatedPod
from portal.jobs.services import job_submit
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.desired import desired_pods
from scheduler.adapters.orchestrator import scheduling_cycle_run
from tests.factories import NodeFactory

pytestmark = pytest.mark.django_db


def _task(name):
    return {"name": name, "replicas": 1, "image": "trainer:1", "gpus": 1, "cpu_millis": 1000}


def test_a_two_pod_pytorch_job_gets_ranks_and_one_master_address(researcher, nlp_queue):
    NodeFactory(name="gpu-worker-1")
    job = job_submit(
        submitter=researcher,
        queue=nlp_queue,
        name="ddp",
        tasks=[_task("master"), _task("worker")],
        plugins={"pytorch": []},
    )
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    scheduling_cycle_run(backend=SimulatedBackend(default_run_seconds=600, now=lambda: now),
                         now=lambda: now)  # fmt: skip

    pods = {pod.labels["gpuportal.io/task"]: pod for pod in SimulatedPod.objects.all()}
    assert set(pods) == {"master", "worker"}
    env = {
        task: {e["name"]: e.get("value") for e in pod.spec["containers"][0]["env"]}
        for task, pod in pods.items()
    }
    assert (env["master"]["RANK"], env["worker"]["RANK"]) == ("0", "1")
    assert env["master"]["WORLD_SIZE"] == env["worker"]["WORLD_SIZE"] == "2"
    master_addr = env["master"]["MASTER_ADDR"]
    assert env["worker"]["MASTER_ADDR"] == master_addr
    # MASTER_ADDR is the master pod's <hostname>.<subdomain> ...
    master_spec = pods["master"].spec
    assert master_addr == f"{master_spec['hostname']}.{master_spec['subdomain']}"
    assert pods["worker"].spec["subdomain"] == master_spec["subdomain"]
    # ... and the subdomain is the job's headless Service, which selects the master pod.
    objects = desired_pods(gpu_resource_of={})[0].job_objects
    service = next(o for o in objects if o["kind"] == "Service")
    assert service["metadata"]["name"] == master_spec["subdomain"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= pods["master"].labels.items()
    assert job.plugins == {"pytorch": [], "svc": []}

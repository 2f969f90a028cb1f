"""The over-limit job every entry point is driven with (form, API, upload page, CLI), and the
errors job_submit gives for it."""

from jobspec.limits import exceeded
from portal.jobs.limits import job_limits

# The same job everywhere: one task of 1,000,000 replicas x 5,000 GPUs.
REPLICAS, GPUS = 1_000_000, 5_000
GPU_PATH = "spec.tasks[0].template.spec.containers[0].resources.limits"
REPLICAS_PATH = "spec.tasks[0].replicas"


def expected_messages() -> dict[str, list[str]]:
    """job_submit's errors for that job, by the service's field paths."""
    limits = job_limits()
    return {
        "tasks[0].replicas": [exceeded(limits, "replicas_per_task", REPLICAS)],
        "tasks[0].gpus": [exceeded(limits, "gpus_per_pod", GPUS)],
        "tasks": [exceeded(limits, "replicas_per_job", REPLICAS)],
    }


def over_limit_manifest(queue: str = "nlp-train") -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "huge"},
        "spec": {
            "queue": queue,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": REPLICAS,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "image": "trainer:1",
                                    "resources": {"limits": {"nvidia.com/gpu": GPUS}},
                                }
                            ]
                        }
                    },
                }
            ],
        },
    }


def manifest_errors() -> dict[str, list[str]]:
    messages = expected_messages()
    return {
        REPLICAS_PATH: messages["tasks[0].replicas"],
        GPU_PATH: messages["tasks[0].gpus"],
        "spec.tasks": messages["tasks"],
    }

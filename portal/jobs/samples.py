"""The sample Volcano Job the upload page offers (to download, or to start from in the paste
box): small enough to run on the demo cluster, with a comment on each field the portal reads."""

SAMPLE_FILENAME = "sample-volcano-job.yaml"

_SAMPLE = """\
# A Volcano Job (batch.volcano.sh/v1alpha1) the portal accepts: one master and two workers
# that start together (minAvailable: 3), one GPU each.
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: sample-train           # lower-case letters, digits and dashes
spec:
  queue: {queue}# one of your queues
  minAvailable: 3              # pods that must start together (the gang)
  tasks:
    - name: master             # a role
      replicas: 1
      template:
        spec:
          containers:
            - name: main
              image: ghcr.io/example/trainer:latest
              command: ["python", "train.py"]
              resources:
                limits: {{nvidia.com/gpu: 1, cpu: "4", memory: 16Gi}}
    - name: worker
      replicas: 2
      template:
        spec:
          containers:
            - name: main
              image: ghcr.io/example/trainer:latest
              command: ["python", "train.py", "--worker"]
              resources:
                limits: {{nvidia.com/gpu: 1, cpu: "4", memory: 16Gi}}
"""


def volcano_sample(*, queue: str) -> str:
    """The sample manifest, submitting to `queue` (its comment stays in line with the others
    for names of up to 21 characters)."""
    return _SAMPLE.format(queue=queue.ljust(21) + " ")

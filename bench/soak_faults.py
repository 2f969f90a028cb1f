"""The soak's cluster faults (`python -m scheduler soak --cluster-faults`): the simulated
backend, saying no the ways a real cluster does, seeded and on the soak's simulated clock.

Each pod the cycle creates meets at most one fault, drawn from its name and the seed (so a run
is repeatable and a retried pod, which has a new name, draws again):

- a namespace ResourceQuota refuses its create (HTTP 403, "exceeded quota");
- the node's kubelet refuses it at admission (phase Failed, OutOfnvidia.com/gpu);
- its image cannot be pulled (Pending, ErrImagePull);
- an init container cannot be created (Pending, CreateContainerConfigError: a missing Secret).

Some jobs name an image no registry has: every pod of theirs, on every attempt, cannot pull it
(drawn from the job's id), so their attempts run up to the cap. A pod that cannot start stays
Pending until the portal gives its GPUs back.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime
from typing import Any

QUOTA_MESSAGE = (
    'pods "{pod}" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=8, '
    "used: requests.nvidia.com/gpu=32, limited: requests.nvidia.com/gpu=32"
)
# Chance per created pod of each fault.
RATES = (("quota", 0.05), ("refused", 0.05), ("image", 0.04), ("init", 0.04))
BAD_IMAGE_JOBS = 0.03  # chance per job that no pod of it can ever pull its image
KUBELET = {
    "refused": ("Failed", "OutOfnvidia.com/gpu"),
    "image": ("Pending", "ErrImagePull"),
    "init": ("Pending", "CreateContainerConfigError"),
}


def fault_of(seed: int, pod: str) -> str | None:
    """The fault pod `pod` (named gp-<job id>-...) meets, if any."""
    job = pod.split("-")[1] if pod.startswith("gp-") else pod
    if random.Random(f"{seed}:job:{job}").random() < BAD_IMAGE_JOBS:
        return "image"
    draw = random.Random(f"{seed}:{pod}").random()
    for fault, rate in RATES:
        if draw < rate:
            return fault
        draw -= rate
    return None


def faulty_backend(*, seed: int, **kwargs: Any):
    """A SimulatedBackend (its arguments) that injects the faults above."""
    from scheduler.adapters.cluster.base import RefusedClusterError
    from scheduler.adapters.cluster.simulated import SimulatedBackend
    from scheduler.adapters.portal_port import SimulatedPod

    class FaultyBackend(SimulatedBackend):
        def __init__(self) -> None:
            super().__init__(**kwargs)
            self.last_pk = 0  # every pod up to this one met its fault, or none
            self.injected: dict[str, int] = dict.fromkeys((f for f, _ in RATES), 0)

        def create_pods(self, pods: Sequence[Any]) -> list[Exception | None]:
            refused = {pod.name for pod in pods if fault_of(seed, pod.name) == "quota"}
            made = iter(super().create_pods([pod for pod in pods if pod.name not in refused]))
            outcomes: list[Exception | None] = []
            for pod in pods:
                if pod.name in refused:
                    self.injected["quota"] += 1
                    where = f"create pod {pod.namespace}/{pod.name}"
                    message = QUOTA_MESSAGE.format(pod=pod.name)
                    outcomes.append(RefusedClusterError(where, 403, message))
                else:
                    outcomes.append(next(made))
            return outcomes

        def advance(self) -> None:
            new = SimulatedPod.objects.filter(pk__gt=self.last_pk, phase="Pending", reason="")
            for pk, name in new.values_list("pk", "name").order_by("pk"):
                self.last_pk = pk
                fault = fault_of(seed, name)
                if fault in KUBELET:
                    self.injected[fault] += 1
                    phase, reason = KUBELET[fault]
                    SimulatedPod.objects.filter(pk=pk).update(phase=phase, reason=reason)
            super().advance()

    return FaultyBackend()


class FaultWatch:
    """What the report says of the faults: after every cycle, how many waiting jobs (pending
    or preempted) had a blank reason, and how many jobs in their start backoff still held GPUs
    (a bound or running placement); at the end, the most failed starts one job made in any
    hour (a node found full at bind time made no pod: not a start), against what the backoff
    settings allow."""

    def __init__(self) -> None:
        self.blank_reasons = 0
        self.held_in_backoff = 0

    def after_cycle(self, now: datetime) -> None:
        from portal.cluster.models import Placement
        from portal.jobs.backoff import attempts_of, in_backoff
        from portal.jobs.limits import start_backoff
        from portal.jobs.models import Job

        waiting = Job.objects.filter(status__in=[Job.Status.PENDING, Job.Status.PREEMPTED])
        self.blank_reasons += waiting.filter(pending_reason="").count()
        holding = set(
            Placement.objects.filter(
                state__in=[Placement.State.BOUND, Placement.State.RUNNING]
            ).values_list("job_id", flat=True)
        )
        backoff = start_backoff()
        for stored in (
            waiting.filter(pk__in=holding)
            .exclude(start_attempts=[])
            .values_list("start_attempts", flat=True)
        ):
            self.held_in_backoff += in_backoff(attempts_of(stored), backoff, now)

    def report(self, backend: Any, max_in_window: Any) -> dict[str, Any]:
        from collections import Counter

        from portal.jobs.backoff import NOTHING_MADE, attempts_of, backoff_bound_per_hour
        from portal.jobs.limits import start_backoff
        from portal.jobs.models import Job

        per_hour, kinds, capped = 0, Counter(), 0
        rows = Job.objects.exclude(start_attempts=[]).values_list(
            "start_attempts", "max_retry", "status"
        )
        bound = 0
        for stored, max_retry, status in rows:
            attempts = attempts_of(stored)
            kinds.update(str(attempt.kind) for attempt in attempts)
            starts = [a.at for a in attempts if a.kind not in NOTHING_MADE]
            per_hour = max(per_hour, max_in_window(starts, 3600.0))
            bound = max(bound, backoff_bound_per_hour(start_backoff(), max_retry))
            capped += status == Job.Status.FAILED
        figures = {
            "faults_injected": dict(sorted(backend.injected.items())),
            "start_failures": dict(sorted(kinds.items())),
            "jobs_failed_at_their_cap": capped,
            "max_start_attempts_per_job_per_hour": per_hour,
            "backoff_bound_per_hour": bound or backoff_bound_per_hour(start_backoff(), 3),
            "blank_reasons_while_waiting": self.blank_reasons,
            "gpus_held_while_backing_off": self.held_in_backoff,
        }
        return figures

    def into(self, report: dict[str, Any], backend: Any, max_in_window: Any) -> None:
        """The figures and their targets into the soak's report."""
        report["cluster_faults"] = figures = self.report(backend, max_in_window)
        report["targets"].update(fault_targets(figures))
        report["targets_met"] = all(report["targets"].values())


def fault_targets(figures: dict[str, Any]) -> dict[str, bool]:
    return {
        "max_start_attempts_per_job_per_hour <= backoff_bound_per_hour": (
            figures["max_start_attempts_per_job_per_hour"] <= figures["backoff_bound_per_hour"]
        ),
        "blank_reasons_while_waiting == 0": figures["blank_reasons_while_waiting"] == 0,
        "gpus_held_while_backing_off == 0": figures["gpus_held_while_backing_off"] == 0,
    }

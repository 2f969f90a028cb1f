"""When the cluster says no: a job's start attempts, and every backoff derived from them.

Pure: no Django, no database, no clock (the caller passes `now` and the settings). A job keeps
its failed start attempts (`Job.start_attempts`, the last ATTEMPTS_KEPT), each with its time,
kind, node, pod and the kubelet's or API server's words; everything below is a function of
that list, so the cycle, the job page and the metrics read one truth.

The rules, as kube-scheduler's backoff of unschedulable pods (pkg/scheduler/backend/queue:
initial 1 s doubling to 10 s there, settings here):

- **Job backoff.** A job whose pods failed to start (an image that cannot be pulled, a
  container that cannot be created, a start timeout, a namespace quota, a name taken) waits
  `base x 2^(n-1)`, at most `max`, after its n-th such failure (of any of these kinds), before
  it is placed again.
- **Node backoff.** A node whose kubelet refused the job's pod at admission (OutOf<resource>,
  UnexpectedAdmissionError) is avoided by that job for `base x 2^(n-1)`, at most `max`, after
  its n-th refusal there; the job may run elsewhere at once.
  A node found full at bind time (another scheduler's pod bound there after the cycle read
  the cluster: nothing of the gang was created) is avoided the same way.
- **The cap.** The job fails at its `cap`-th failure of one kind (its maxRetry, 3 unless it says),
  with the kubelet's words; a namespace quota never fails it (it clears when other pods end),
  nor does a node found full at bind time (the job did nothing wrong, and tried nothing).

So a job makes at most `attempts_per_hour(settings) + cap` start attempts in any hour: the job
backoff's series, and the kubelet refusals, which hold back a node and not the job. A node
found full at bind time is no start (no pod was made) and outside that bound: each one holds
that node back for its own growing interval.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

ATTEMPTS_KEPT = 20


class Kind(StrEnum):
    """Why a start attempt failed; the value is the `reason` label of the metric."""

    KUBELET_REFUSED = "kubelet-refused"  # OutOf<resource> at admission: avoid that node
    IMAGE_PULL = "image-pull"  # ErrImagePull, ImagePullBackOff, ... (any container)
    CONTAINER = "container"  # CreateContainerConfigError (a missing Secret), ... (any container)
    START_TIMEOUT = "start-timeout"  # not running within the start timeout
    QUOTA = "quota"  # a namespace ResourceQuota refused the pod (HTTP 403 "exceeded quota")
    NAME_TAKEN = "name-taken"  # an object not this instance's holds a name the job's pod needs
    # At bind time the node no longer had room (another scheduler's pod bound there since the
    # cycle's read): nothing was created; avoid that node, never counted toward the cap.
    NODE_TAKEN = "node-taken"


# Kinds whose backoff is per node; the others hold the whole job back.
NODE_KINDS = frozenset({Kind.KUBELET_REFUSED, Kind.NODE_TAKEN})
# Kinds that never fail the job: they clear without the job changing.
UNCAPPED = frozenset({Kind.QUOTA, Kind.NODE_TAKEN})
# Kinds that made no pod, so no start: outside backoff_bound_per_hour's bound.
NOTHING_MADE = frozenset({Kind.NODE_TAKEN})

IMAGE_PULL_REASONS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
)
CONTAINER_REASONS = frozenset(
    {"CreateContainerConfigError", "CreateContainerError", "RunContainerError", "CrashLoopBackOff"}
)
# The words of the ResourceQuota admission plugin (k8s.io/apiserver
# plugin/pkg/admission/resourcequota: "exceeded quota: %s, requested: %s, used: %s, limited: %s").
# A 403 says nothing by its status alone: Pod Security and RBAC refuse with 403 too, for good.
_QUOTA = re.compile(r"exceeded quota: ([^,\s]+)")

KIND_WORDS = {
    Kind.KUBELET_REFUSED: "the kubelet of node {node} refused pod {pod}",
    Kind.IMAGE_PULL: "pod {pod} could not pull its image on node {node}",
    Kind.CONTAINER: "pod {pod} could not create its container on node {node}",
    Kind.START_TIMEOUT: "pod {pod} did not start on node {node} in time",
    Kind.QUOTA: "namespace quota {quota} exceeded",
    Kind.NAME_TAKEN: "pod {pod} was not made: a name it needs is taken",
    Kind.NODE_TAKEN: "node {node}'s GPUs were taken before the bind of pod {pod}",
}
RETRY_JOB = "will retry at {at}"
RETRY_NODE = "avoiding node {node} until {at}, other nodes may take it now"
FAILURE_COUNT = "start failure {count} of {cap}"
CAPPED = "the job failed: {count} start failures of this kind (maxRetry {cap})"
WORDS_CHARS = 600


@dataclass(frozen=True, slots=True)
class BackoffSettings:
    base_seconds: float = 10.0
    max_seconds: float = 300.0

    def interval(self, failures: int) -> timedelta:
        """The wait after the `failures`-th failure (1, 2, ...): base x 2^(n-1), capped."""
        if failures <= 0:
            return timedelta(0)
        seconds = self.base_seconds * 2 ** min(failures - 1, 32)
        return timedelta(seconds=min(seconds, self.max_seconds))

    def attempts_per_hour(self) -> int:
        """The most job-level start attempts a job can make in an hour: each attempt after
        the first waits its interval (which grows to its maximum, then stays there), even if
        the job is placed again at once and fails at once."""
        total, attempts = 0.0, 1
        while (wait := self.interval(attempts).total_seconds()) and total + wait <= 3600.0:
            total += wait
            attempts += 1
        return attempts


def backoff_bound_per_hour(settings: BackoffSettings, max_retry: int) -> int:
    """The most start attempts of any kind one job can make in an hour (module docstring)."""
    return settings.attempts_per_hour() + cap_of(max_retry)


@dataclass(frozen=True, slots=True)
class Attempt:
    at: datetime
    kind: Kind
    node: str = ""
    pod: str = ""
    words: str = ""  # the kubelet's or the API server's own words
    quota: str = ""  # the ResourceQuota's name (Kind.QUOTA)

    def as_json(self) -> dict[str, str]:
        data = {"at": self.at.isoformat(), "kind": str(self.kind)}
        for field in ("node", "pod", "words", "quota"):
            if value := getattr(self, field):
                data[field] = value[:WORDS_CHARS]
        return data

    @classmethod
    def from_json(cls, data: Any) -> Attempt | None:
        """None for an entry that is not an attempt (a row edited by hand)."""
        if not isinstance(data, dict):
            return None
        try:
            at = datetime.fromisoformat(str(data["at"]))
            kind = Kind(data["kind"])
        except (KeyError, ValueError):
            return None
        if at.tzinfo is None:
            at = at.replace(tzinfo=UTC)
        text = {f: str(data.get(f) or "") for f in ("node", "pod", "words", "quota")}
        return cls(at=at, kind=kind, **text)

    def cause(self) -> str:
        """What happened, in the portal's words and then the cluster's."""
        head = KIND_WORDS[self.kind].format(node=self.node, pod=self.pod, quota=self.quota)
        return f"{head}: {self.words}" if self.words else head


def attempts_of(stored: Any) -> list[Attempt]:
    """The attempts of a job's stored list, oldest first; what is not an attempt is skipped."""
    if not isinstance(stored, list):
        return []
    return [attempt for item in stored if (attempt := Attempt.from_json(item)) is not None]


def attempts_with(stored: Any, attempt: Attempt) -> list[dict[str, str]]:
    """The stored list with `attempt` added, the oldest dropped past ATTEMPTS_KEPT."""
    kept = [a.as_json() for a in attempts_of(stored)]
    return [*kept, attempt.as_json()][-ATTEMPTS_KEPT:]


def failures_of_kind(attempts: list[Attempt], kind: Kind) -> int:
    return sum(1 for attempt in attempts if attempt.kind == kind)


def job_retry_at(attempts: list[Attempt], settings: BackoffSettings) -> datetime | None:
    """When the job may be placed again after its job-level failures (None: it has none)."""
    job_level = [a for a in attempts if a.kind not in NODE_KINDS]
    if not job_level:
        return None
    return job_level[-1].at + settings.interval(len(job_level))


def in_backoff(attempts: list[Attempt], settings: BackoffSettings, now: datetime) -> bool:
    retry_at = job_retry_at(attempts, settings)
    return retry_at is not None and retry_at > now


def nodes_avoided(
    attempts: list[Attempt], settings: BackoffSettings, now: datetime
) -> dict[str, datetime]:
    """node -> until when the job avoids it, for each node still in its backoff."""
    refusals: Counter[str] = Counter()
    last: dict[str, datetime] = {}
    for attempt in attempts:
        if attempt.kind in NODE_KINDS and attempt.node:
            refusals[attempt.node] += 1
            last[attempt.node] = attempt.at
    until = {node: last[node] + settings.interval(count) for node, count in refusals.items()}
    return {node: at for node, at in sorted(until.items()) if at > now}


def cap_of(max_retry: int) -> int:
    """How many failures of one kind a job may have: its maxRetry, at least one."""
    return max(1, max_retry)


def capped(attempts: list[Attempt], kind: Kind, max_retry: int) -> bool:
    """Whether the failures of `kind` so far end the job."""
    return kind not in UNCAPPED and failures_of_kind(attempts, kind) >= cap_of(max_retry)


def clock_text(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%H:%M:%S UTC")


def waiting_reason(attempts: list[Attempt], settings: BackoffSettings, max_retry: int) -> str:
    """The reason of a job whose last start attempt failed: what happened, when the next try
    is, and how many of its failures of that kind it may still have."""
    last = attempts[-1]
    if last.kind in NODE_KINDS:
        until = nodes_avoided(attempts, settings, last.at).get(last.node, last.at)
        retry = RETRY_NODE.format(node=last.node, at=clock_text(until))
    else:
        retry = RETRY_JOB.format(at=clock_text(job_retry_at(attempts, settings) or last.at))
    if last.kind in UNCAPPED:
        return f"{last.cause()} ({retry})"
    count = FAILURE_COUNT.format(count=failures_of_kind(attempts, last.kind), cap=cap_of(max_retry))
    return f"{last.cause()} ({retry}; {count})"


def failed_reason(attempts: list[Attempt], max_retry: int) -> str:
    last = attempts[-1]
    words = CAPPED.format(count=failures_of_kind(attempts, last.kind), cap=cap_of(max_retry))
    return f"{last.cause()}; {words}"


def waiting_kind(reason: str | None) -> Kind | None:
    """The kind of a container's waiting reason that no wait will cure, or None."""
    if reason in IMAGE_PULL_REASONS:
        return Kind.IMAGE_PULL
    if reason in CONTAINER_REASONS:
        return Kind.CONTAINER
    return None


def quota_exceeded(status: int, message: str) -> str | None:
    """The ResourceQuota's name when an API refusal is a quota's, else None."""
    if status != 403:
        return None
    match = _QUOTA.search(message)
    return match.group(1) if match else None

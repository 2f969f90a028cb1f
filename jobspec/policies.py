"""Volcano job lifecycle policies: what the portal does when a job's pod fails, is evicted,
vanishes, or a task completes. Pure.

Follows upstream volcano-sh/volcano pkg/controllers/job/job_controller_util.go applyPolicies
(:182-284): a task's own policies first, then the job's; a policy matches when its `event` (or
one of its `events`, or `*`) is the event, or its `exitCode` is the failed container's exit
code; no match is the default. A policy's `timeout` delays its action by that long
(job_controller.go:374-383 and AddDelayActionForJob :461-509). `maxRetry` (default 3, as
upstream's admission webhook sets it) bounds the restarts. A list of policies is refused as
upstream's webhook refuses it (pkg/webhooks/admission/jobs/validate/util.go validatePolicies):
an event in two policies, an exit code twice, `*` beside another event.

Where the portal departs from upstream, and why:
- Actions are carried out by the one job state machine (portal.jobs.services transitions,
  applied in bulk by scheduler.adapters.observe): RestartJob and RestartTask requeue the whole
  job (its pods are released and placed again as a gang: restarting one task of a running gang
  would leave the others waiting on a peer that moved); RestartPod replaces the one pod, as
  upstream (its replica is placed again while the job's other pods run on); AbortJob and
  TerminateJob fail it (upstream's Aborted state can be resumed with a command the portal does
  not have); CompleteJob ends it as succeeded.
- Events: PodFailed (a pod ended in Failed), PodEvicted (failed with reason Evicted, or deleted
  under the job by someone else), TaskCompleted (every pod of a task succeeded), OutOfSync (a
  running pod disappeared: upstream raises it when a pod is added or deleted behind the
  controller, and keeps it for itself). Without a matching policy the portal keeps its
  behaviour: a failed pod fails the job, a vanished pod requeues it. Upstream's other events are
  refused naming the field, each with the reason in `REFUSED_EVENTS`; so are RestartPartition and
  ResumeJob (`REFUSED_ACTIONS`).
- A delayed action runs at the first scheduling cycle after its time, and is dropped when the
  job leaves the run it was raised in (it ends, is restarted or preempted) before then.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

POD_FAILED, POD_EVICTED, TASK_COMPLETED, OUT_OF_SYNC, ANY = (
    "PodFailed",
    "PodEvicted",
    "TaskCompleted",
    "OutOfSync",
    "*",
)
EVENTS = (POD_FAILED, POD_EVICTED, TASK_COMPLETED, OUT_OF_SYNC, ANY)
# Upstream's events the portal never raises (bus/v1alpha1/events.go), and why.
REFUSED_EVENTS = {
    "PodPending": (
        "the portal creates a job's pods only once its gang is placed; a pod that then does "
        "not start is released after KUBERNETES_POD_START_TIMEOUT_SECONDS and the job requeued"
    ),
    "Unknown": "the portal binds a gang's pods only once min_available of them are placed, so "
    "part of a gang never runs while the rest cannot be scheduled",
    "TaskFailed": "not raised by the portal: a failed pod raises PodFailed",
    "JobUpdated": "a job is not updated after it is submitted",
    "PodRunning": "upstream keeps this event for itself",
    "CommandIssued": "upstream keeps this event for itself",
}
RESTART_JOB, RESTART_TASK, RESTART_POD, ABORT_JOB, COMPLETE_JOB, TERMINATE_JOB = (
    "RestartJob",
    "RestartTask",
    "RestartPod",
    "AbortJob",
    "CompleteJob",
    "TerminateJob",
)
ACTIONS = (RESTART_JOB, RESTART_TASK, RESTART_POD, ABORT_JOB, COMPLETE_JOB, TERMINATE_JOB)
REFUSED_ACTIONS = {
    "RestartPartition": "the portal has no task partitions (partitionPolicy)",
    "ResumeJob": "the portal has no aborted state to resume: AbortJob fails the job",
}
# Actions that requeue the whole job; RestartPod replaces one pod.
RESTARTS = frozenset({RESTART_JOB, RESTART_TASK})
RETRIED = RESTARTS | {RESTART_POD}  # each counts against maxRetry
DEFAULT_MAX_RETRY = 3  # upstream webhooks/admission/jobs/mutate: DefaultMaxRetry
POLICIES_MAX = 32
TIMEOUT_MAX_SECONDS = 7 * 86400
TIMEOUT_KEY = "timeoutSeconds"  # the stored form of `timeout`

NOT_A_LIST = "must be a list of policies"
NOT_A_MAPPING = "must be a mapping (event or events, action, exitCode, timeout)"
UNKNOWN_FIELD = "unknown field; a policy has: event, events, action, exitCode, timeout"
BAD_EVENT = "unknown event {event!r}; the portal raises: " + ", ".join(EVENTS)
REFUSED_EVENT = "event {event} is not supported by the portal: {why}"
BAD_ACTION = "unknown action {action!r}; the portal takes: " + ", ".join(ACTIONS)
REFUSED_ACTION = "action {action} is not supported by the portal: {why}"
NO_ACTION = "a policy needs an action"
EVENT_XOR_EXIT = "give an event (or events) or an exitCode, not both"
NO_TRIGGER = "a policy needs an event, events or an exitCode"
BAD_EXIT_CODE = "exitCode must be a non-zero integer between -255 and 255"
DUPLICATE_EVENT = "event {event} is in another policy of this list already"
DUPLICATE_EXIT_CODE = "exitCode {code} is in another policy of this list already"
ANY_NOT_ALONE = "a policy for every event (*) must be the only event of the list"
BAD_TIMEOUT = (
    "must be a duration such as 90s, 10m or 1h30m (Go's time.ParseDuration), "
    f"at most {TIMEOUT_MAX_SECONDS // 86400} days"
)
TOO_MANY = f"at most {POLICIES_MAX} policies"

# Go's time.ParseDuration: a sequence of decimal numbers, each with a unit.
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "µs": Decimal("1e-6"),
    "μs": Decimal("1e-6"),
    "ms": Decimal("0.001"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
}


def duration_seconds(raw: Any) -> int | None:
    """A Go duration string (metav1.Duration's JSON form) as whole seconds, rounded up so that a
    delay is never shorter than asked; None if it is not one or is negative. "0" is 0."""
    if not isinstance(raw, str) or len(raw) > 64:
        return None
    text = raw.strip()
    if text == "0":
        return 0
    position, total = 0, Decimal(0)
    while position < len(text):
        match = _DURATION_PART.match(text, position)
        if match is None:
            return None
        try:
            total += Decimal(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        except InvalidOperation:
            return None
        position = match.end()
    if position == 0:
        return None
    return int(total.to_integral_value(rounding=ROUND_CEILING))


def policies_parse(raw: Any, *, path: str) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Check a `policies` list; (the normalised list, errors keyed by path). A policy is stored
    as `{action, events | exitCode[, timeoutSeconds]}`."""
    errors: dict[str, list[str]] = {}
    if raw is None:
        return [], errors
    if not isinstance(raw, list):
        return [], {path: [NOT_A_LIST]}
    if len(raw) > POLICIES_MAX:
        return [], {path: [TOO_MANY]}
    result = []
    for index, item in enumerate(raw):
        ipath = f"{path}[{index}]"
        if not isinstance(item, dict):
            errors.setdefault(ipath, []).append(NOT_A_MAPPING)
            continue
        policy, item_errors = _policy(item, ipath)
        for key, messages in item_errors.items():
            errors.setdefault(key, []).extend(messages)
        if policy is not None:
            result.append((ipath, policy))
    for key, message in _duplicates(result):
        errors.setdefault(key, []).append(message)
    return ([policy for _, policy in result] if not errors else []), errors


def _duplicates(policies: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str]]:
    """validatePolicies' rules across one list: each event and each exit code in one policy at
    most, and `*` alone."""
    found: list[tuple[str, str]] = []
    events: set[str] = set()
    codes: set[int] = set()
    for path, policy in policies:
        for event in policy.get("events", ()):
            if event in events:
                found.append((f"{path}.event", DUPLICATE_EVENT.format(event=event)))
            events.add(event)
        code = policy.get("exitCode")
        if code is not None:
            if code in codes:
                found.append((f"{path}.exitCode", DUPLICATE_EXIT_CODE.format(code=code)))
            codes.add(code)
    if ANY in events and len(events) > 1:
        found.append((policies[0][0].rsplit("[", 1)[0], ANY_NOT_ALONE))
    return found


def _policy(item: dict[str, Any], path: str) -> tuple[dict[str, Any] | None, dict[str, list[str]]]:
    errors: dict[str, list[str]] = {}

    def add(key: str, message: str) -> None:
        errors.setdefault(key, []).append(message)

    for key in item:
        if key not in ("event", "events", "action", "exitCode", "timeout"):
            add(f"{path}.{key}", UNKNOWN_FIELD)
    events = _events(item, path, add)
    exit_code = item.get("exitCode")
    if exit_code is not None and (
        isinstance(exit_code, bool)
        or not isinstance(exit_code, int)
        or exit_code == 0
        or not -255 <= exit_code <= 255
    ):
        add(f"{path}.exitCode", BAD_EXIT_CODE)
    if events and exit_code is not None:
        add(path, EVENT_XOR_EXIT)
    if not events and exit_code is None and f"{path}.event" not in errors:
        add(path, NO_TRIGGER)
    action = item.get("action")
    if message := _action_error(action):
        add(f"{path}.action", message)
    timeout = None
    if item.get("timeout") is not None:
        timeout = duration_seconds(item["timeout"])
        if timeout is None or timeout > TIMEOUT_MAX_SECONDS:
            add(f"{path}.timeout", BAD_TIMEOUT)
    if errors:
        return None, errors
    policy: dict[str, Any] = {"action": action}
    if events:
        policy["events"] = sorted(set(events), key=EVENTS.index)
    if exit_code is not None:
        policy["exitCode"] = exit_code
    if timeout:  # a zero delay is no delay (job_controller.go:376)
        policy[TIMEOUT_KEY] = timeout
    return policy, errors


def _action_error(action: Any) -> str | None:
    if action is None:
        return NO_ACTION
    if isinstance(action, str) and action in REFUSED_ACTIONS:
        return REFUSED_ACTION.format(action=action, why=REFUSED_ACTIONS[action])
    if action not in ACTIONS:
        return BAD_ACTION.format(action=str(action)[:40])
    return None


def _events(item: dict[str, Any], path: str, add: Any) -> list[str]:
    events: list[Any] = []
    if item.get("event") is not None:
        events.append(item["event"])
    if item.get("events") is not None:
        if isinstance(item["events"], list):
            events += item["events"]
        else:
            # As upstream's CRD schema (config/crd/volcano/bases/batch.volcano.sh_jobs.yaml:
            # events is an array), whose API server refuses a single string here.
            add(f"{path}.events", "must be a list of events")
    for event in events:
        if isinstance(event, str) and event in REFUSED_EVENTS:
            add(f"{path}.event", REFUSED_EVENT.format(event=event, why=REFUSED_EVENTS[event]))
        elif event not in EVENTS:
            add(f"{path}.event", BAD_EVENT.format(event=str(event)[:40]))
    return [event for event in events if event in EVENTS]


@dataclass(frozen=True)
class PolicyMatch:
    """The action a policy takes for an event, and after how long (0: at once)."""

    action: str
    delay_seconds: int = 0


def policy_match(
    *,
    event: str,
    exit_code: int | None,
    task_policies: Sequence[Mapping[str, Any]],
    job_policies: Sequence[Mapping[str, Any]],
) -> PolicyMatch | None:
    """The policy for `event` (applyPolicies: the task's policies, then the job's), or None."""
    for policies in (task_policies, job_policies):
        for policy in policies:
            events = policy.get("events") or []
            matched = event in events or ANY in events
            if matched or (exit_code is not None and policy.get("exitCode") == exit_code):
                return PolicyMatch(policy["action"], policy.get(TIMEOUT_KEY) or 0)
    return None

"""Volcano job lifecycle policies: what the portal does when a job's pod fails, is evicted,
vanishes, or a task completes. Pure.

Follows upstream volcano-sh/volcano pkg/controllers/job/job_controller_util.go applyPolicies
(:182-290): a task's own policies first, then the job's; a policy matches when its `event` (or
one of its `events`, or `*`) is the event, or its `exitCode` is the failed container's exit
code; no match is the default. `maxRetry` (default 3, as upstream's admission webhook sets it)
bounds the restarts.

Where the portal departs from upstream, and why:
- Actions are carried out by the one job state machine (portal.jobs.services transitions,
  applied in bulk by scheduler.adapters.observe): RestartJob and RestartTask requeue the whole
  job (its pods are released and placed again as a gang: restarting one task of a running gang
  would leave the others waiting on a peer that moved); AbortJob and TerminateJob fail it
  (upstream's Aborted state can be resumed with a command the portal does not have); CompleteJob
  ends it as succeeded.
- Events: PodFailed (a pod ended in Failed), PodEvicted (failed with reason Evicted, or deleted
  under the job by someone else), TaskCompleted (every pod of a task succeeded), OutOfSync (a
  running pod disappeared: upstream raises it when a pod is added or deleted behind the
  controller). Without a matching policy the portal keeps its behaviour: a failed pod fails the
  job, a vanished pod requeues it.
- `timeout` (delayed actions) is refused naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

POD_FAILED, POD_EVICTED, TASK_COMPLETED, OUT_OF_SYNC, ANY = (
    "PodFailed",
    "PodEvicted",
    "TaskCompleted",
    "OutOfSync",
    "*",
)
EVENTS = (POD_FAILED, POD_EVICTED, TASK_COMPLETED, OUT_OF_SYNC, ANY)
RESTART_JOB, RESTART_TASK, ABORT_JOB, COMPLETE_JOB, TERMINATE_JOB = (
    "RestartJob",
    "RestartTask",
    "AbortJob",
    "CompleteJob",
    "TerminateJob",
)
ACTIONS = (RESTART_JOB, RESTART_TASK, ABORT_JOB, COMPLETE_JOB, TERMINATE_JOB)
RESTARTS = frozenset({RESTART_JOB, RESTART_TASK})
DEFAULT_MAX_RETRY = 3  # upstream webhooks/admission/jobs/mutate: DefaultMaxRetry
POLICIES_MAX = 32

NOT_A_LIST = "must be a list of policies"
NOT_A_MAPPING = "must be a mapping (event or events, action, exitCode)"
UNKNOWN_FIELD = "unknown field; a policy has: event, events, action, exitCode"
BAD_EVENT = "unknown event {event!r}; the portal raises: " + ", ".join(EVENTS)
BAD_ACTION = "unknown action {action!r}; the portal takes: " + ", ".join(ACTIONS)
NO_ACTION = "a policy needs an action"
EVENT_XOR_EXIT = "give an event (or events) or an exitCode, not both"
NO_TRIGGER = "a policy needs an event, events or an exitCode"
BAD_EXIT_CODE = "exitCode must be a non-zero integer between -255 and 255"
TIMEOUT_UNSUPPORTED = "delayed actions (timeout) are not supported by the portal"
TOO_MANY = f"at most {POLICIES_MAX} policies"


def policies_parse(raw: Any, *, path: str) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Check a `policies` list; (the normalised list, errors keyed by path)."""
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
            result.append(policy)
    return (result if not errors else []), errors


def _policy(item: dict[str, Any], path: str) -> tuple[dict[str, Any] | None, dict[str, list[str]]]:
    errors: dict[str, list[str]] = {}

    def add(key: str, message: str) -> None:
        errors.setdefault(key, []).append(message)

    for key in item:
        if key == "timeout":
            add(f"{path}.timeout", TIMEOUT_UNSUPPORTED)
        elif key not in ("event", "events", "action", "exitCode"):
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
    if not events and exit_code is None:
        add(path, NO_TRIGGER)
    action = item.get("action")
    if action is None:
        add(f"{path}.action", NO_ACTION)
    elif action not in ACTIONS:
        add(f"{path}.action", BAD_ACTION.format(action=str(action)[:40]))
    if errors:
        return None, errors
    policy: dict[str, Any] = {"action": action}
    if events:
        policy["events"] = sorted(set(events), key=EVENTS.index)
    if exit_code is not None:
        policy["exitCode"] = exit_code
    return policy, errors


def _events(item: dict[str, Any], path: str, add: Any) -> list[str]:
    events: list[Any] = []
    if item.get("event") is not None:
        events.append(item["event"])
    if item.get("events") is not None:
        if isinstance(item["events"], list):
            events += item["events"]
        else:
            add(f"{path}.events", "must be a list of events")
    for event in events:
        if event not in EVENTS:
            add(f"{path}.event", BAD_EVENT.format(event=str(event)[:40]))
    return [event for event in events if event in EVENTS]


def policy_action(
    *,
    event: str,
    exit_code: int | None,
    task_policies: Sequence[Mapping[str, Any]],
    job_policies: Sequence[Mapping[str, Any]],
) -> str | None:
    """The action for `event` (applyPolicies: the task's policies, then the job's), or None."""
    for policies in (task_policies, job_policies):
        for policy in policies:
            events = policy.get("events") or []
            if event in events or ANY in events:
                return policy["action"]
            if exit_code is not None and policy.get("exitCode") == exit_code:
                return policy["action"]
    return None

"""jobspec.policies: Volcano's lifecycle policies, parsed and matched (pure); what the portal
cannot carry out is refused naming the field."""

import pytest

from jobspec.policies import policies_parse, policy_action


def test_task_policies_come_before_the_jobs_like_apply_policies():
    task = [{"events": ["PodFailed"], "action": "RestartTask"}]
    job = [{"events": ["*"], "action": "AbortJob"}]
    assert (
        policy_action(event="PodFailed", exit_code=1, task_policies=task, job_policies=job)
        == "RestartTask"
    )
    assert (
        policy_action(event="PodEvicted", exit_code=None, task_policies=task, job_policies=job)
        == "AbortJob"
    )
    assert (
        policy_action(event="PodEvicted", exit_code=None, task_policies=[], job_policies=[]) is None
    )


def test_an_exit_code_policy_matches_its_code():
    policies = [{"exitCode": 137, "action": "RestartJob"}]
    assert (
        policy_action(event="PodFailed", exit_code=137, task_policies=[], job_policies=policies)
        == "RestartJob"
    )
    assert (
        policy_action(event="PodFailed", exit_code=1, task_policies=[], job_policies=policies)
        is None
    )


def test_event_and_events_are_normalised():
    parsed, errors = policies_parse(
        [{"event": "PodEvicted", "events": ["PodFailed"], "action": "RestartJob"}], path="policies"
    )
    assert errors == {}
    assert parsed == [{"action": "RestartJob", "events": ["PodFailed", "PodEvicted"]}]


@pytest.mark.parametrize(
    ("raw", "path", "message"),
    [
        ([{"event": "PodPending", "action": "RestartJob"}], "policies[0].event", "unknown event"),
        ([{"event": "PodFailed", "action": "RestartPod"}], "policies[0].action", "unknown action"),
        ([{"event": "PodFailed"}], "policies[0].action", "needs an action"),
        (
            [{"event": "PodFailed", "action": "RestartJob", "timeout": "10m"}],
            "policies[0].timeout",
            "not supported",
        ),
        ([{"exitCode": 0, "action": "RestartJob"}], "policies[0].exitCode", "non-zero"),
        ([{"action": "RestartJob"}], "policies[0]", "needs an event"),
        ({"event": "PodFailed"}, "policies", "list"),
    ],  # fmt: skip
)
def test_what_the_portal_cannot_carry_out_is_refused_naming_the_field(raw, path, message):
    parsed, errors = policies_parse(raw, path="policies")
    assert parsed == []
    assert any(message in text for text in errors[path]), errors

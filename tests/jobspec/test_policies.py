"""jobspec.policies: Volcano's lifecycle policies, parsed and matched (pure); what the portal
cannot carry out is refused naming the field."""

import pytest

from jobspec.policies import PolicyMatch, duration_seconds, policies_parse, policy_match


def policy_action(**kwargs):
    match = policy_match(**kwargs)
    return match.action if match is not None else None


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
        (
            [{"event": "PodPending", "action": "RestartJob"}],
            "policies[0].event",
            "POD_START_TIMEOUT",
        ),
        ([{"event": "Unknown", "action": "RestartJob"}], "policies[0].event", "not supported"),
        ([{"event": "PodFaild", "action": "RestartJob"}], "policies[0].event", "unknown event"),
        (
            [{"event": "PodFailed", "action": "RestartPartition"}],
            "policies[0].action",
            "no task partitions",
        ),
        ([{"event": "PodFailed", "action": "Reboot"}], "policies[0].action", "unknown action"),
        # upstream's controller's own commands, which its webhook refuses in a policy too
        ([{"event": "PodFailed", "action": "SyncJob"}], "policies[0].action", "unknown action"),
        ([{"event": "PodFailed", "action": "CloseQueue"}], "policies[0].action", "unknown action"),
        ([{"event": "PodFailed"}], "policies[0].action", "needs an action"),
        (
            [{"event": "PodFailed", "action": "RestartJob", "timeout": "10 minutes"}],
            "policies[0].timeout",
            "duration",
        ),
        (
            [{"event": "PodFailed", "action": "RestartJob", "timeout": "8d"}],
            "policies[0].timeout",
            "duration",
        ),
        (
            [{"event": "PodFailed", "action": "RestartJob", "timeout": "-1m"}],
            "policies[0].timeout",
            "duration",
        ),
        ([{"events": "PodFailed", "action": "RestartPod"}], "policies[0].events", "list"),
        ([{"exitCode": 0, "action": "RestartJob"}], "policies[0].exitCode", "non-zero"),
        ([{"action": "RestartJob"}], "policies[0]", "needs an event"),
        ({"event": "PodFailed"}, "policies", "list"),
    ],  # fmt: skip
)
def test_what_the_portal_cannot_carry_out_is_refused_naming_the_field(raw, path, message):
    parsed, errors = policies_parse(raw, path="policies")
    assert parsed == []
    assert any(message in text for text in errors[path]), errors


def test_restart_pod_and_a_delay_are_kept():
    parsed, errors = policies_parse(
        [
            {"events": ["PodFailed"], "action": "RestartPod"},
            {"event": "PodEvicted", "action": "RestartJob", "timeout": "10m"},
            {"exitCode": 3, "action": "AbortJob", "timeout": "1h30m"},
        ],
        path="policies",
    )
    assert errors == {}
    assert parsed == [
        {"action": "RestartPod", "events": ["PodFailed"]},
        {"action": "RestartJob", "events": ["PodEvicted"], "timeoutSeconds": 600},
        {"action": "AbortJob", "exitCode": 3, "timeoutSeconds": 5400},
    ]
    match = policy_match(event="PodEvicted", exit_code=None, task_policies=[], job_policies=parsed)
    assert match == PolicyMatch("RestartJob", 600)
    assert policy_match(
        event="PodFailed", exit_code=3, task_policies=parsed[2:], job_policies=[]
    ) == PolicyMatch("AbortJob", 5400)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10m", 600), ("1h30m", 5400), ("1.5h", 5400), ("90s", 90), ("300ms", 1), ("0", 0),
     ("0s", 0), (".5s", 1), ("1d", None), ("m", None), ("", None), ("-5s", None), (600, None)],
)  # fmt: skip
def test_durations_read_as_go_reads_them_rounded_up_to_seconds(text, seconds):
    assert duration_seconds(text) == seconds


def test_a_zero_timeout_is_no_delay():
    parsed, _ = policies_parse([{"event": "PodFailed", "action": "RestartJob", "timeout": "0s"}],
                               path="p")  # fmt: skip
    assert parsed == [{"action": "RestartJob", "events": ["PodFailed"]}]


@pytest.mark.parametrize(
    ("raw", "path", "message"),
    [
        # example/invalid_jobs/duplicatedPolicyEvent-webhook-deny.yaml
        ([{"event": "PodFailed", "action": "RestartJob"},
          {"event": "PodFailed", "action": "AbortJob"}], "p[1].event",
         "event PodFailed is in another policy"),
        ([{"exitCode": 2, "action": "RestartJob"}, {"exitCode": 2, "action": "AbortJob"}],
         "p[1].exitCode", "exitCode 2 is in another policy"),
        ([{"event": "*", "action": "RestartJob"}, {"event": "PodFailed", "action": "AbortJob"}],
         "p", "must be the only event"),
    ],
)  # fmt: skip
def test_a_list_is_refused_as_upstreams_webhook_refuses_it(raw, path, message):
    parsed, errors = policies_parse(raw, path="p")
    assert parsed == []
    assert any(message in text for text in errors[path]), errors


def test_the_same_event_in_a_task_and_in_the_job_is_allowed():
    """validatePolicies checks each list on its own: the task's policy overrides the job's."""
    for raw in ([{"event": "PodFailed", "action": "RestartPod"}],
                [{"event": "PodFailed", "action": "AbortJob"}]):  # fmt: skip
        assert policies_parse(raw, path="p")[1] == {}

"""portal.jobs.limits: the one set of job limits, read from settings, and their messages."""

import shlex

import pytest
from django.test import override_settings

from jobspec.limits import (
    PENDING_PODS_EXCEEDED,
    SETTINGS,
    command_line_error,
    command_line_max,
    exceeded,
    job_limit_errors,
    pending_pods_error,
    shown,
    task_limit_errors,
)
from portal.jobs.limits import job_limits
from portal.jobs.models import JobTask


def test_every_limit_comes_from_its_setting_at_call_time():
    overrides = {setting: 7 + index for index, (setting, _) in enumerate(SETTINGS.values())}
    with override_settings(**overrides):
        limits = job_limits()
    for index, name in enumerate(SETTINGS):
        assert getattr(limits, name) == 7 + index, name


@override_settings(JOB_MAX_GPUS_PER_POD=8)
def test_a_message_names_the_limit_its_setting_and_the_number_asked():
    assert exceeded(job_limits(), "gpus_per_pod", 5000) == (
        "at most 8 GPUs per pod (JOB_MAX_GPUS_PER_POD); this asks for 5000"
    )


def test_astronomical_numbers_are_summarised_not_printed():
    assert shown(2**64) == str(2**64)
    assert shown(2**64 + 1) == "more than 2^64"
    assert shown(10**5000) == "more than 2^64"  # str() of it would raise


@override_settings(
    JOB_MAX_REPLICAS_PER_TASK=4,
    JOB_MAX_GPUS_PER_POD=8,
    JOB_MAX_CPU_MILLIS_PER_POD=1000,
    JOB_MAX_MEMORY_BYTES_PER_POD=1024,
    JOB_MAX_COMMAND_ITEMS=2,
    JOB_MAX_COMMAND_CHARS=10,
    JOB_MAX_ENV_VARS=1,
    JOB_MAX_ENV_CHARS=4,
)
def test_each_task_limit_is_reported_under_its_field():
    task = JobTask(
        replicas=5,
        gpus=9,
        cpu_millis=1001,
        memory_bytes=1025,
        command=["a", "b", "c"],
        env={"AB": "CDE"},
        node_selector={"k" * 318: "v" * 64},
    )
    errors = task_limit_errors(task, limits=job_limits(), prefix="tasks[2].")
    assert errors == {
        "tasks[2].replicas": [
            "at most 4 replicas per task (JOB_MAX_REPLICAS_PER_TASK); this asks for 5"
        ],
        "tasks[2].gpus": ["at most 8 GPUs per pod (JOB_MAX_GPUS_PER_POD); this asks for 9"],
        "tasks[2].cpu_millis": [
            "at most 1 core of CPU per pod (JOB_MAX_CPU_MILLIS_PER_POD); this asks for 1.001 cores"
        ],
        "tasks[2].memory_bytes": [
            "at most 0 GiB (1024 bytes) of memory per pod (JOB_MAX_MEMORY_BYTES_PER_POD); "
            "this asks for 1025 bytes"
        ],
        "tasks[2].command": [
            "at most 2 command and argument items (JOB_MAX_COMMAND_ITEMS); this asks for 3"
        ],
        "tasks[2].env": [
            "at most 4 characters of environment names and values (JOB_MAX_ENV_CHARS); "
            "this asks for 5"
        ],
        "tasks[2].node_selector": [
            "at most 317 characters in a label key (fixed); this asks for 318",
            "at most 63 characters in a label value (fixed); this asks for 64",
        ],
    }


def test_values_of_the_wrong_type_are_left_to_the_model():
    task = JobTask(replicas="many", gpus=True, command="python", env=["A=1"], node_selector=None)
    assert task_limit_errors(task, limits=job_limits(), prefix="") == {}


@override_settings(JOB_MAX_REPLICAS_PER_JOB=10)
def test_job_limits_count_replicas_in_all_and_bound_priority_and_duration():
    errors = job_limit_errors(
        replicas=[6, 5, "x"], priority=-(10**9) - 1, expected_duration_seconds=10**8 + 1,
        limits=job_limits(),
    )  # fmt: skip
    assert errors == {
        "tasks": ["at most 10 replicas per job (JOB_MAX_REPLICAS_PER_JOB); this asks for 11"],
        "priority": ["at least -1000000000 for priority (fixed); this asks for -1000000001"],
        "expected_duration_seconds": [
            "at most 100000000 seconds of expected duration (fixed); this asks for 100000001"
        ],
    }
    assert (
        job_limit_errors(
            replicas=[10], priority=10**9, expected_duration_seconds=None, limits=job_limits()
        )
        == {}
    )


@override_settings(JOB_MAX_PENDING_PODS_PER_TENANT=100)
@pytest.mark.parametrize(("pending", "adding", "refused"), [(90, 10, False), (90, 11, True)])
def test_pending_pods_cap_names_the_numbers(pending, adding, refused):
    message = pending_pods_error(tenant="nlp", pending=pending, adding=adding, limits=job_limits())
    if not refused:
        assert message is None
    else:
        assert message == PENDING_PODS_EXCEEDED.format(
            tenant="nlp", limit=100, pending=pending, adding=adding
        )
        assert "at most 100 pods" in message
        assert "it has 90 and this job adds 11" in message


@override_settings(JOB_MAX_COMMAND_CHARS=10, JOB_MAX_COMMAND_ITEMS=2)
def test_a_command_line_longer_than_any_command_within_the_limits_needs_is_refused():
    limits = job_limits()
    assert command_line_max(limits) == 46
    # Every character escaped: two items of five quotes each, 21 characters.
    worst = " ".join(["\\'" * 5] * 2)
    assert shlex.split(worst) == ["'" * 5, "'" * 5]
    assert command_line_error(length=len(worst), limits=limits) is None
    assert command_line_error(length=47, limits=limits) == (
        "a command line of 47 characters is longer than any command within the limits needs "
        "(at most 46, from JOB_MAX_COMMAND_CHARS and JOB_MAX_COMMAND_ITEMS)"
    )

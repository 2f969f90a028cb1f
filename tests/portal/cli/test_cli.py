"""The CLI against a live server (real HTTP, real token)."""

import ast
import io
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from portal.cli.main import main
from portal.jobs.models import Job, StartEstimate
from portal.queues.services import queue_orders_record
from tests.factories import (
    JobFactory,
    JobTaskFactory,
    PlacementFactory,
    PreemptionEventFactory,
    QueueUsageSampleFactory,
    api_token_secret,
)
from tests.portal.jobs import over_limit

CLI_DIR = Path(__file__).resolve().parents[3] / "portal" / "cli"

MANIFEST = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: from-file}
spec:
  queue: nlp-train
  tasks:
    - name: worker
      replicas: 2
      template:
        spec:
          containers:
            - image: trainer:1
              resources: {limits: {nvidia.com/gpu: 4, cpu: "8", memory: 32Gi}}
"""


@pytest.fixture
def gpuq(transactional_db, live_server, researcher, monkeypatch):
    """`gpuq(*args)` -> (exit code, stdout, stderr), as the researcher."""
    monkeypatch.setattr("portal.jobs.services.cycle_kick", lambda: None)
    token = api_token_secret(researcher)

    def run(*args: str, token: str | None = token):
        out, err = io.StringIO(), io.StringIO()
        argv = ["--url", live_server.url, *(["--token", token] if token else []), *args]
        code = main(argv, out=out, err=err)
        return code, out.getvalue(), err.getvalue()

    return run


def test_submit_from_flags_then_list_why_and_cancel(gpuq, nlp_queue, cluster):
    code, out, err = gpuq(
        "submit", "--queue", "nlp-train", "--name", "bert", "--replicas", "2", "--gpus", "4",
        "--cpu", "500m", "--memory", "16Gi", "--image", "trainer:1",
        "--command", "python train.py --lr 3e-4", "--min-available", "2", "--priority", "7",
        "--env", "A=1",
    )  # fmt: skip
    assert code == 0, err
    job = Job.objects.get(name="bert")
    assert out.strip() == f"job {job.pk} bert submitted to nlp-train: pending"
    task = job.tasks.get()
    assert (task.gpus, task.cpu_millis, task.memory_bytes, job.priority) == (4, 500, 16 * 2**30, 7)
    assert task.command == ["python", "train.py", "--lr", "3e-4"]
    assert task.env == {"A": "1"}

    code, out, _ = gpuq("jobs", "--queue", "nlp-train")
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["ID", "NAME", "QUEUE", "STATUS"]
    assert "bert" in lines[1]
    assert "pending" in lines[1]

    code, out, _ = gpuq("show", str(job.pk))
    assert code == 0
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("TASK"))
    header, row = lines[at].split(), lines[at + 1].split()
    assert header == ["TASK", "REPLICAS", "GPUS", "CPU", "MEMORY", "IMAGE"]
    assert row[3:5] == ["0.5", "16Gi"]  # as --cpu and --memory take them

    queue_orders_record(orders={nlp_queue.pk: [job.pk]}, at=job.submitted_at)  # as a cycle
    code, out, _ = gpuq("why", str(job.pk))
    assert code == 0
    assert "position 1 in queue nlp-train: next in line" in out

    code, out, _ = gpuq("--json", "cancel", str(job.pk))
    assert code == 0
    assert json.loads(out)["status"] == "cancelled"


def test_submit_from_a_manifest_file(gpuq, nlp_queue, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(MANIFEST)
    code, out, err = gpuq("--json", "submit", "-f", str(path))
    assert code == 0, err
    assert json.loads(out)["gpus"] == 8


def test_errors_name_fields_and_exit_1(gpuq, nlp_queue, vision_queue):
    code, _, err = gpuq(
        "submit", "--queue", "vision-train", "--name", "Bad_Name", "--image", "x", "--gpus", "2"
    )
    assert code == 1
    assert "spec.queue: no queue vision-train that you can see" in err


def test_over_limit_job_is_refused_with_the_messages_of_every_entry_point(gpuq, nlp_queue):
    """The job tests/portal/jobs/test_limits_entry_points.py drives through the other entry
    points, here from the flags."""
    code, _, err = gpuq(
        "submit", "--queue", "nlp-train", "--name", "huge", "--image", "trainer:1",
        "--replicas", str(over_limit.REPLICAS), "--gpus", str(over_limit.GPUS),
    )  # fmt: skip
    assert code == 1
    for path, messages in over_limit.manifest_errors().items():
        for message in messages:
            assert f"{path}: {message}" in err
    assert not Job.objects.exists()


def test_a_hostile_pod_template_is_refused_naming_the_field_and_the_level(
    gpuq, nlp_queue, tmp_path
):
    """The template tests/portal/jobs/test_cluster_policy_entry_points.py drives through the
    other entry points: root with SYS_ADMIN, tolerating every taint."""
    path = tmp_path / "evil.yaml"
    path.write_text(
        MANIFEST.replace(
            "            - image: trainer:1\n",
            "            - image: trainer:1\n"
            "              securityContext: {capabilities: {add: [SYS_ADMIN]}}\n",
        ).replace("        spec:\n", "        spec:\n          tolerations: [{operator: Exists}]\n")
    )
    code, _, err = gpuq("submit", "-f", str(path))
    assert code == 1
    template = "spec.tasks[0].template.spec."
    assert f"{template}containers[0].securityContext.capabilities.add: may not add SYS_ADMIN" in err
    assert "at pod security level baseline" in err
    assert f"{template}tolerations: [0] * (tolerates every taint" in err
    assert not Job.objects.exists()


def test_foreign_job_is_not_found(gpuq, vision_queue, outsider):
    job = JobFactory(queue=vision_queue, submitter=outsider)
    code, _, err = gpuq("cancel", str(job.pk))
    assert code == 1
    assert err.startswith("error (404)")
    assert Job.objects.get(pk=job.pk).status == Job.Status.PENDING


def test_why_counts_hidden_jobs(gpuq, nlp_queue, vision, researcher, lead):
    target = JobFactory(queue=nlp_queue, submitter=researcher, name="mine", priority=0)
    ahead = JobFactory(queue=nlp_queue, submitter=lead, name="ahead", priority=5)
    JobTaskFactory(job=ahead, replicas=2, gpus=8)
    secret = JobFactory(queue=nlp_queue, tenant=vision, name="secret", priority=9)
    line = [secret.pk, ahead.pk, target.pk]  # the line a cycle recorded
    queue_orders_record(orders={nlp_queue.pk: line}, at=target.submitted_at)
    code, out, _ = gpuq("why", str(target.pk))
    assert code == 0
    assert "position 3 in queue nlp-train: 2 jobs ahead" in out
    assert "ahead" in out
    assert "16" in out
    assert "plus 1 job of another tenant ahead" in out
    assert "job(s)" not in out
    assert "secret" not in out


def test_jobs_and_show_say_what_gpu_memory_was_asked(gpuq, nlp_queue, cluster, researcher):
    """As the pages: 10 GiB of an 80 GiB card is 0.125 of it, not "0"."""
    job = JobFactory(queue=nlp_queue, submitter=researcher, name="embed")
    JobTaskFactory(job=job, name="server", replicas=2, gpus=0, gpu_memory_mib=10240)
    code, out, _ = gpuq("jobs")
    assert code == 0
    (row,) = out.splitlines()[1:]
    assert "0.25 (20 GiB GPU memory)" in row
    code, out, _ = gpuq("show", str(job.pk))
    assert "0.125 (10 GiB GPU memory)" in out.splitlines()[2]  # the server's row


def test_tenants_show_quota_and_use(gpuq, nlp, nlp_queue, vision_queue):
    nlp.guarantee_gpus, nlp.capability_gpus = 12, 24
    nlp.save()
    nlp_queue.guarantee_gpus = 8
    nlp_queue.save()
    PlacementFactory(task=JobTaskFactory(job=JobFactory(queue=nlp_queue), gpus=3))
    code, out, _ = gpuq("tenants")
    assert code == 0
    header, row = out.splitlines()
    assert header.split() == [
        "ID", "TENANT", "ROLE", "WEIGHT", "GUARANTEE", "QUEUES-GUARANTEE", "CAPABILITY",
        "BORROW", "ALLOCATED", "DESERVED",
    ]  # fmt: skip
    assert row.split()[1:] == ["nlp", "researcher", "1", "12", "8", "24", "-", "3", "-"]


def test_why_prints_the_state_and_the_kind(gpuq, nlp_queue, researcher):
    reason = "can never run as submitted: queue nlp-train's capability is 24 GPUs"
    job = JobFactory(queue=nlp_queue, submitter=researcher, name="too-big", pending_kind="never")
    Job.objects.filter(pk=job.pk).update(pending_reason=reason)
    code, out, _ = gpuq("why", str(job.pk))
    assert code == 0
    assert out.splitlines()[:3] == [
        f"job {job.pk} too-big in nlp-train: Never runnable as submitted",
        "kind: never",
        f"reason: {reason}",
    ]
    assert "position" not in out


def test_why_prints_the_estimated_start(gpuq, nlp_queue, researcher):
    job = JobFactory(queue=nlp_queue, submitter=researcher, name="waits")
    computed = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    StartEstimate.objects.create(
        job=job,
        outlook="starts",
        earliest=computed + timedelta(hours=2, minutes=10),
        likely=None,
        latest=computed + timedelta(hours=3, minutes=30),
        until=computed + timedelta(days=7),
        computed_at=computed,
    )
    code, out, _ = gpuq("why", str(job.pk))
    assert code == 0
    assert "start: may start 14:10-15:30 UTC (estimated 2026-12-01 12:00:00 UTC)" in out


def test_why_prints_the_notice_of_pods_about_to_be_deleted(gpuq, nlp_queue, researcher):
    job = JobFactory(queue=nlp_queue, submitter=researcher, status=Job.Status.PREEMPTED)
    given = datetime(2026, 12, 1, 12, 0, 10, tzinfo=UTC)
    placement = PlacementFactory(
        task=JobTaskFactory(job=job),
        state="releasing",
        notice_given_at=given,
        notice_deadline=given + timedelta(minutes=5),
    )
    PreemptionEventFactory(victim_job=job, placement=placement)
    code, out, _ = gpuq("why", str(job.pk))
    assert code == 0
    assert (
        "notice: preempted: its pod is deleted at 12:05:10 UTC (told at 12:00:10 UTC); "
        "checkpoint and exit before then." in out
    )


def test_queues_show_shares(gpuq, nlp_queue, vision_queue):
    QueueUsageSampleFactory(queue=nlp_queue, gpus_allocated=1, gpus_deserved=12.5, gpus_pending=2)
    running = JobTaskFactory(job=JobFactory(queue=nlp_queue), gpus=6)
    PlacementFactory(task=running)  # allocated is read live: 6, not the sample's 1
    code, out, _ = gpuq("queues")
    assert code == 0
    header, row = out.splitlines()
    assert header.split() == [
        "ID", "QUEUE", "TENANT", "STATE", "WEIGHT", "PRIO", "GUARANTEE", "CAPABILITY",
        "BORROW", "ALLOCATED", "DESERVED", "PENDING",
    ]  # fmt: skip
    assert row.split()[1:] == [
        "nlp-train",
        "nlp",
        "open",
        "2",
        "0",
        "0",
        "-",
        "-",
        "6",
        "12.5",
        "2",
    ]
    assert "vision-train" not in out


def test_bad_token_and_missing_token(gpuq):
    code, _, err = gpuq("jobs", token="wrong")
    assert code == 1
    assert "error (401)" in err
    code, _, err = gpuq("jobs", token=None)
    assert code == 2
    assert "GPUQ_TOKEN" in err


def test_unreachable_server_exits_3(monkeypatch):
    out, err = io.StringIO(), io.StringIO()
    code = main(["--url", "http://127.0.0.1:9", "--token", "t", "jobs"], out=out, err=err)
    assert code == 3
    assert "cannot reach" in err.getvalue()


def test_cli_modules_import_no_django():
    for path in CLI_DIR.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert not name.startswith(
                    ("django", "rest_framework", "portal.")
                ) or name.startswith("portal.cli"), (path.name, name)


def test_python_m_portal_cli_help_runs():
    result = subprocess.run(
        [sys.executable, "-m", "portal.cli", "--help"],
        capture_output=True,
        text=True,
        check=False,
        cwd=CLI_DIR.parents[1],
    )
    assert result.returncode == 0
    assert "submit" in result.stdout


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--json", "jobs", "--mine"], True),
        (["jobs", "--mine", "--json"], True),
        (["--json", "why", "1", "--json"], True),
        (["jobs", "--mine"], False),
        (["queues", "--json"], True),
    ],
)
def test_json_is_accepted_before_or_after_the_command(argv, expected):
    from portal.cli.main import build_parser

    assert build_parser().parse_args(argv).json is expected


def test_json_after_the_command_prints_json(gpuq, nlp_queue, researcher):
    JobTaskFactory(job=JobFactory(queue=nlp_queue, name="listed", submitter=researcher), gpus=1)
    code, out, err = gpuq("jobs", "--mine", "--json")
    assert (code, err) == (0, "")
    assert [job["name"] for job in json.loads(out)] == ["listed"]

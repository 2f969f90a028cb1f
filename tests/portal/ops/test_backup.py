"""Backup and restore: a dump restored into an empty database schedules on as before, and the
first cycle after the restore leaves alone every pod the portal does not own."""

import json
import shutil
import subprocess
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from jobspec.pods import DesiredPod
from portal.cluster.models import Placement
from portal.jobs.models import Job
from portal.queues.models import Queue
from portal.scheduling.models import CycleRun
from portal.tenants.models import Membership, Tenant
from scheduler.adapters.cluster.base import ObservedNode, ObservedPod
from tests.factories import MembershipFactory, UserFactory
from tests.portal.ops.scenario import Clock, run_cycles
from tests.scheduler.adapters.cluster.fakes import EmptyCluster
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db
GPU = "nvidia.com/gpu"


class FakeCluster(EmptyCluster):
    """A cluster outside the database: it survives the restore, as a real one would. It lists
    every pod it holds, the portal's and others', and records every write."""

    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], ObservedPod] = {}
        self.writes: list[tuple[str, str]] = []

    def list_nodes(self) -> list[ObservedNode]:
        return [
            ObservedNode(name, {"cpu": 96_000, "memory": 512 * 2**30, GPU: 8, "pods": 110})
            for name in ("gpu-a", "gpu-b")
        ]

    def list_pods(self) -> list[ObservedPod]:
        return list(self.pods.values())

    def create_pod(self, pod: DesiredPod) -> None:
        self.writes.append(("create", pod.name))
        self.pods[(pod.namespace, pod.name)] = ObservedPod(
            pod.name, pod.namespace, pod.node_name, "Running", dict(pod.labels)
        )

    def delete_pod(self, name: str, namespace: str, grace_seconds: int) -> None:
        self.writes.append(("delete", name))
        self.pods.pop((namespace, name), None)


def foreign_pods(cluster: FakeCluster, namespace: str) -> set[str]:
    """A DaemonSet pod on a GPU node and a pod someone made in the jobs namespace."""
    for name in ("dcgm-exporter-x1", "notebook-of-bob"):
        cluster.pods[(namespace, name)] = ObservedPod(
            name, namespace, "gpu-a", "Running", {"app": name.split("-")[0]}
        )
    return {"dcgm-exporter-x1", "notebook-of-bob"}


def pod_names(cluster: FakeCluster) -> set[str]:
    return {name for _, name in cluster.pods}


@pytest.mark.django_db(transaction=True)  # flush empties the tables outside a transaction
def test_a_restored_database_reconciles_without_touching_pods_it_does_not_own(
    settings, tmp_path, monkeypatch
):
    # Committed submissions would kick a cycle on the configured (simulated) cluster; this
    # test drives every cycle itself, against its own cluster.
    monkeypatch.setattr("scheduler.tasks._kick", lambda: None)
    clock, cluster = Clock(), FakeCluster()
    user = UserFactory(username="alice")
    tenant = Tenant.objects.create(name="nlp")
    MembershipFactory(user=user, tenant=tenant, role=Membership.Role.RESEARCHER)
    queue = Queue.objects.create(tenant=tenant, name="nlp-train")
    for i in range(3):
        submit_job(user, queue, f"train-{i}", replicas=2, gpus=2)
    run_cycles(cluster, clock, 3)
    assert Job.objects.filter(status=Job.Status.RUNNING).count() == 3
    others = foreign_pods(cluster, settings.KUBERNETES_NAMESPACE)
    portal_pods = pod_names(cluster) - others
    assert len(portal_pods) == 6

    dump = tmp_path / "portal.json"
    call_command("backup_dump", str(dump), stdout=StringIO())
    late = submit_job(user, queue, "after-the-backup", gpus=2)  # lost with the database
    run_cycles(cluster, clock, 2)
    late_pods = pod_names(cluster) - others - portal_pods
    assert len(late_pods) == 1
    running = {
        (row["job__name"], row["pod_name"])
        for row in Placement.objects.filter(state=Placement.State.RUNNING).values(
            "job__name", "pod_name"
        )
    }

    call_command("flush", interactive=False, verbosity=0)  # the fresh, migrated database
    assert not Job.objects.exists()
    call_command("backup_restore", str(dump), stdout=StringIO())
    assert not Job.objects.filter(pk=late.pk).exists()
    cluster.writes.clear()

    run_cycles(cluster, clock, 3)

    assert others <= pod_names(cluster)  # never deleted
    assert not any(name in others for _, name in cluster.writes)
    # The portal's pods the backup knew stay as they are: no duplicate, no restart.
    assert portal_pods <= pod_names(cluster)
    assert cluster.writes == [("delete", name) for name in sorted(late_pods)]
    assert {
        (row["job__name"], row["pod_name"])
        for row in Placement.objects.filter(state=Placement.State.RUNNING).values(
            "job__name", "pod_name"
        )
    } == {item for item in running if item[0] != "after-the-backup"}
    assert Job.objects.filter(status=Job.Status.RUNNING).count() == 3
    assert not CycleRun.objects.exclude(error="").filter(started_at__gte=clock.now).exists()
    # Rows keep their ids, and new rows never reuse one (loaddata reset the sequences).
    assert UserFactory._meta.model.objects.get(username="alice").pk == user.pk
    newer = submit_job(user, queue, "after-the-restore", gpus=2)
    assert newer.pk > max(Job.objects.exclude(pk=newer.pk).values_list("pk", flat=True))


def test_restore_refuses_a_database_that_holds_data(tmp_path, nlp_queue, researcher):
    from portal.api.services import api_token_create
    from portal.ops.backup import tables_with_rows

    api_token_create(user=researcher, name="ci")
    dump = tmp_path / "portal.json"
    call_command("backup_dump", str(dump), stdout=StringIO())
    with pytest.raises(CommandError, match="the database already holds data"):
        call_command("backup_restore", str(dump), stdout=StringIO())
    assert {"queues.queue", "api.apitoken", "auth.user"} <= set(tables_with_rows())


def test_a_dump_leaves_out_what_migrate_recreates(tmp_path, nlp_queue):
    dump = tmp_path / "portal.json"
    call_command("backup_dump", str(dump), stdout=StringIO())
    models = {row["model"] for row in json.loads(dump.read_text())}
    assert "queues.queue" in models
    assert models.isdisjoint({"contenttypes.contenttype", "auth.permission", "sessions.session"})


@pytest.mark.postgres
@pytest.mark.skipif(connection.vendor != "postgresql", reason="pg_dump needs PostgreSQL")
@pytest.mark.skipif(shutil.which("pg_restore") is None, reason="pg_dump/pg_restore not installed")
@pytest.mark.django_db(transaction=True)
def test_pg_dump_and_pg_restore_as_documented_copy_every_row(tmp_path, nlp_queue, researcher):
    """The commands of docs/operations.md, into a new database."""
    import psycopg

    submit_job(researcher, nlp_queue, "train", replicas=2, gpus=2)
    db = connection.settings_dict
    server = ["-h", db["HOST"] or "127.0.0.1", "-p", str(db["PORT"] or 5432), "-U", db["USER"]]
    target = f"{db['NAME']}_restore"
    archive = tmp_path / "portal.dump"
    subprocess.run(["pg_dump", *server, "-Fc", "-f", str(archive), db["NAME"]], check=True)
    subprocess.run(["dropdb", *server, "--if-exists", target], check=True)
    subprocess.run(["createdb", *server, target], check=True)
    try:
        subprocess.run(
            ["pg_restore", *server, "--no-owner", "--exit-on-error", "-d", target, str(archive)],
            check=True,
        )
        tables = ("jobs_job", "jobs_jobtask", "queues_queue", "auth_user", "django_migrations")
        counts = {}
        for name in (db["NAME"], target):
            with psycopg.connect(
                host=server[1], port=server[3], user=db["USER"], password=db["PASSWORD"] or None,
                dbname=name,
            ) as conn:  # fmt: skip
                counts[name] = [
                    conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables
                ]
        assert counts[target] == counts[db["NAME"]]
        assert counts[target][0] == 1
    finally:
        subprocess.run(["dropdb", *server, "--if-exists", target], check=True)

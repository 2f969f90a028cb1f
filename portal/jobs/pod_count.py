# ruff: noqa: S608 - SQL made of this module's constants and the migration's frozen values
"""A tenant's pending pods, kept by PostgreSQL: the cap on them (JOB_MAX_PENDING_PODS_PER_TENANT)
is checked on every job creation, and summing the tenant's queue there cost what the queue is
long (4 ms at 2,500 pending jobs, 80 ms at 50,000). SQLite recounts (`counted_by_database`).

Triggers on jobs_job (status), jobs_jobtask (replicas) and cluster_placement (state) append a
delta row to jobs_tenantpoddelta for every change that moves a tenant's count: replicas of the
jobs the scheduler still schedules (portal.jobs.lifecycle SCHEDULED), and how many of those
hold a placement (active, or succeeded while the job goes on). No writer can bypass them:
services, the cycle's bulk UPDATEs, bulk inserts of the demo and the benchmarks, raw SQL.
Appending (instead of updating one row per tenant) takes no lock another writer waits for.
Each trigger reads the job's row FOR SHARE, which serialises a change of a job's status with
changes of its placements or tasks in other transactions: whichever commits second counts
with the first's result, so no interleaving double-counts or drops a pod. The cycle folds the
deltas (`tenant_pod_deltas_fold`), so a read sums what changed since; the selectors'
`tenant_pending_pods_recount` is the same figure from the rows themselves.

The statuses and states in the triggers are the migration's own (frozen, as a migration must
be); tests/portal/jobs/test_pod_count.py holds them equal to the lifecycle's.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection, transaction

DELTAS = "jobs_tenantpoddelta"
# A placement counts as placed in these states (the selector's rule before the counter).
PLACED_STATES = ("bound", "releasing", "running", "succeeded")


def _in(values: Iterable[str]) -> str:
    return "(" + ", ".join(f"'{value}'" for value in values) + ")"


def counted_by_database(vendor: str) -> bool:
    """PostgreSQL keeps the count. SQLite (the embedded default: one writer, small queues)
    recounts the rows: Django alters an SQLite table by building a new one and dropping the
    old, which drops the triggers on it and breaks those naming it in their bodies, so every
    later migration of jobs, tasks or placements would have to install them again."""
    return vendor == "postgresql"


def trigger_statements(
    vendor: str, *, scheduled: Iterable[str], placed: Iterable[str]
) -> list[str]:
    """CREATE statements of the functions and triggers for `vendor`: PostgreSQL's only (see
    `counted_by_database`)."""
    if not counted_by_database(vendor):
        return []
    return _postgresql(_in(scheduled), _in(placed))


def drop_statements(vendor: str) -> list[str]:
    if not counted_by_database(vendor):
        return []
    triggers = ("jobs_jobtask_pods", "jobs_job_pods", "cluster_placement_pods")
    tables = ("jobs_jobtask", "jobs_job", "cluster_placement")
    return [
        *(f"DROP TRIGGER IF EXISTS {t} ON {table}" for t, table in zip(triggers, tables)),
        *(f"DROP FUNCTION IF EXISTS {t}()" for t in triggers),
    ]


def _postgresql(scheduled: str, placed: str) -> list[str]:
    delta = f"INSERT INTO {DELTAS} (tenant_id, replicas, placed)"
    return [
        f"""
CREATE OR REPLACE FUNCTION jobs_jobtask_pods() RETURNS trigger AS $$
DECLARE t bigint; s boolean;
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    SELECT tenant_id, status IN {scheduled} INTO t, s FROM jobs_job WHERE id = OLD.job_id FOR SHARE;
    IF s THEN {delta} VALUES (t, -OLD.replicas, 0); END IF;
  END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') THEN
    SELECT tenant_id, status IN {scheduled} INTO t, s FROM jobs_job WHERE id = NEW.job_id FOR SHARE;
    IF s THEN {delta} VALUES (t, NEW.replicas, 0); END IF;
  END IF;
  RETURN NULL;
END $$ LANGUAGE plpgsql""",
        """
CREATE TRIGGER jobs_jobtask_pods AFTER INSERT OR DELETE OR UPDATE OF replicas, job_id
ON jobs_jobtask FOR EACH ROW EXECUTE FUNCTION jobs_jobtask_pods()""",
        f"""
CREATE OR REPLACE FUNCTION jobs_job_pods() RETURNS trigger AS $$
DECLARE was boolean := false; now_ boolean := false; r bigint; p bigint; id_ bigint;
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN was := OLD.status IN {scheduled}; id_ := OLD.id; END IF;
  IF TG_OP = 'UPDATE' THEN now_ := NEW.status IN {scheduled}; END IF;
  IF TG_OP = 'UPDATE' AND was = now_ AND OLD.tenant_id = NEW.tenant_id THEN RETURN NULL; END IF;
  IF NOT was AND NOT now_ THEN RETURN NULL; END IF;
  SELECT COALESCE(SUM(replicas), 0) INTO r FROM jobs_jobtask WHERE job_id = id_;
  SELECT COUNT(*) INTO p FROM cluster_placement WHERE job_id = id_ AND state IN {placed};
  IF was THEN {delta} VALUES (OLD.tenant_id, -r, -p); END IF;
  IF now_ THEN {delta} VALUES (NEW.tenant_id, r, p); END IF;
  RETURN NULL;
END $$ LANGUAGE plpgsql""",
        """
CREATE TRIGGER jobs_job_pods AFTER DELETE OR UPDATE OF status, tenant_id
ON jobs_job FOR EACH ROW EXECUTE FUNCTION jobs_job_pods()""",
        f"""
CREATE OR REPLACE FUNCTION cluster_placement_pods() RETURNS trigger AS $$
DECLARE t bigint; s boolean;
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.state IN {placed} THEN
    SELECT tenant_id, status IN {scheduled} INTO t, s FROM jobs_job WHERE id = OLD.job_id FOR SHARE;
    IF s THEN {delta} VALUES (t, 0, -1); END IF;
  END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.state IN {placed} THEN
    SELECT tenant_id, status IN {scheduled} INTO t, s FROM jobs_job WHERE id = NEW.job_id FOR SHARE;
    IF s THEN {delta} VALUES (t, 0, 1); END IF;
  END IF;
  RETURN NULL;
END $$ LANGUAGE plpgsql""",
        """
CREATE TRIGGER cluster_placement_pods AFTER INSERT OR DELETE OR UPDATE OF state, job_id
ON cluster_placement FOR EACH ROW EXECUTE FUNCTION cluster_placement_pods()""",
    ]


def backfill_statement(*, scheduled: Iterable[str], placed: Iterable[str]) -> str:
    """One delta row per tenant with what its rows say now (when the triggers are installed on
    a database that already has jobs)."""
    return f"""
INSERT INTO {DELTAS} (tenant_id, replicas, placed)
SELECT tenant_id, SUM(r), SUM(p) FROM (
  SELECT j.tenant_id AS tenant_id,
         (SELECT COALESCE(SUM(replicas), 0) FROM jobs_jobtask WHERE job_id = j.id) AS r,
         (SELECT COUNT(*) FROM cluster_placement
           WHERE job_id = j.id AND state IN {_in(placed)}) AS p
  FROM jobs_job j WHERE j.status IN {_in(scheduled)}
) AS per_job GROUP BY tenant_id"""


def tenant_pending_pods(tenant_id: int) -> int:
    """The tenant's pending pods: replicas of the jobs the scheduler still schedules, less
    those placed. Sums the deltas since the last fold: no scan of the tenant's jobs."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT COALESCE(SUM(replicas), 0), COALESCE(SUM(placed), 0) FROM {DELTAS} "
            "WHERE tenant_id = %s",
            [tenant_id],
        )
        replicas, placed = cursor.fetchone()
    return max(0, int(replicas) - int(placed))


@transaction.atomic
def tenant_pod_deltas_fold() -> None:
    """Fold every tenant's deltas into one row (the cycle calls it once a cycle), and drop the
    rows of deleted tenants. Rows other transactions append meanwhile are not touched: only
    the rows the statement deletes are folded."""
    if not counted_by_database(connection.vendor):
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {DELTAS} WHERE tenant_id NOT IN (SELECT id FROM tenants_tenant)"
        )
        cursor.execute(
            f"""WITH gone AS (DELETE FROM {DELTAS} RETURNING tenant_id, replicas, placed)
            INSERT INTO {DELTAS} (tenant_id, replicas, placed)
            SELECT tenant_id, SUM(replicas), SUM(placed) FROM gone GROUP BY tenant_id"""
        )

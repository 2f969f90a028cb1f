# ruff: noqa: S608 - SQL made of this module's constants and the migration's frozen values
"""A tenant's pending pods, kept by the database: the cap on them (JOB_MAX_PENDING_PODS_PER_TENANT)
is checked on every job creation, and summing the tenant's queue there cost what the queue is
long (4 ms at 2,500 pending jobs, 80 ms at 50,000).

Triggers on jobs_job (status), jobs_jobtask (replicas) and cluster_placement (state) append
a delta row to jobs_tenantpoddelta for every change that moves a tenant's count: replicas of
the jobs the scheduler still schedules (portal.jobs.lifecycle SCHEDULED), and how many of
those hold a placement (active, or succeeded while the job goes on). No writer can bypass
them: services, the cycle's bulk UPDATEs, bulk inserts of the demo and the benchmarks, raw
SQL. Appending (instead of updating one row per tenant) takes no lock another writer waits
for; on PostgreSQL each trigger reads the job's row FOR SHARE, so a job's status change and
a change to its placements are counted in one order whatever the interleaving. The cycle
folds the deltas (`tenant_pod_deltas_fold`), so a read sums what changed since, and
`tenant_pending_pods_recount` is the same figure from the rows themselves, for tests and
repair.

The FOR SHARE read of the job serialises a change of a job's status with changes of its
placements or tasks in other transactions: whichever commits second counts with the first's
result, so no interleaving double-counts or drops a pod.

The statuses and states in the triggers are the migration's own (frozen, as a migration
must be); tests/portal/jobs/test_pod_count.py holds them equal to the lifecycle's.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection, transaction

DELTAS = "jobs_tenantpoddelta"
# A placement counts as placed in these states (the selector's rule before the counter).
PLACED_STATES = ("bound", "releasing", "running", "succeeded")


def _in(values: Iterable[str]) -> str:
    return "(" + ", ".join(f"'{value}'" for value in values) + ")"


def trigger_statements(
    vendor: str, *, scheduled: Iterable[str], placed: Iterable[str]
) -> list[str]:
    """CREATE statements of the functions and triggers for `vendor` (postgresql, sqlite)."""
    if vendor == "postgresql":
        return _postgresql(_in(scheduled), _in(placed))
    if vendor == "sqlite":
        return _sqlite(_in(scheduled), _in(placed))
    raise NotImplementedError(f"pending-pod triggers for {vendor}")


def drop_statements(vendor: str) -> list[str]:
    triggers = ("jobs_jobtask_pods", "jobs_job_pods", "cluster_placement_pods")
    if vendor == "postgresql":
        tables = ("jobs_jobtask", "jobs_job", "cluster_placement")
        return [
            *(f"DROP TRIGGER IF EXISTS {t} ON {table}" for t, table in zip(triggers, tables)),
            *(f"DROP FUNCTION IF EXISTS {t}()" for t in triggers),
        ]
    suffixes = ("insert", "delete", "update")
    return [f"DROP TRIGGER IF EXISTS {t}_{s}" for t in triggers for s in suffixes]


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


def _sqlite(scheduled: str, placed: str) -> list[str]:
    """SQLite has one writer at a time and no trigger functions: a trigger per event, each an
    INSERT ... SELECT that finds no row when the job is not scheduled."""
    delta = f"INSERT INTO {DELTAS} (tenant_id, replicas, placed)"

    def job_of(ref: str) -> str:
        return f"FROM jobs_job j WHERE j.id = {ref}.job_id AND j.status IN {scheduled}"

    def job_totals(ref: str, sign: str) -> str:
        """A job's tenant, and its replicas and placed pods, signed."""
        replicas = f"(SELECT COALESCE(SUM(replicas), 0) FROM jobs_jobtask WHERE job_id = {ref}.id)"
        pods = (
            f"(SELECT COUNT(*) FROM cluster_placement WHERE job_id = {ref}.id "
            f"AND state IN {placed})"
        )
        return f"{ref}.tenant_id, {sign}{replicas}, {sign}{pods}"

    return [
        f"""CREATE TRIGGER jobs_jobtask_pods_insert AFTER INSERT ON jobs_jobtask BEGIN
  {delta} SELECT j.tenant_id, NEW.replicas, 0 {job_of("NEW")}; END""",
        f"""CREATE TRIGGER jobs_jobtask_pods_delete AFTER DELETE ON jobs_jobtask BEGIN
  {delta} SELECT j.tenant_id, -OLD.replicas, 0 {job_of("OLD")}; END""",
        f"""CREATE TRIGGER jobs_jobtask_pods_update AFTER UPDATE OF replicas, job_id ON jobs_jobtask BEGIN
  {delta} SELECT j.tenant_id, -OLD.replicas, 0 {job_of("OLD")};
  {delta} SELECT j.tenant_id, NEW.replicas, 0 {job_of("NEW")}; END""",
        f"""CREATE TRIGGER jobs_job_pods_update AFTER UPDATE OF status, tenant_id ON jobs_job
WHEN (OLD.status IN {scheduled}) != (NEW.status IN {scheduled}) OR OLD.tenant_id != NEW.tenant_id
BEGIN
  {delta} SELECT {job_totals("OLD", "-")} WHERE OLD.status IN {scheduled};
  {delta} SELECT {job_totals("NEW", "")} WHERE NEW.status IN {scheduled}; END""",
        f"""CREATE TRIGGER jobs_job_pods_delete AFTER DELETE ON jobs_job
WHEN OLD.status IN {scheduled} BEGIN
  {delta} SELECT {job_totals("OLD", "-")}; END""",
        f"""CREATE TRIGGER cluster_placement_pods_insert AFTER INSERT ON cluster_placement
WHEN NEW.state IN {placed} BEGIN
  {delta} SELECT j.tenant_id, 0, 1 {job_of("NEW")}; END""",
        f"""CREATE TRIGGER cluster_placement_pods_delete AFTER DELETE ON cluster_placement
WHEN OLD.state IN {placed} BEGIN
  {delta} SELECT j.tenant_id, 0, -1 {job_of("OLD")}; END""",
        f"""CREATE TRIGGER cluster_placement_pods_update AFTER UPDATE OF state, job_id ON cluster_placement
BEGIN
  {delta} SELECT j.tenant_id, 0, -1 {job_of("OLD")} AND OLD.state IN {placed};
  {delta} SELECT j.tenant_id, 0, 1 {job_of("NEW")} AND NEW.state IN {placed}; END""",
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
    the rows a statement deletes are folded."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {DELTAS} WHERE tenant_id NOT IN (SELECT id FROM tenants_tenant)"
        )
        if connection.vendor == "postgresql":
            cursor.execute(
                f"""WITH gone AS (DELETE FROM {DELTAS} RETURNING tenant_id, replicas, placed)
                INSERT INTO {DELTAS} (tenant_id, replicas, placed)
                SELECT tenant_id, SUM(replicas), SUM(placed) FROM gone GROUP BY tenant_id"""
            )
            return
        # SQLite: one writer at a time, so reading, deleting and writing back cannot interleave.
        cursor.execute(f"SELECT MAX(id) FROM {DELTAS}")
        (last,) = cursor.fetchone()
        if last is None:
            return
        cursor.execute(
            f"INSERT INTO {DELTAS} (tenant_id, replicas, placed) "
            f"SELECT tenant_id, SUM(replicas), SUM(placed) FROM {DELTAS} WHERE id <= %s "
            "GROUP BY tenant_id",
            [last],
        )
        cursor.execute(f"DELETE FROM {DELTAS} WHERE id <= %s", [last])

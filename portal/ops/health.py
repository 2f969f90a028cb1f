"""What the probes ask. Each check returns None when healthy, else a short reason.

The web's readiness depends on what a request needs: the database and the broker (a submit
queues a cycle). The scheduling cycle's age is not part of it: a stalled worker must not take
the pages down with it. The cycle worker has its own probe (portal.ops.worker), and the age is
a metric (`gpuportal_cycle_age_seconds`); `/readyz?check=cycle` adds it for a monitor that
only speaks HTTP. `/readyz?check=config` adds the configuration's warnings (they never make
the web unready): tenants sharing a namespace on a real cluster, and namespaces whose pod
security label differs from their tenants' level, with the command that mends each.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import connection

from portal.ops.selectors import cycle_latest_finished

BROKER_TIMEOUT_SECONDS = 2.0
LABELS_UNREADABLE = (
    "the jobs namespaces' pod security labels could not be compared with the tenants' levels: "
    "{error}"
)


def database_check() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None


def broker_check() -> str | None:
    from portal.celery import app

    url = app.conf.broker_url or ""
    if url.startswith("filesystem"):
        # The embedded broker is a folder: ready when the worker and the web can both write it.
        folder = Path(app.conf.broker_transport_options.get("data_folder_in", ""))
        return None if folder.is_dir() else f"broker folder {folder} is missing"
    try:
        with app.connection_for_write(connect_timeout=BROKER_TIMEOUT_SECONDS) as conn:
            conn.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT_SECONDS)
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None


def cycle_check(*, now: datetime) -> str | None:
    """Stale when no cycle finished in the last CYCLE_MAX_AGE_SECONDS (an errored cycle still
    counts: it ran; its error is a metric and a log line of its own)."""
    limit = settings.CYCLE_MAX_AGE_SECONDS
    last = cycle_latest_finished()
    if last is None or last.finished_at is None:
        return "no scheduling cycle has finished yet"
    age = (now - last.finished_at).total_seconds()
    if age > limit:
        return f"the last scheduling cycle finished {age:.0f} s ago (limit {limit:g} s)"
    return None


def config_warnings() -> list[str]:
    """What an operator should know of the configuration: on a Kubernetes backend, a shared
    namespace, and each namespace whose `pod-security.kubernetes.io/enforce` label differs
    from the level of its tenant(s) (portal.cluster.namespaces)."""
    from portal.cluster.namespaces import (
        SHARED_NAMESPACE,
        level_drift,
        namespace_levels,
        shared_on_cluster,
    )
    from portal.scheduling.facade import ClusterUnavailable, namespace_labels_read

    if settings.CLUSTER_BACKEND != "kubernetes":
        return []
    warnings = []
    if shared_on_cluster():
        warnings.append(SHARED_NAMESPACE.format(namespace=settings.KUBERNETES_NAMESPACE))
    expected = namespace_levels()
    try:
        labels = namespace_labels_read(names=sorted(expected))
    except ClusterUnavailable as error:
        return [*warnings, LABELS_UNREADABLE.format(error=error)]
    return warnings + level_drift(expected, labels)

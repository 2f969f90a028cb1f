"""What the core may know of earlier cycles, read from the database for the next snapshot.

The core keeps no memory between cycles (it gets everything in its Snapshot), but two of its
decisions need some history:

* the rescheduling plugin's interval (when it last ran: the latest CycleRun that ran it) and
  its loop guards (which pods it moved off which node, and when: the rescheduling
  PreemptionEvents of the last interval or budget window, whichever is longer);
* pending reasons that say when a running job is expected to end (started + declared duration).

Each is one indexed query; `snapshot_history` returns the Snapshot fields they fill.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from jobspec.labels import pod_name as task_key
from scheduler.adapters.portal_port import CycleRun, Job, PreemptionEvent
from scheduler.core.config import ConfigError, SchedulerConf
from scheduler.core.plugins import rescheduling
from scheduler.core.types import Rescheduled


def snapshot_history(*, conf: SchedulerConf, now: datetime) -> dict[str, Any]:
    """Keyword arguments for `dataclasses.replace(snapshot, ...)`."""
    return {
        "last_rescheduling": last_rescheduling(),
        "rescheduled": rescheduled_pods(conf=conf, now=now),
        "expected_ends": expected_ends(),
    }


def last_rescheduling() -> float | None:
    started = (
        CycleRun.objects.filter(rescheduling_ran=True)
        .order_by("-id")
        .values_list("started_at", flat=True)
        .first()
    )
    return None if started is None else started.timestamp()


def rescheduled_pods(*, conf: SchedulerConf, now: datetime) -> tuple[Rescheduled, ...]:
    """The pods rescheduling moved within the plugin's memory span (none when its loop guards
    are off: nothing reads them then)."""
    option = conf.plugin(rescheduling.PLUGIN_NAME)
    if option is None:
        return ()
    try:
        plugin = rescheduling.build(option.arguments)
    except ConfigError:
        return ()
    if not plugin.guards:
        return ()
    since = now - timedelta(seconds=max(plugin.interval, plugin.budget_window))
    events = (
        PreemptionEvent.objects.filter(
            action=PreemptionEvent.Action.RESCHEDULING, occurred_at__gte=since
        )
        .order_by("occurred_at", "id")
        .values_list(
            "victim_job_id",
            "victim_job__object_prefix",
            "victim_task_name",
            "node_name",
            "occurred_at",
        )
    )
    records = []
    for job_id, prefix, replica_name, node, at in events:
        # victim_task_name is "<task>-<replica>" (scheduler.adapters.persist)
        task, _, replica = replica_name.rpartition("-")
        if not task or not replica.isdigit():
            continue
        records.append(
            Rescheduled(
                str(job_id),
                task_key(job_id, task, int(replica), prefix=prefix),
                node,
                at.timestamp(),
            )
        )
    return tuple(records)


def expected_ends() -> tuple[tuple[str, float], ...]:
    rows = Job.objects.filter(
        status=Job.Status.RUNNING,
        started_at__isnull=False,
        expected_duration_seconds__isnull=False,
    ).values_list("id", "started_at", "expected_duration_seconds")
    return tuple((str(job_id), started.timestamp() + seconds) for job_id, started, seconds in rows)

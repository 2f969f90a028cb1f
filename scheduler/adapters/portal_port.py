"""The portal as the scheduler's shell sees it: every model, service and rule of the portal that
the shell (scheduler.adapters, scheduler.apps) uses, and nothing else of it.

The shell is above the portal: it reads the portal's rows, maps them to the core's types, and
writes back what the cycle decided and observed. It goes through this one module (an import
contract in pyproject.toml), so what the shell depends on is listed here, and the portal,
which never imports the shell, calls it back only through its facade
(portal.scheduling.facade).
"""

from portal.accounting.booking import (
    MILLI,
    Amounts,
    Line,
    OpenPlacement,
    book,
    epoch_seconds,
    from_epoch_seconds,
    month_of,
    notice_losses,
)
from portal.accounting.models import LedgerClock, LedgerEntry
from portal.cluster.models import (
    GPU_MODEL_LABEL,
    Node,
    Placement,
    SimulatedPod,
    placement_milli,
    whole_second,
)
from portal.cluster.namespaces import (
    NAMESPACE_FORBIDDEN,
    NAMESPACE_MISSING,
    job_namespaces,
    placement_namespace,
    placing_namespaces,
)
from portal.cluster.services import (
    node_inventory_sync,
    node_seen_mark,
    placement_pod_name,
    placements_notice_give,
)
from portal.jobs.backoff import (
    Attempt,
    BackoffSettings,
    Kind,
    attempts_of,
    attempts_with,
    capped,
    failed_reason,
    in_backoff,
    nodes_avoided,
    quota_exceeded,
    waiting_kind,
    waiting_reason,
)
from portal.jobs.delays import (
    Delay,
    delay_added,
    delays_due,
    delays_read,
    due,
    due_at,
    held_pods,
    run_of,
)
from portal.jobs.estimates import EstimateRow, start_estimates_record
from portal.jobs.lifecycle import WAITING, Event, IllegalTransition, Transition, allows, transition
from portal.jobs.limits import gpu_sharing, job_limits, start_backoff
from portal.jobs.models import Job, JobTask
from portal.jobs.pod_count import tenant_pod_deltas_fold
from portal.jobs.services import (
    job_quarantine,
    job_start_failed,
    job_start_refused,
    job_start_retrying,
    jobs_runtime_limit_end,
)
from portal.ops.retention import finished_pods_kept, ttl_jobs_kept
from portal.queues.models import Queue
from portal.queues.services import queue_orders_record
from portal.scheduling.facade import (
    ClusterUnavailable,
    LogUnavailable,
    SchedulerShell,
    facade_connect,
)
from portal.scheduling.mapping import (
    JOB_COLUMNS,
    PLACEMENT_COLUMNS,
    SCHEDULABLE_STATUSES,
    TASK_COLUMNS,
    JobRow,
    PendingReplica,
    PlacementRow,
    TaskRow,
    active_conf,
    capacity_nodes,
    device_memory_mib,
    job_info,
    node_info,
    queue_tree,
    scheduled_queues,
    task_requests,
    tolerations_of,
    wants_tree,
)
from portal.scheduling.models import CycleRun, PreemptionEvent, QueueUsageRollup, QueueUsageSample
from portal.scheduling.rollups import EpochSeconds, usage_rollups_refresh
from portal.scheduling.selectors import eviction_reasons
from portal.scheduling.services import conf_lacks_predicates
from portal.tenants.models import TenantUsageSample
from portal.tenants.quota import tenant_node_name
from portal.tenants.runtime_limits import effective_limit

__all__ = [
    # accounting: the ledger's booking rules and rows
    "MILLI",
    "Amounts",
    "Line",
    "LedgerClock",
    "LedgerEntry",
    "OpenPlacement",
    "book",
    "notice_losses",
    "epoch_seconds",
    "from_epoch_seconds",
    "month_of",
    # cluster: nodes, placements, the simulated cluster's pods, namespaces
    "GPU_MODEL_LABEL",
    "NAMESPACE_FORBIDDEN",
    "NAMESPACE_MISSING",
    "Node",
    "Placement",
    "SimulatedPod",
    "job_namespaces",
    "node_inventory_sync",
    "node_seen_mark",
    "placement_milli",
    "placement_namespace",
    "placement_pod_name",
    "placements_notice_give",
    "placing_namespaces",
    "whole_second",
    # jobs: rows, the lifecycle, the limits in force, the services the cycle ends jobs with,
    # the tenants' pending-pod counts it folds, the backoff of jobs whose pods failed to start
    "Attempt",
    "BackoffSettings",
    "Kind",
    "attempts_of",
    "attempts_with",
    "capped",
    "failed_reason",
    "in_backoff",
    "nodes_avoided",
    "quota_exceeded",
    "start_backoff",
    "waiting_kind",
    "waiting_reason",
    "WAITING",
    "Delay",
    "Event",
    "IllegalTransition",
    "Job",
    "JobTask",
    "EstimateRow",
    "start_estimates_record",
    "tenant_pod_deltas_fold",
    "Transition",
    "allows",
    "delay_added",
    "delays_due",
    "delays_read",
    "due",
    "due_at",
    "held_pods",
    "run_of",
    "gpu_sharing",
    "job_limits",
    "job_quarantine",
    "job_start_failed",
    "job_start_refused",
    "job_start_retrying",
    "jobs_runtime_limit_end",
    "transition",
    # ops: what the cluster keeps of finished pods and ended jobs
    "finished_pods_kept",
    "ttl_jobs_kept",
    # queues and tenants
    "Queue",
    "queue_orders_record",
    "TenantUsageSample",
    "effective_limit",
    "tenant_node_name",
    # scheduling: the facade the shell connects, the ORM -> core mapping, cycle records
    "JOB_COLUMNS",
    "PLACEMENT_COLUMNS",
    "SCHEDULABLE_STATUSES",
    "TASK_COLUMNS",
    "CycleRun",
    "EpochSeconds",
    "JobRow",
    "LogUnavailable",
    "ClusterUnavailable",
    "PendingReplica",
    "PlacementRow",
    "PreemptionEvent",
    "QueueUsageRollup",
    "QueueUsageSample",
    "SchedulerShell",
    "TaskRow",
    "active_conf",
    "capacity_nodes",
    "conf_lacks_predicates",
    "device_memory_mib",
    "eviction_reasons",
    "facade_connect",
    "job_info",
    "node_info",
    "queue_tree",
    "scheduled_queues",
    "task_requests",
    "tolerations_of",
    "usage_rollups_refresh",
    "wants_tree",
]

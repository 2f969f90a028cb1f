"""Pure scheduling core: snapshot in, decisions out (no I/O, no clock, no frameworks).

Public API::

    from scheduler.core.cycle import run_cycle          # (Snapshot, SchedulerConf) -> CycleResult
    from scheduler.core.config import parse_conf, parse_conf_text, default_conf, ConfigError
    from scheduler.core.scenario import load_scenario, result_to_dict, ScenarioError
    from scheduler.core.types import Snapshot, NodeInfo, QueueInfo, JobInfo, TaskInfo, ...
    from scheduler.core.resources import Resources

Layout mirrors volcano-sh/volcano pkg/scheduler: ``cycle`` opens and closes a session
(framework/framework.go), ``session`` is its state (framework/session.go), ``hooks`` the callback
types (api/types.go), ``registry`` and ``dispatch`` the two halves of
framework/session_plugins.go, ``statement`` (framework/statement.go), ``actions/`` (actions/*)
and ``plugins/`` (plugins/*).

Framework rules (where this departs from upstream's shape, and why):

- Plugins declare, the framework never names them: each ``Session.add_<hook>_fn`` takes the
  hook's callback type and what a plugin may declare about that hook (``hooks.Declared``: a
  scorer that depends only on the node's state, a predicate that reads other pods or has a
  lasting part, an allocatable hook's explanation, a preemptable hook that judges by the
  preemptor's job, the rescheduling pass), and a quota plugin offers its per-queue figures
  (``add_queue_shares``). Plugin names appear only in the registry (``plugins/__init__``) and
  the conf parser.
- Per-action state: what allocate works out and memoises lives in ``allocate.AllocateState``,
  made for each run (kube-scheduler's CycleState, owned by the action); the session keeps what
  every action shares, and ``Session.cycle_state`` holds the explanations' memos at close.
- Nodes keep their index current: every change of a node's books goes through a ``Node``
  method that tells the ``NodeIndex`` (and its listeners) once.

Upstream sources read while writing it (volcano-sh/volcano, files as
stored in the reference index; commits where shown):

- actions/allocate/allocate.go (0002b235 and the current two-gradient version),
  actions/preempt/preempt.go and preempt_test.go (016d2152), actions/reclaim/reclaim.go
  (012c2a26 and a later version with per-node rollback), reclaim_test.go (012c2a26),
  actions/enqueue/enqueue_test.go (0afc2d94), actions/backfill/backfill.go;
- framework/session_plugins.go, framework/statement.go, framework/job_updater.go;
- api/resource_info.go (LessEqual, LessEqualWithDimension, minResource), api/job_info.go
  (ReadyTaskNum, IsReady/IsPipelined/IsStarving, NeedContinueAllocating, CheckTask*);
- plugins/{priority,gang,conformance,drf,proportion,capacity,binpack,nodeorder,predicates,
  overcommit,rescheduling,network-topology-aware}; the restated upstream tests under
  ../shared/scenarios/volcano (commit ed72c7c8) were the acceptance bar.
"""

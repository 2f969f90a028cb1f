"""How a session combines its plugins' answers: the dispatchers.

The dispatch half of volcano-sh/volcano pkg/scheduler/framework/session_plugins.go (the
registration half is ``registry``):
- order functions: the first enabled plugin with a non-zero answer decides; ties fall back to
  creation time then a stable id (here namespace/name, or name for queues and nodes);
- Preemptable/Reclaimable: the intersection of victims within a tier; the first tier that yields
  a non-empty set wins (an empty answer lets the next tier speak, as upstream). That fall-through
  can pick pods gang refused; actions/_victims.py then keeps a victim gang whole or at min;
- Overused: any plugin saying yes; Allocatable/Preemptive/JobReady: every plugin must agree;
- JobPipelined/JobEnqueueable: votes, a reject wins, a permit ends the walk at its tier;
- JobStarving: every answering plugin of the first tier that answers must agree;
- node order: the sum of every enabled plugin's score.

The accessors under "declared capabilities" answer from what plugins declared with their hooks
(``hooks.Declared``), so nothing here or in the actions asks which plugin registered a hook.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cmp_to_key
from typing import TYPE_CHECKING

from scheduler.core.hooks import (
    EvictableFn,
    FitError,
    Hook,
    KeyedBatchScorer,
    PredicateFn,
    SortKeyFn,
    VoteFn,
)
from scheduler.core.registry import HookRegistry
from scheduler.core.resources import Resources
from scheduler.core.state import Job, Node, Queue, Task
from scheduler.core.types import Vote

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

    from scheduler.core.hooks import QueueShares
    from scheduler.core.plugins._quota import QueueAttr


class Dispatch(HookRegistry):
    """The dispatchers of a session; ``Session`` gives them its state."""

    jobs: dict[str, Job]
    queues: dict[str, Queue]
    # Bumped by every tentative operation: "nothing changed since" checks compare it.
    version: int
    # Tasks some predicate judges by the pod itself (not only its scheduling signature).
    unique_predicates: set[str]
    _explain_memo: dict[tuple[str, Resources, int], tuple[bool, str | None]]

    # order dispatchers -----------------------------------------------------------------------
    def job_compare(self, left: Job, right: Job) -> int:
        for fn in self.job_order_fns.enabled:
            result: int = fn(left, right)
            if result:
                return result
        lkey = (left.info.created, left.uid)
        rkey = (right.info.created, right.uid)
        return -1 if lkey < rkey else (1 if lkey > rkey else 0)

    def task_compare(self, left: Task, right: Task) -> int:
        for fn in self.task_order_fns.enabled:
            result: int = fn(left, right)
            if result:
                return result
        lkey = (-left.priority, left.sort_key)
        rkey = (-right.priority, right.sort_key)
        return -1 if lkey < rkey else (1 if lkey > rkey else 0)

    def queue_compare(self, left: Queue, right: Queue) -> int:
        for fn in self.queue_order_fns.enabled:
            result: int = fn(left, right)
            if result:
                return result
        return -1 if left.name < right.name else (1 if left.name > right.name else 0)

    # sort keys: the compare chains above as one tuple, when every enabled plugin gives a key.
    # A key is read once per item, so it is only valid while the items' state stays put: any
    # sort, and a heap whose members do not change while queued (allocate's queues and jobs).
    def job_key_fn(self) -> SortKeyFn[Job] | None:
        return self.job_order_fns.key

    def task_key_fn(self) -> SortKeyFn[Task] | None:
        return self.task_order_fns.key

    def queue_key_fn(self) -> SortKeyFn[Queue] | None:
        return self.queue_order_fns.key

    def sorted_jobs(self, jobs: list[Job]) -> list[Job]:
        if len(jobs) < 2:
            return list(jobs)
        return sorted(jobs, key=self.job_key_fn() or cmp_to_key(self.job_compare))

    def sorted_tasks(self, tasks: list[Task]) -> list[Task]:
        if len(tasks) < 2:  # most jobs have one pod: no key to build
            return list(tasks)
        return sorted(tasks, key=self.task_key_fn() or cmp_to_key(self.task_compare))

    def victim_order(self, victims: list[Task], preemptor: Task | None = None) -> list[Task]:
        """Volcano BuildVictimsPriorityQueue: least important victim first.

        With a preemptor, victims of different queues go by VictimQueueOrderFn: a plugin's
        answer (capacity's hierarchy, ``_victim_order_by_queue``) or else the reverse queue
        order, so the queue the queue order would serve last gives up its pods first (lower
        queue priority, then the larger share) (volcano-sh/volcano
        pkg/scheduler/framework/session_plugins.go BuildVictimsPriorityQueue and
        VictimQueueOrderFn). Within a queue: reverse job order, then reverse task order.
        """
        if len(victims) < 2:
            return list(victims)
        if preemptor is not None and self.victim_queue_order_fns.registered:
            return self._victim_order_by_queue(victims, preemptor)
        if preemptor is not None:
            by_queue: dict[str, list[Task]] = {}
            for task in victims:
                by_queue.setdefault(self.jobs[task.job].queue, []).append(task)
            if len(by_queue) > 1:
                known = [self.queues[name] for name in by_queue if name in self.queues]
                served = sorted(known, key=self.queue_key_fn() or cmp_to_key(self.queue_compare))
                # Pods of a queue the session does not know go first: nothing would serve it.
                names = [name for name in sorted(by_queue) if name not in self.queues]
                names += [queue.name for queue in reversed(served)]
                return [task for name in names for task in self._victim_order(by_queue[name])]
        return self._victim_order(victims)

    def _victim_order(self, victims: list[Task]) -> list[Task]:
        if len(victims) < 2:
            return list(victims)
        job_key, task_key = self.job_key_fn(), self.task_key_fn()
        if job_key is not None and task_key is not None:
            # The compare below, as keys: jobs in reverse job order, a job's own tasks in
            # reverse task order (keys are unique, so reversing keeps nothing to tie-break).
            by_job: dict[str, SupportsRichComparison] = {}

            def key(task: Task) -> tuple[SupportsRichComparison, SupportsRichComparison]:
                found = by_job.get(task.job)
                if found is None:
                    found = by_job[task.job] = job_key(self.jobs[task.job])
                return (found, task_key(task))

            return sorted(victims, key=key, reverse=True)

        def compare(left: Task, right: Task) -> int:
            if left.job == right.job:
                return -self.task_compare(left, right)
            return -self.job_compare(self.jobs[left.job], self.jobs[right.job])

        return sorted(victims, key=cmp_to_key(compare))

    def _victim_order_by_queue(self, victims: list[Task], preemptor: Task) -> list[Task]:
        """BuildVictimsPriorityQueue when a plugin orders victim queues (capacity's hierarchy):
        victims of two queues go by VictimQueueOrderFn, which falls back to the reverse queue
        order; victims of one queue by job then task order, least important first."""
        mine = self.queues.get(self.jobs[preemptor.job].queue)

        def queue_compare(left: Queue, right: Queue, preemptor_queue: Queue) -> int:
            for fn in self.victim_queue_order_fns.enabled:
                result = fn(left, right, preemptor_queue)
                if result:
                    return result
            return -self.queue_compare(left, right)

        def compare(left: Task, right: Task) -> int:
            if left.job == right.job:
                return -self.task_compare(left, right)
            ljob, rjob = self.jobs[left.job], self.jobs[right.job]
            if ljob.queue != rjob.queue and mine is not None:
                return queue_compare(self.queues[ljob.queue], self.queues[rjob.queue], mine)
            return -self.job_compare(ljob, rjob) or -self.task_compare(left, right)

        return sorted(victims, key=cmp_to_key(compare))

    # predicate and scoring --------------------------------------------------------------------
    def predicate(self, task: Task, node: Node) -> FitError | None:
        for fn in self.predicate_fns.enabled:
            error: FitError | None = fn(task, node)
            if error is not None:
                return error
        return None

    def predicate_for_preempt(self, task: Task, node: Node) -> FitError | None:
        """Volcano's PredicateForPreemptAction (pkg/scheduler/framework/session.go): a node
        is out only when its failure is one no eviction resolves (selector, taints, affinity
        to nodes); a conflict with pods that may be evicted keeps it a candidate."""
        for fn in self.predicate_fns.enabled:
            error: FitError | None = fn(task, node)
            if error is not None and not error.resolvable:
                return error
        return None

    def node_scores(self, task: Task, nodes: list[Node]) -> list[tuple[float, Node]]:
        map_fns = self.node_order_fns.enabled
        batch_fns = self.batch_node_order_fns.enabled
        scores = {node.name: 0.0 for node in nodes}
        for fn in batch_fns:
            for name, score in fn(task, nodes).items():
                scores[name] += score
        if map_fns:
            state_only = self.scorers_state_only()
            by_state: dict[tuple[object, ...], float] = {}
            for node in nodes:
                if state_only:
                    # Identical nodes in identical states score alike: score each state once.
                    key = node.state_key()
                    known = by_state.get(key)
                    if known is None:
                        known = by_state[key] = sum(fn(task, node) for fn in map_fns)
                    scores[node.name] += known
                else:
                    scores[node.name] += sum(fn(task, node) for fn in map_fns)
        return [(scores[node.name], node) for node in nodes]

    def best_node(self, task: Task, nodes: list[Node]) -> Node | None:
        """Highest score; equal scores go to the first node in name order."""
        if not nodes:
            return None
        if len(nodes) == 1:
            return nodes[0]
        best, best_score = None, None
        for score, node in self.node_scores(task, nodes):
            if best_score is None or score > best_score + 1e-9:
                best, best_score = node, score
        return best

    def scorers_state_only(self) -> bool:
        """Does every enabled node-order scorer score a node by its ``state_key`` alone?"""
        cached = self._state_only
        if cached is None:
            cached = self._state_only = all(d.state_only for d in self.node_order_fns.declarations)
        return cached

    def map_score(self, task: Task, node: Node) -> float:
        """The sum of the enabled node-order scores (batch scores not included)."""
        score: float = sum(fn(task, node) for fn in self.node_order_fns.enabled)
        return score

    def keyed_batch_scorers(self) -> list[KeyedBatchScorer] | None:
        """The enabled batch scorers when every one is keyed (possibly none), else None."""
        fns = self.batch_node_order_fns.enabled
        keyed = [fn for fn in fns if isinstance(fn, KeyedBatchScorer)]
        return keyed if len(keyed) == len(fns) else None

    def predicates_read_pods(self) -> bool:
        """Does an enabled predicate look at pods on other nodes (``Declared.reads_pods``)?"""
        return any(d.reads_pods for d in self.predicate_fns.declarations)

    def predicate_signature(self, task: Task) -> tuple[object, ...]:
        """Everything predicates look at besides the node (pod affinity makes it unique)."""
        info = task.info
        if info.affinity or info.name in self.unique_predicates:
            return (info.name,)
        if info.gpu_memory:
            # the device fit looks at it too (the request vector carries only its cost)
            return (info.node_selector, info.tolerations, info.gpu_memory)
        return (info.node_selector, info.tolerations)

    def explain_allocatable(self, queue: Queue, task: Task) -> str | None:
        """The quota sentence, or None when the quota is the whole cluster anyway.

        Memoised per (queue, request) until the session changes: a queue at its share fails
        every further job of the same shape, and the sentence costs several vector operations.
        """
        rule = self.quota_rule(queue, task)
        return rule[1] if rule[0] else self.worded_quota(queue, task, rule)

    def quota_rule(self, queue: Queue, task: Task) -> tuple[bool, str | None]:
        """(True, the quota plugin's sentence) or (False, the refusing plugin without one):
        what ``explain_allocatable`` says of the queue and the task's request, before any
        wording that names the task (``worded_quota``)."""
        key = (queue.name, task.resreq, self.version)
        memo = self._explain_memo
        found = memo.get(key)
        if found is None:
            if len(memo) > 4096:
                memo.clear()
            found = memo[key] = self._explain_quota(queue, task)
        return found

    @staticmethod
    def worded_quota(queue: Queue, task: Task, rule: tuple[bool, str | None]) -> str | None:
        """``explain_allocatable``'s sentence from its ``quota_rule``."""
        explained, text = rule
        if explained:
            return text
        suffix = f" ({text})" if text else ""
        return f"queue {queue.name} has no room for {task.name}{suffix}"

    def _explain_quota(self, queue: Queue, task: Task) -> tuple[bool, str | None]:
        """(True, the plugin's sentence) or (False, the refusing plugin without one)."""
        hook = self.allocatable_fns
        declared = hook.declarations
        for fn, name, declaration in zip(hook.enabled, hook.names, declared, strict=True):
            if not fn(queue, task):
                if declaration.explain is not None:
                    return True, declaration.explain(queue, task)
                return False, name
        # Asked after a gang's tentative pods were rolled back, the single pod may fit again:
        # the quota plugin's numbers still explain why the whole gang did not.
        for declaration in declared:
            if declaration.explain is not None:
                return True, declaration.explain(queue, task)
        return False, None

    # declared capabilities ----------------------------------------------------------------------
    def queue_share(self, queue: str) -> QueueAttr | None:
        """The queue's figures from the first quota plugin that has them, else None."""
        for shares in self.queue_shares.values():
            attr = shares.share(queue)
            if attr is not None:
                return attr
        return None

    def binding_quota(self, queue: str) -> tuple[QueueShares, QueueAttr] | None:
        """(quota plugin, the queue's figures) when that plugin's allocatable hook is enabled,
        so its numbers are what limit the queue; else None."""
        attr = self.queue_share(queue)
        if attr is None:
            return None
        for name in self.allocatable_fns.names:
            shares = self.queue_shares.get(name)
            if shares is not None and shares.share(queue) is attr:
                return shares, attr
        return None

    def lasting_filter(self) -> PredicateFn | None:
        """The enabled predicates' lasting parts (``Declared.lasting``) as one check, or None
        when no predicate declares one (then nothing but resources keeps a pod off a node)."""
        filters = [d.lasting for d in self.predicate_fns.declarations if d.lasting is not None]
        if not filters:
            return None
        if len(filters) == 1:
            return filters[0]

        def lasting(task: Task, node: Node) -> FitError | None:
            for check in filters:
                error = check(task, node)
                if error is not None:
                    return error
            return None

        return lasting

    def preemptable_by_preemptor_job(self) -> bool:
        """Does an enabled preemptable hook judge by the preemptor's job itself?"""
        return any(d.by_preemptor_job for d in self.preemptable_fns.declarations)

    def rescheduling_ran(self) -> bool:
        """Did a rescheduling pass register this session (it registers only when due)?"""
        return any(d.rescheduling for _, d in self.victim_tasks_fns.registered.values())

    def sorted_by_score(self, task: Task, nodes: list[Node]) -> list[Node]:
        scored = self.node_scores(task, nodes)
        return [node for _, node in sorted(scored, key=lambda sn: -sn[0])]

    # victim dispatchers -----------------------------------------------------------------------
    def _victims(
        self, hook: Hook[EvictableFn], preemptor: Task, candidates: list[Task]
    ) -> list[Task]:
        for guard in hook.guards:
            candidates, _ = guard(preemptor, candidates)
            if not candidates:
                return []
        victims: list[Task] | None = None
        for tier in hook.tiers:
            victims = None
            initialised = False
            for fn in tier:
                chosen, vote = fn(preemptor, candidates)
                if vote == Vote.ABSTAIN:
                    continue
                if not chosen:
                    victims = None
                    break
                if not initialised:
                    victims, initialised = list(chosen), True
                else:
                    keep = {t.name for t in chosen}
                    kept: list[Task] = victims or []
                    victims = [t for t in kept if t.name in keep]
            if victims:
                return victims
        return victims or []

    def victim_tasks(self) -> Iterator[Task]:
        """Volcano's VictimTasks: every enabled plugin's victims, plugin by plugin (lazily:
        a plugin may look at the evictions made so far)."""
        for fn in self.victim_tasks_fns.enabled:
            yield from fn()

    def preemptable(self, preemptor: Task, candidates: list[Task]) -> list[Task]:
        return self._victims(self.preemptable_fns, preemptor, candidates)

    def reclaimable(self, preemptor: Task, candidates: list[Task]) -> list[Task]:
        return self._victims(self.reclaimable_fns, preemptor, candidates)

    # queue dispatchers ------------------------------------------------------------------------
    # Plain loops rather than any()/all() over generators in the dispatchers asked once per job
    # or task: the generator cost more than the plugins' own checks.
    def overused(self, queue: Queue) -> bool:
        for fn in self.overused_fns.enabled:  # noqa: SIM110
            if fn(queue):
                return True
        return False

    def allocatable(self, queue: Queue, task: Task) -> bool:
        for fn in self.allocatable_fns.enabled:  # noqa: SIM110
            if not fn(queue, task):
                return False
        return True

    def lends(self) -> bool:
        """Does an enabled quota plugin lend idle capacity past a queue's share?"""
        return any(d.lends for d in self.allocatable_fns.declarations)

    def lendable(self, queue: Queue, task: Task) -> bool:
        """``allocatable`` with each lending plugin's hard limits in place of its share."""
        hook = self.allocatable_fns
        for fn, declared in zip(hook.enabled, hook.declarations, strict=True):
            within = declared.within_limits if declared.lends else None
            if not (within(queue, task.resreq) if within is not None else fn(queue, task)):
                return False
        return True

    def within_limits(self, queue: Queue, request: Resources) -> bool:
        """May ``queue`` grow by ``request`` within every quota plugin's hard limits (its
        share aside)? Plugins that declare no limits apart from their share do not object; one
        whose allocatable check is all hard limits (capacity) declares that check."""
        hook = self.allocatable_fns
        for declared in hook.declarations:
            within = declared.within_limits
            if within is not None and not within(queue, request):
                return False
        return True

    def preemptive(self, queue: Queue, task: Task) -> bool:
        return all(fn(queue, task) for fn in self.preemptive_fns.enabled)

    # job dispatchers --------------------------------------------------------------------------
    def job_ready(self, job: Job) -> bool:
        for fn in self.job_ready_fns.enabled:  # noqa: SIM110
            if not fn(job):
                return False
        return True

    def job_pipelined(self, job: Job) -> bool:
        return self._tier_vote(self.job_pipelined_fns, job)

    def job_valid(self, job: Job) -> str | None:
        """None when valid, else the reason."""
        for fn in self.job_valid_fns.enabled:
            reason: str | None = fn(job)
            if reason is not None:
                return reason
        return None

    def job_enqueueable(self, job: Job) -> bool:
        return self._tier_vote(self.job_enqueueable_fns, job)

    def _tier_vote(self, hook: Hook[VoteFn], job: Job) -> bool:
        """Volcano's vote dispatch: any Reject refuses; the first tier with a Permit (and no
        Reject) allows; tiers that only abstain defer to the next; all abstaining allows."""
        for tier in hook.tiers:
            permitted = False
            for fn in tier:
                vote = fn(job)
                if vote < 0:
                    return False
                permitted = permitted or vote > 0
            if permitted:
                return True
        return True

    def job_enqueued(self, job: Job) -> None:
        for fn in self.job_enqueued_fns.enabled:
            fn(job)

    def job_starving(self, job: Job) -> bool:
        for tier in self.job_starving_fns.tiers:
            for fn in tier:  # noqa: SIM110
                if not fn(job):
                    return False
            return True
        return False

    # events -----------------------------------------------------------------------------------
    def fire_allocate(self, task: Task) -> None:
        for handler in self.event_handlers:
            if handler.allocate:
                handler.allocate(task)

    def fire_deallocate(self, task: Task) -> None:
        for handler in self.event_handlers:
            if handler.deallocate:
                handler.deallocate(task)

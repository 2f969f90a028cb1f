"""The plugin extension points: callback types, what a plugin declares about a hook, and one
hook's registrations.

The callback types are named as volcano-sh/volcano pkg/scheduler/api/types.go names them
(``CompareFn``, ``PredicateFn``, ``NodeOrderFn``, ``BatchNodeOrderFn``, ``EvictableFn``,
``ValidateFn``, ``VoteFn``), so each ``Session.add_<hook>_fn`` takes exactly one shape and a
function of another shape fails mypy, as a wrong ``AddJobOrderFn`` argument fails to compile
upstream (framework/session_plugins.go).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeAlias, TypeVar

from scheduler.core.config import PluginOption
from scheduler.core.state import Job, Node, Queue, Task

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

    from scheduler.core.plugins._quota import QueueAttr
    from scheduler.core.resources import Resources
    from scheduler.core.session import Session

_T = TypeVar("_T")
_F = TypeVar("_F")


@dataclass(frozen=True, slots=True)
class FitError:
    """Why a task cannot go on a node; ``resolvable`` says whether evictions could help."""

    reason: str
    resolvable: bool = True


# -1: left first, 1: right first, 0: this plugin does not decide (Volcano's CompareFn)
CompareFn: TypeAlias = Callable[[_T, _T], int]
# A sort key that orders exactly as the plugin's CompareFn compares (equal keys iff it says 0)
SortKeyFn: TypeAlias = "Callable[[_T], SupportsRichComparison]"
# VictimCompareFn: two victims' queues, given the preemptor's queue
VictimQueueOrderFn: TypeAlias = Callable[[Queue, Queue, Queue], int]
# None: the task may go on the node
PredicateFn: TypeAlias = Callable[[Task, Node], FitError | None]
NodeOrderFn: TypeAlias = Callable[[Task, Node], float]
# node name -> score; nodes left out score 0
BatchNodeOrderFn: TypeAlias = Callable[[Task, list[Node]], dict[str, float]]
# (preemptor, candidates) -> (the victims this plugin allows, its Vote)
EvictableFn: TypeAlias = Callable[[Task, list[Task]], tuple[list[Task], int]]
QueueValidateFn: TypeAlias = Callable[[Queue], bool]  # overused
QueueTaskValidateFn: TypeAlias = Callable[[Queue, Task], bool]  # allocatable, preemptive
# may the queue grow by this request within its hard limits (allocatable's within_limits)
QueueRequestFn: TypeAlias = "Callable[[Queue, Resources], bool]"
ValidateFn: TypeAlias = Callable[[Job], bool]  # job ready, job starving
JobValidFn: TypeAlias = Callable[[Job], str | None]  # None when valid, else the reason
VoteFn: TypeAlias = Callable[[Job], int]  # Vote.PERMIT, ABSTAIN or REJECT
JobEventFn: TypeAlias = Callable[[Job], None]  # job enqueued
VictimTasksFn: TypeAlias = Callable[[], Iterable[Task]]
# The sentence saying why a queue refused a task (None: the quota is the whole cluster anyway)
ExplainFn: TypeAlias = Callable[[Queue, Task], str | None]
# (task, node, future_only) -> the device indices it would take, None: the ledger's own choice
GpuPickerFn: TypeAlias = Callable[[Task, Node, bool], tuple[int, ...] | None]
TaskEventFn: TypeAlias = Callable[[Task], None]


@dataclass(frozen=True, slots=True)
class Declared:
    """What a plugin declares about one hook it registers, besides the function.

    The framework reads these instead of asking which plugin registered a hook (Volcano's
    session_plugins.go dispatches on the callbacks alone; the declarations here add what our
    shortcuts and explanations need to know to stay exact). Each registration method takes
    only the declarations its hook has.
    """

    # node_order: the score depends only on ``Node.state_key()`` (and the task), so equal
    # nodes are scored once
    state_only: bool = False
    # predicate: the answer looks at pods on other nodes (pod anti-affinity of running pods),
    # so no NodeIndex class can answer for its members
    reads_pods: bool = False
    # predicate: the part of the check no eviction or uncordon resolves (selector, node
    # affinity, taints)
    lasting: PredicateFn | None = None
    # allocatable: the sentence saying why the queue refused the task
    explain: ExplainFn | None = None
    # allocatable: whether a queue may grow by a request within its hard limits, past its
    # share (None: the plugin has no share apart from its limits)
    within_limits: QueueRequestFn | None = None
    # allocatable: the plugin lends idle capacity past a queue's share, within those limits
    lends: bool = False
    # preemptable: the verdict depends on the preemptor's job itself, not only on its
    # request and priority (drf compares the job's dominant share with each victim's)
    by_preemptor_job: bool = False
    # victim_tasks: the hook is the periodic rescheduling pass, reported in the cycle result
    rescheduling: bool = False
    # preemptable/reclaimable: the pods it leaves out are protected whatever the tiers say
    # (cdp's minimum run time). Volcano walks the tiers and moves on to the next tier when one
    # leaves no victim, so a protected pod could still be chosen there; a guard filters the
    # candidates before any tier is asked.
    guards: bool = False


NOTHING_DECLARED = Declared()


@dataclass(slots=True)
class EventHandler:
    """Volcano's EventHandler: told when the session allocates or deallocates a task."""

    allocate: TaskEventFn | None = None
    deallocate: TaskEventFn | None = None


class KeyedBatchScorer:
    """A batch node-order function whose score for a node depends only on ``node_key(node)``:
    ``by_key(task)`` maps keys to scores, other keys score 0. Allocate can then score one node
    per (class, key) instead of every node, with the same sums."""

    __slots__ = ("node_key", "by_key")

    def __init__(
        self,
        node_key: Callable[[Node], Hashable],
        by_key: Callable[[Task], dict[Hashable, float]],
    ):
        self.node_key = node_key
        self.by_key = by_key

    def __call__(self, task: Task, nodes: list[Node]) -> dict[str, float]:
        by_key = self.by_key(task)
        if not by_key:
            return {}
        node_key = self.node_key
        return {n.name: by_key[k] for n in nodes if (k := node_key(n)) in by_key}


class QueueShares(Protocol):
    """A quota plugin's per-queue figures (proportion, capacity), registered with
    ``Session.add_queue_shares``."""

    @property
    def binds_deserved(self) -> bool:
        """True when a queue is held to its deserved share, False when to its real capability
        (capacity lends up to it)."""
        ...

    @property
    def divides_tree(self) -> bool:
        """True when deserved shares are divided down a queue tree by weight, so a queue's
        real limit also depends on its siblings' demand."""
        ...

    def share(self, queue: str) -> QueueAttr | None: ...


class Plugin(Protocol):
    """A built plugin (Volcano's framework.Plugin): it registers its hooks when a session
    opens."""

    def on_session_open(self, ssn: Session) -> None: ...


class Hook(Generic[_F]):
    """One extension point: every plugin's registration, and the enabled ones in conf order.

    The enabled lists are worked out when a plugin registers (a handful of times per session),
    so a dispatcher, asked thousands of times, only reads them.
    """

    __slots__ = (
        "_conf",
        "_flag",
        "registered",
        "enabled",
        "names",
        "declarations",
        "tiers",
        "guards",
    )

    def __init__(self, conf: tuple[tuple[PluginOption, ...], ...], flag: str | None) -> None:
        self._conf = conf
        self._flag = flag  # the enable flag that switches it (None: always on)
        self.registered: dict[str, tuple[_F, Declared]] = {}
        self.enabled: list[_F] = []
        self.names: list[str] = []  # the plugin of each enabled fn
        self.declarations: list[Declared] = []  # what each enabled fn's plugin declared
        self.tiers: list[list[_F]] = []  # the enabled fns per tier that has one, guards aside
        self.guards: list[_F] = []  # the enabled fns declared ``guards``, asked before the tiers

    def add(self, plugin: str, fn: _F, declared: Declared = NOTHING_DECLARED) -> None:
        self.registered[plugin] = (fn, declared)
        self._enable()

    def _enable(self) -> None:
        flag, registered = self._flag, self.registered
        enabled: list[tuple[int, str]] = [
            (t_index, option.name)
            for t_index, tier in enumerate(self._conf)
            for option in tier
            if option.name in registered and not (flag and not option.enabled(flag))
        ]
        self.enabled = [registered[name][0] for _, name in enabled]
        self.names = [name for _, name in enabled]
        self.declarations = [registered[name][1] for _, name in enabled]
        self.guards = [registered[name][0] for _, name in enabled if registered[name][1].guards]
        by_tier: dict[int, list[_F]] = {}
        for t_index, name in enabled:
            if not registered[name][1].guards:
                by_tier.setdefault(t_index, []).append(registered[name][0])
        self.tiers = [by_tier[i] for i in sorted(by_tier)]


class OrderHook(Hook[CompareFn[_T]], Generic[_T]):
    """An order extension point. A plugin may add a sort key besides its compare function;
    when every enabled one has, ``key`` is the whole compare chain as one key (the plugins'
    keys, then ``fallback``), so sorting needs no compare calls."""

    __slots__ = ("_fallback", "keys", "key")

    def __init__(
        self,
        conf: tuple[tuple[PluginOption, ...], ...],
        flag: str | None,
        fallback: SortKeyFn[_T],
    ) -> None:
        self._fallback = fallback
        self.keys: dict[str, SortKeyFn[_T]] = {}
        self.key: SortKeyFn[_T] | None = None
        super().__init__(conf, flag)
        self._enable()

    def add_keyed(self, plugin: str, fn: CompareFn[_T], key: SortKeyFn[_T] | None) -> None:
        if key is None:
            self.keys.pop(plugin, None)
        else:
            self.keys[plugin] = key
        self.add(plugin, fn)

    def _enable(self) -> None:
        super()._enable()
        keys = self.keys
        if all(name in keys for name in self.names):
            self.key = _chain_key(tuple(keys[name] for name in self.names), self._fallback)
        else:
            self.key = None


def _chain_key(parts: tuple[SortKeyFn[_T], ...], fallback: SortKeyFn[_T]) -> SortKeyFn[_T]:
    """One tuple of the parts' keys and the fallback's. Spelled out for the usual one to three
    plugins: a key is read for every job of a sort or a push, and the generic form's generator
    cost as much as the keys themselves."""
    if len(parts) == 1:
        (first,) = parts
        return lambda item: (first(item), fallback(item))
    if len(parts) == 2:
        first, second = parts
        return lambda item: (first(item), second(item), fallback(item))
    if len(parts) == 3:
        first, second, third = parts
        return lambda item: (first(item), second(item), third(item), fallback(item))
    return lambda item: (*(part(item) for part in parts), fallback(item))

"""gpufrag: place pods where they fragment the cluster's GPUs least (FGD's node score).

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
Gradient Descent", USENIX ATC '23; the measure follows the authors' simulator
(hkust-adsl/kubernetes-scheduler-simulator, Apache-2.0: pkg/utils/frag.go GetTypicalPods,
NodeGpuShareFragAmount, FragAmountSumExceptQ3; pkg/simulator/plugin/fgd_score.go), the same
definitions as the replay's numpy reference (bench/replay/fragmentation.py).

A node's fragmentation is the expected number of its idle milli-GPUs that a pod drawn from the
workload's typical pods could not use: per typical pod type (popularity p), all idle milli when
the type asks no GPU or the node cannot host it (too few cards with its per-card share left, or
too little CPU), else only the milli left on cards with less left than its share. The score of
a node for a pod is ``int(sigmoid((frag before - frag after) / 1000) x 100)`` (times
``gpufrag.weight``): a placement that leaves less fragmentation scores higher. For a share of
one card every card that fits is tried and the pod takes the first best (lowest index among the
best): the plugin tells the session which card (``Session.add_gpu_picker``).

Typical pods: every pod of the snapshot (running and pending) by (cpu, per-card milli-GPU, card
count, GPU-model constraint), most popular first, the smallest prefix covering
``gpufrag.threshold`` percent, as GetTypicalPods with the published experiments' settings.
``typical`` may be set after session open by a caller that knows the workload better (the trace
replay sets the trace's).

GPU-model constraint: FGD's ``gpu_spec`` (the models a pod may use; a node of another model
counts all its idle milli as fragmented for that type, IsNodeAccessibleToPodByType). The core
states models through node labels, so a type's constraint is its pods' node selector and
required node affinity, kept as stated (pods listing other models, or the same models in
another order, are other types, as distinct ``gpu_spec`` strings are in the simulator); the
models it allows are those of the cards on the nodes whose labels it admits. Access then
depends only on a node's card models, which are part of its state key, so the score stays a
function of the node's state.

Arguments:
- ``gpufrag.weight`` (1): multiplies the 0..100 score, as with Volcano's plugin weights, so it
  can sit in a tier with binpack or nodeorder.
- ``gpufrag.threshold`` (95): popularity percent the typical pods cover.
- ``gpufrag.cpuPods`` (true): whether CPU-only pods count among the typical pods (FGD's
  isInvolvedCpuPods).
- ``gpufrag.tieBreak`` (none): ``fill`` orders nodes within one FGD score bucket by the share
  of their cards that are wholly free, smallest first (the replay's ``fgd-fill``; 0.05-0.10
  points above FGD on the openb lists); ``none`` leaves ties to the node order.

Memory is not part of the measure (as in FGD). Pure Python: node states are memoised by what the
measure depends on (the CPU left as a count of typical CPU requests it covers, which typical
types the node's card models admit, and the multiset of milli left per card), and the session
memoises a node class's score per pod shape.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.core.config import ConfigError, int_arg
from scheduler.core.devices import FULL
from scheduler.core.plugins.predicates import node_affinity_matches, node_selector_terms
from scheduler.core.resources import CPU
from scheduler.core.session import Session
from scheduler.core.state import Node, Task

PLUGIN_NAME = "gpufrag"
MAX_NODE_SCORE = 100
_FILL_SCALE = 0.5  # the fill tie-break's share of one score point

Expression = tuple[str, str, tuple[str, ...]]  # key, operator, values


@dataclass(frozen=True, slots=True)
class NodeConstraint:
    """What a pod asks of a node's labels: its node selector and required node affinity, the
    core's form of FGD's ``gpu_spec``. Equal when stated alike, value for value."""

    selector: tuple[tuple[str, str], ...]
    terms: tuple[tuple[Expression, ...], ...]
    affinity: Any = field(default=None, compare=False)  # as stated, for matching

    @classmethod
    def of(cls, node_selector: Iterable[tuple[str, str]], affinity: Any) -> NodeConstraint | None:
        """The constraint of a pod with this selector and affinity (None: it has none)."""
        terms = tuple(
            tuple(
                (
                    str(e.get("key", "")),
                    str(e.get("operator", "In")),
                    tuple(map(str, e.get("values") or ())),
                )
                for e in term.get("matchExpressions") or []
            )
            for term in node_selector_terms(affinity)
        )
        selector = tuple(sorted(node_selector))
        if not selector and not terms:
            return None
        return cls(selector, terms, affinity)

    @property
    def text(self) -> str:
        """Orders types as the simulator's GpuType string does: one ``In`` expression reads
        ``key In A|B``, so constraints on one label compare as their value lists."""
        parts = [f"{key}={value}" for key, value in self.selector]
        parts += [
            " & ".join(f"{key} {operator} {'|'.join(values)}" for key, operator, values in term)
            for term in self.terms
        ]
        return "; ".join(parts)

    def admits(self, labels: dict[str, str]) -> bool:
        return all(labels.get(key) == value for key, value in self.selector) and (
            node_affinity_matches(self.affinity, labels)
        )


def _card_models(node: Node) -> tuple[str, ...]:
    ledger = node.devices
    return tuple(sorted({d.model for d in ledger.devices})) if ledger is not None else ()


class TypicalPods:
    """Typical pod types as parallel tuples, plus the derived per-level tables."""

    __slots__ = (
        "cpu",
        "milli",
        "num",
        "count",
        "constraint",
        "specs",
        "spec_of",
        "total",
        "cpu_cuts",
        "levels",
        "types",
    )

    def __init__(
        self,
        shapes: Iterable[tuple[int, int, int, int]],
        constraints: Sequence[NodeConstraint | None] = (),
    ):
        shapes = list(shapes)  # (cpu, milli per card, cards, pods of the type)
        self.cpu = tuple(s[0] for s in shapes)
        self.milli = tuple(s[1] for s in shapes)
        self.num = tuple(s[2] for s in shapes)
        self.count = tuple(s[3] for s in shapes)
        self.constraint = tuple(constraints) or (None,) * len(shapes)
        # the distinct constraints, and each type's index among them (-1: none)
        self.specs = tuple(dict.fromkeys(c for c in self.constraint if c is not None))
        position = {c: i for i, c in enumerate(self.specs)}
        self.spec_of = tuple(-1 if c is None else position[c] for c in self.constraint)
        self.total = sum(self.count)
        self.cpu_cuts = tuple(sorted(set(self.cpu)))
        self.levels = tuple(sorted({m for m in self.milli if m > 0}))
        level_of = {m: i for i, m in enumerate(self.levels)}
        # (level index or -1 for CPU-only, cards, position of its cpu among cpu_cuts + 1, count)
        self.types = tuple(
            (
                level_of.get(m, -1) if m > 0 else -1,
                n,
                bisect.bisect_left(self.cpu_cuts, c) + 1,
                k,
            )
            for c, m, n, k in shapes
        )

    @classmethod
    def from_pods(
        cls,
        pods: Iterable[tuple[int, int, int, NodeConstraint | None]],
        threshold: float = 0.95,
        cpu_pods: bool = True,
    ) -> TypicalPods:
        """GetTypicalPods: pods as (cpu, per-card milli, cards, constraint); most popular
        first, ties to the larger shape, then the larger constraint text (sort.Reverse of Less,
        whose last key is the GpuType string), the smallest prefix covering ``threshold``."""
        counts: Counter[tuple[int, int, int, NodeConstraint | None]] = Counter()
        for cpu, milli, num, constraint in pods:
            if not cpu_pods and num == 0:
                continue
            counts[(int(cpu), int(milli), int(num), constraint)] += 1
        total = sum(counts.values())

        def less(item: tuple[tuple[int, int, int, NodeConstraint | None], int]) -> tuple[Any, ...]:
            (cpu, milli, num, constraint), count = item
            return (count, cpu, milli, num, "" if constraint is None else constraint.text)

        ordered = sorted(counts.items(), key=less, reverse=True)
        chosen, constraints, covered = [], [], 0
        for (cpu, milli, num, constraint), count in ordered:
            if covered >= threshold * total:
                break
            chosen.append((cpu, milli, num, count))
            constraints.append(constraint)
            covered += count
        return cls(chosen, constraints)

    def __len__(self) -> int:
        return len(self.count)


def admitted_models(specs: Sequence[NodeConstraint], nodes: Iterable[Node]) -> list[set[str]]:
    """Per constraint, the models of the cards on the nodes whose labels it admits."""
    groups: dict[tuple[Any, ...], tuple[dict[str, str], tuple[str, ...]]] = {}
    for node in nodes:
        models = _card_models(node)
        if models:
            groups.setdefault((node.info.labels, models), (node.labels, models))
    admitted: list[set[str]] = [set() for _ in specs]
    for labels, models in groups.values():
        for i, spec in enumerate(specs):
            if spec.admits(labels):
                admitted[i].update(models)
    return admitted


class Fragmentation:
    """FragAmountSumExceptQ3 of node states, memoised by (cpu bucket, access row, sorted milli
    left). An access row is the typical types a node's card models admit; row 0 admits every
    type (every node, when no type carries a constraint)."""

    def __init__(self, typical: TypicalPods, nodes: Iterable[Node] = ()):
        self.typical = typical
        self.memo: dict[tuple[int, int, tuple[int, ...]], float] = {}
        # per row: (the types it admits, the pods of the types it does not)
        self.rows: list[tuple[tuple[tuple[int, int, int, int], ...], int]] = [(typical.types, 0)]
        self.row_of: dict[str, int] = {}  # node name -> its row, where it is not 0
        if typical.specs:
            nodes = list(nodes)
            admitted = admitted_models(typical.specs, nodes)
            by_models: dict[tuple[str, ...], int] = {}
            for node in nodes:
                models = _card_models(node)
                row = by_models.get(models)
                if row is None:
                    row = by_models[models] = self._row(admitted, models)
                if row:
                    self.row_of[node.name] = row

    def _row(self, admitted: list[set[str]], models: tuple[str, ...]) -> int:
        tp = self.typical
        types, blocked = [], 0
        for kind, spec in zip(tp.types, tp.spec_of, strict=True):
            if spec < 0 or all(m in admitted[spec] for m in models):
                types.append(kind)
            else:
                blocked += kind[3]
        if not blocked:
            return 0
        self.rows.append((tuple(types), blocked))
        return len(self.rows) - 1

    def of(self, cpu_left: float, left: tuple[int, ...], row: int = 0) -> float:
        """The fragmentation (milli-GPU) of a node with ``cpu_left``, cards ``left`` and access
        ``row``."""
        tp = self.typical
        bucket = bisect.bisect_right(tp.cpu_cuts, cpu_left)
        key = (bucket, row, tuple(sorted(left)))
        found = self.memo.get(key)
        if found is not None:
            return found
        if not tp.total:
            self.memo[key] = 0.0
            return 0.0
        total = sum(left)
        hosts: list[int] = []
        small: list[int] = []
        for level in tp.levels:
            n, rest = 0, 0
            for value in left:
                if value >= level:
                    n += 1
                else:
                    rest += value
            hosts.append(n)
            small.append(rest)
        types, blocked = self.rows[row]
        frag = total * blocked  # an integer sum, divided once: exact, as the numpy reference's
        for level, num, cpu_rank, count in types:
            # cpu_ok: the CPU left covers the type's request, i.e. its rank is within bucket
            if level >= 0 and cpu_rank <= bucket and hosts[level] >= num:
                frag += small[level] * count
            else:
                frag += total * count
        result = self.memo[key] = frag / tp.total
        return result

    def of_node(self, node: Node) -> float:
        """The fragmentation of ``node`` as it stands (0 without cards)."""
        ledger = node.devices
        if ledger is None:
            return 0.0
        left = tuple(FULL - v for v in ledger.now)
        return self.of(node.idle.get(CPU), left, self.row_of.get(node.name, 0))


def fgd_score(delta: float) -> int:
    """fgd_score.go: int(sigmoid(delta / 1000) x 100)."""
    return math.floor(1.0 / (1.0 + math.exp(-delta / FULL)) * MAX_NODE_SCORE)


class GpuFragPlugin:
    name = PLUGIN_NAME

    def __init__(self, weight: int, threshold: int, cpu_pods: bool, tie_break: str = "none"):
        self.weight = weight
        self.threshold = threshold
        self.cpu_pods = cpu_pods
        self.fill = tie_break == "fill"
        self.typical: TypicalPods | None = None
        self._frag: Fragmentation | None = None
        self._nodes: list[Node] = []  # the session's: they decide what constraints admit

    # the workload --------------------------------------------------------------------------
    def set_typical(self, typical: TypicalPods) -> None:
        self.typical, self._frag = typical, Fragmentation(typical, self._nodes)

    def on_session_open(self, ssn: Session) -> None:
        if not self.weight:
            return
        self._nodes = ssn.node_list
        shapes = []
        # pods of one spec share their selector and affinity objects: one constraint each
        constraints: dict[tuple[int, Any], NodeConstraint | None] = {}
        for task in ssn.tasks.values():
            info = task.info
            constraint = None
            if info.affinity is not None or info.node_selector:
                key = (id(info.affinity), info.node_selector)
                if key not in constraints:
                    constraints[key] = NodeConstraint.of(info.node_selector, info.affinity)
                constraint = constraints[key]
            need = task.gpu
            cpu = int(task.resreq.get(CPU))
            if need is None or need.invalid:
                shapes.append((cpu, 0, 0, constraint))
            elif need.shared:
                shapes.append((cpu, need.milli, 1, constraint))
            else:
                shapes.append((cpu, FULL, need.whole, constraint))
        self.set_typical(TypicalPods.from_pods(shapes, self.threshold / 100, self.cpu_pods))
        ssn.add_node_order_fn(self.name, self.score, state_only=True)
        ssn.add_gpu_picker(self.pick)

    # scoring -------------------------------------------------------------------------------
    def _options(
        self, frag: Fragmentation, task: Task, node: Node
    ) -> tuple[float, list[tuple[int, int]]]:
        """(frag before, [(score, card position)] for every way the pod can land here)."""
        ledger = node.devices
        left = tuple(FULL - v for v in ledger.now) if ledger is not None else ()
        row = frag.row_of.get(node.name, 0)
        cpu_left = node.idle.get(CPU)
        before = frag.of(cpu_left, left, row)
        cpu_after = cpu_left - task.resreq.get(CPU)
        need = task.gpu
        if need is None or need.invalid or ledger is None:
            return before, [(fgd_score(before - frag.of(cpu_after, left, row)), -1)]
        if not need.shared:
            taken, after = 0, list(left)
            for i, value in enumerate(after):
                if taken == need.whole:
                    break
                if value == FULL:
                    after[i] = 0
                    taken += 1
            return before, [(fgd_score(before - frag.of(cpu_after, tuple(after), row)), -1)]
        options, seen = [], set()
        milli = need.milli
        for i, value in enumerate(left):
            # cards with equal milli left give equal states: the first of each is enough
            if value < milli or value in seen:
                continue
            seen.add(value)
            after = list(left)
            after[i] = value - milli
            options.append((fgd_score(before - frag.of(cpu_after, tuple(after), row)), i))
        return before, options

    def score(self, task: Task, node: Node) -> float:
        """Depends only on the task and the node's cards, CPU left and allocatable."""
        if self._frag is None:
            return 0.0
        _, options = self._options(self._frag, task, node)
        if not options:
            return 0.0
        score = float(max(score for score, _ in options) * self.weight)
        if self.fill:
            # Below one point, so it only orders nodes in the same FGD bucket: the node with the
            # smallest share of wholly free cards first (keeps idle cards together for
            # multi-card pods); equal shares still go by name.
            ledger = node.devices
            cards = len(ledger.now) if ledger is not None else 0
            free = sum(1 for held in ledger.now if held == 0) if ledger is not None else 0
            score += _FILL_SCALE * (1 - free / max(cards, 1))
        return score

    def pick(self, task: Task, node: Node, future_only: bool) -> tuple[int, ...] | None:
        """For a share placed now: the first card with the best score (None otherwise: the
        ledger's choice, which for whole cards is FGD's too, the lowest free ones)."""
        need, ledger, frag = task.gpu, node.devices, self._frag
        if future_only or need is None or not need.shared or need.memory:
            return None
        if frag is None or ledger is None:
            return None
        _, options = self._options(frag, task, node)
        if not options:
            return None
        best = max(score for score, _ in options)
        position = min(i for score, i in options if score == best)
        return (ledger.devices[position].index,)


def build(arguments: dict[str, Any]) -> GpuFragPlugin:
    weight = int_arg(arguments, "gpufrag.weight", 1)
    if weight < 0:
        raise ConfigError("gpufrag.weight", f"expected a non-negative weight, got {weight}")
    threshold = int_arg(arguments, "gpufrag.threshold", 95)
    if not 1 <= threshold <= 100:
        raise ConfigError("gpufrag.threshold", f"expected a percent in 1..100, got {threshold}")
    tie_break = str(arguments.get("gpufrag.tieBreak", "none"))
    if tie_break not in ("none", "fill"):
        raise ConfigError("gpufrag.tieBreak", f"expected none or fill, got {tie_break!r}")
    raw = arguments.get("gpufrag.cpuPods", True)
    if not isinstance(raw, bool):
        if str(raw).lower() not in ("true", "false"):
            raise ConfigError("gpufrag.cpuPods", f"expected true or false, got {raw!r}")
        raw = str(raw).lower() == "true"
    return GpuFragPlugin(weight, threshold, raw, tie_break)

"""Replay of Alibaba's openb pod lists with the FGD methodology, one pod at a time.

Methodology (Weng et al., ATC '23; /work/shared/traces/README.md): shuffle the pod list with
each seed, append random copies until the GPU request reaches ``inflate`` x capacity, place the
pods in that order, never remove any; a pod that does not fit fails. GPU allocation ratio =
allocated milli-GPU / cluster milli-GPU, sampled at each integer percentage of arrived GPU
request (the columns of FGD's expected_results CSVs).

The harness keeps its own per-device ledger (milli-GPU left per device), because fractional GPUs
are not in the core yet. Baseline policies are re-derived from the FGD authors' simulator,
hkust-adsl/kubernetes-scheduler-simulator (Apache-2.0), pkg/simulator/plugin/:
random_score.go, best_fit_score.go (+ plugin_utils.go NormalizeScore), dot_product_score.go
(+ pkg/utils/utils.go GenerateSchedulingMatchGroups, pkg/type/resource.go
ToVirtualNodeResourceList; experiment defaults dimExt "share", norm "max", gpusel "best" from
scripts/generate_config_and_run.py), gpu_packing_score.go, gpu_clustering_score.go
(+ open-gpu-share utils GetGpuAffinityFromPodAnnotation), fgd_score.go. Each plugin returns an
integer score (Go's int64 truncation is kept: it decides ties), and selectHost picks among the
top-scored nodes. Upstream Kubernetes picks uniformly at random (with that, FGD loses about 5.6
points on seed 42); the simulator's fork gives the tie to the smallest node name, and the
simulator prefixes every node name with a per-seed random rank (see ``node_rank``). So ties go
to a random node order that is fixed for a run (``tie_break="name"``, the default).
``tie_break="first"`` (the CSV order, the earlier default) stays available for comparison.
"""

from __future__ import annotations

import csv
import hashlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.replay.fragmentation import (
    MILLI,
    TypicalPods,
    access_matrix,
    node_frag,
    typical_pods,
)
from scheduler.core.plugins.binpack import MAX_NODE_SCORE

MAX_SPEC_CPU = 128000  # open-gpu-share utils MaxSpecCpu
MAX_SPEC_GPU = 8000  # MaxSpecGpu
G = 8  # devices per node in the ledger (absent devices hold 0 milli)
POLICIES = (
    "random",
    "firstfit",
    "dotprod",
    "gpuclustering",
    "gpupacking",
    "bestfit",
    "fgd",
    "binpack",
    "binpack-gpu",
    "fgd-bf",
    "fgd-pack",
    "fgd-fill",
)
PUBLISHED_NAMES = {
    "random": "01-Random",
    "dotprod": "02-DotProd",
    "gpuclustering": "03-GpuClustering",
    "gpupacking": "04-GpuPacking",
    "bestfit": "05-BestFit",
    "fgd": "06-FGD",
}
# policies held to another's published curve: the core plugin gpufrag is FGD
PUBLISHED_ALIASES = {"gpufrag": "fgd"}
# Seed conf (scheduler/core/config.py DEFAULT_CONF_TEXT): binpack.cpu 2, memory 2, gpu 20.
BINPACK_WEIGHTS = {"cpu": 2, "memory": 2, "gpu": 20}
# GPU only: the best of the weight grid under the old CSV-order tie-break, see BinpackGpuPolicy.
BINPACK_GPU_WEIGHTS = {"cpu": 0, "memory": 0, "gpu": 1}
BINPACK_WEIGHT = 10
# Run only when asked for by name (--policy): they explain a result, they are not candidates.
DIAGNOSTIC_POLICIES = ("binpack+bestfit-whole", "binpack+bestfit-shared")
DEFAULT_SEEDS = tuple(range(42, 52))  # the published runs use seeds 42..51


# inputs -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cluster:
    names: tuple[str, ...]
    cpu: np.ndarray
    mem: np.ndarray
    ngpu: np.ndarray
    models: tuple[str, ...]

    @property
    def gpu_capacity_milli(self) -> int:
        return int(self.ngpu.sum()) * MILLI


@dataclass(frozen=True)
class PodList:
    cpu: np.ndarray
    mem: np.ndarray
    num: np.ndarray
    milli: np.ndarray  # per GPU: 1000 for whole GPUs, < 1000 for a shared device
    spec: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.cpu)


def load_nodes(path: Path) -> Cluster:
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return Cluster(
        names=tuple(r["sn"] for r in rows),
        cpu=np.array([int(r["cpu_milli"]) for r in rows], dtype=np.int64),
        mem=np.array([int(r["memory_mib"]) for r in rows], dtype=np.int64),
        ngpu=np.array([int(r["gpu"]) for r in rows], dtype=np.int64),
        models=tuple(r.get("model", "") or "" for r in rows),
    )


def load_pods(path: Path) -> PodList:
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    num = np.array([int(r["num_gpu"]) for r in rows], dtype=np.int64)
    milli = np.array([int(r["gpu_milli"]) for r in rows], dtype=np.int64)
    milli = np.where(num == 0, 0, milli)
    return PodList(
        cpu=np.array([int(r["cpu_milli"]) for r in rows], dtype=np.int64),
        mem=np.array([int(r["memory_mib"]) for r in rows], dtype=np.int64),
        num=num,
        milli=milli,
        spec=tuple((r.get("gpu_spec") or "") for r in rows),
    )


def arrival_order(pods: PodList, capacity_milli: int, seed: int, inflate: float) -> np.ndarray:
    """Shuffle with ``seed``, then append uniformly drawn copies until the GPU request reaches
    ``inflate`` x capacity (a list already above it is used whole)."""
    rng = np.random.default_rng(seed)
    order = list(rng.permutation(len(pods)))
    gpu = pods.num * pods.milli
    total = int(gpu.sum())
    target = inflate * capacity_milli
    while total < target:
        i = int(rng.integers(len(pods)))
        order.append(i)
        total += int(gpu[i])
    return np.array(order, dtype=np.int64)


def node_rank(n: int, seed: int) -> np.ndarray:
    """The simulator's tie-break order of the nodes for one seed (lower wins).

    pkg/simulator/simulator.go syncClusterResourceList sorts the nodes by name, then renames
    node i to fmt.Sprintf("%04d-", perm[i]) + name with perm = rand.Perm(len(nodes)) (math/rand
    seeded with the run's seed in core.go Simulate); the simulator's Kubernetes fork
    (mental2008/kubernetes v1.20.5-minor, generic_scheduler.go selectHost) gives a tie to the
    lexicographically smallest node name. So ties go to a random node order, fixed for the
    whole run and drawn anew with every seed; not to the CSV order. Go's generator is not
    reproduced: this draws the permutation from its own numpy stream, separate from the
    arrival order's."""
    return np.random.default_rng([seed, 1]).permutation(n)


# the ledger -------------------------------------------------------------------------------------
class Ledger:
    """Per-node CPU/memory left and per-device milli-GPU left."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.cpu_left = cluster.cpu.copy()
        self.mem_left = cluster.mem.copy()
        n = len(cluster.names)
        self.gpu_left = np.zeros((n, G), dtype=np.int64)
        for i, k in enumerate(cluster.ngpu):
            self.gpu_left[i, :k] = MILLI
        self.affinity = np.zeros((n, 16), dtype=np.int64)  # pods per GPU-clustering tag
        self.allocated_milli = 0
        self.modified = np.zeros(n, dtype=np.int64)  # step of last change per node
        self.step = 1
        # Per-node summaries of gpu_left, kept up to date by place(): every pod's filter and
        # most scores read them, and recomputing them over (nodes, G) per pod dominated the run.
        self.max_left = self.gpu_left.max(axis=1)
        self.full = (self.gpu_left == MILLI).sum(axis=1)
        self.total_left = self.gpu_left.sum(axis=1)
        self.sorted_left = np.sort(self.gpu_left, axis=1)  # ascending

    def fits(self, cpu: int, mem: int, num: int, milli: int, access: np.ndarray) -> np.ndarray:
        ok = (self.cpu_left >= cpu) & (self.mem_left >= mem) & access
        if num == 0:
            return ok
        if milli < MILLI:
            return ok & (self.max_left >= milli)
        return ok & (self.full >= num)

    def place(
        self, node: int, cpu: int, mem: int, num: int, milli: int, device: int | None
    ) -> tuple[int, ...]:
        """Book the pod; returns the devices it took."""
        self.cpu_left[node] -= cpu
        self.mem_left[node] -= mem
        taken: tuple[int, ...] = ()
        if num:
            row = self.gpu_left[node]
            if milli < MILLI:
                if device is None:
                    device = best_fit_device(row, milli)
                if row[device] < milli:
                    raise ValueError(f"device {device} of node {node} has {row[device]} < {milli}")
                row[device] -= milli
                taken = (int(device),)
            else:
                free = np.flatnonzero(row == MILLI)[:num]
                if len(free) < num:
                    raise ValueError(f"node {node} has {len(free)} free GPUs < {num}")
                row[free] = 0
                taken = tuple(int(d) for d in free)
            self.affinity[node, affinity_tag(num, milli)] += 1
            left = sorted(row.tolist())
            self.max_left[node] = left[-1]
            self.full[node] = left.count(MILLI)
            self.total_left[node] = sum(left)
            self.sorted_left[node] = left
        self.allocated_milli += num * milli
        self.modified[node] = self.step
        self.step += 1
        return taken


def best_fit_device(row: np.ndarray, milli: int) -> int:
    """gpusel "best": the device with the least milli left that still fits (lowest index)."""
    masked = np.where(row >= milli, row, 10 * MILLI)
    return int(np.argmin(masked))


def affinity_tag(num: int, milli: int) -> int:
    """GetGpuAffinityFromPodAnnotation: share-gpu (0) or "<n>-gpu" (n)."""
    return 0 if milli < MILLI else min(num, 15)


def exclusive_take(gpu_left: np.ndarray, num: int) -> np.ndarray:
    """AllocateExclusiveGpuId on many rows: the first ``num`` fully free devices."""
    full = gpu_left == MILLI
    return full & (np.cumsum(full, axis=1) <= num)


class FragTracker:
    """Current FGD fragmentation of every node, and of hypothetical node states.

    A placement only marks its node stale; stale nodes are recomputed when the fragmentation
    is next read (at each arrived percentage, or batched with a fragmentation-aware policy's
    own evaluations). Results are memoised by what the measure depends on: the multiset of
    milli left per device, the node's access row, and how many of the typical pods' CPU
    requests the CPU left covers. About 95% of the evaluations of a run repeat a state seen
    before, and node_frag's per-call overhead, not its size, dominated the run time.
    """

    def __init__(self, ledger: Ledger, typical: TypicalPods, node_access: np.ndarray):
        self.ledger, self.typical, self.node_access = ledger, typical, node_access
        _, access_class = np.unique(node_access, axis=0, return_inverse=True)
        self._access_class = access_class.reshape(-1).astype(np.int64)
        self._cpu_cuts = np.unique(typical.cpu)
        self._memo: dict[bytes, float] = {}
        self._stale: set[int] = set()
        every = np.arange(len(ledger.cpu_left))
        self._frag = self._lookup(every, ledger.cpu_left, ledger.gpu_left)

    def node_changed(self, node: int) -> None:
        self._stale.add(node)

    @property
    def frag(self) -> np.ndarray:
        if self._stale:
            self.evaluate(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, G), np.int64))
        return self._frag

    def evaluate(self, nodes, cpu_left, gpu_left) -> np.ndarray:
        """node_frag of the states (cpu_left, gpu_left) on ``nodes`` (their GPU model decides
        access), batched with the refresh of stale nodes."""
        lg = self.ledger
        n_stale = len(self._stale)
        if n_stale:
            stale = np.fromiter(sorted(self._stale), dtype=np.int64, count=n_stale)
            self._stale.clear()
            nodes = np.concatenate((stale, nodes))
            cpu_left = np.concatenate((lg.cpu_left[stale], cpu_left))
            gpu_left = np.concatenate((lg.gpu_left[stale], gpu_left))
        out = self._lookup(nodes, cpu_left, gpu_left)
        if n_stale:
            self._frag[stale] = out[:n_stale]
        return out[n_stale:]

    def _lookup(self, nodes, cpu_left, gpu_left) -> np.ndarray:
        if len(nodes) == 0:
            return np.zeros(0)
        key = np.empty((len(nodes), G + 2), dtype=np.int64)
        key[:, 0] = np.searchsorted(self._cpu_cuts, cpu_left, side="right")
        key[:, 1] = self._access_class[nodes]
        key[:, 2:] = np.sort(gpu_left, axis=1)
        keys = key.view(np.dtype((np.void, key.shape[1] * 8))).ravel().tolist()
        memo = self._memo
        values = [memo.get(k) for k in keys]
        missing = [i for i, v in enumerate(values) if v is None]
        if missing:
            rows = np.array(missing, dtype=np.int64)
            fresh = node_frag(
                cpu_left[rows], gpu_left[rows], self.node_access[nodes[rows]], self.typical
            ).tolist()
            for i, v in zip(missing, fresh):
                values[i] = memo[keys[i]] = v
        return np.array(values, dtype=float)


# policies --------------------------------------------------------------------------------------
@dataclass
class Pod:
    cpu: int
    mem: int
    num: int
    milli: int
    spec_id: int

    @property
    def total_milli(self) -> int:
        return self.num * self.milli

    @property
    def shared(self) -> bool:
        return self.num == 1 and self.milli < MILLI


class Policy:
    name = ""

    def __init__(self, ledger: Ledger, access: np.ndarray, frag: FragTracker, rng):
        self.ledger = ledger
        self.access = access  # (nodes, pod specs)
        self.fragmentation = frag
        self.typical = frag.typical
        self.node_access = frag.node_access  # (nodes, typical pod types)
        self.rng = rng
        self.tie_break = "first"
        # Tie-break order of the nodes (lowest wins): the node index, or for tie_break="name"
        # the simulator's random name prefix (node_rank); run_one sets it.
        self.rank = np.arange(len(ledger.cpu_left))

    def scores(self, pod: Pod, cand: np.ndarray):
        """Integer-valued scores of the candidate nodes, and the device per candidate (or None)."""
        raise NotImplementedError

    def choose(self, pod: Pod, cand: np.ndarray) -> tuple[int, int | None]:
        scores, devices = self.scores(pod, cand)
        best = np.flatnonzero(scores == scores.max())
        if len(best) == 1:
            pick = best[0]
        elif self.tie_break == "random":
            pick = best[int(self.rng.integers(len(best)))]
        else:  # "name" or "first": the lowest-ranked node (rank = index for "first")
            pick = best[int(np.argmin(self.rank[cand[best]]))]
        device = None if devices is None else int(devices[pick])
        return int(cand[pick]), device


class FirstFitPolicy(Policy):
    """first_fit_score.go: every node scores 100, so the node order alone decides."""

    name = "firstfit"

    def scores(self, pod, cand):
        return np.zeros(len(cand), dtype=np.int64), None


class RandomPolicy(Policy):
    """random_score.go: PreScore draws one of the feasible nodes uniformly (rand.Intn) and
    gives it the maximum score, so the pick is random whatever the tie-break (with all-equal
    scores and ties to the lowest index this would be first fit, not random)."""

    name = "random"

    def scores(self, pod, cand):
        score = np.zeros(len(cand), dtype=np.int64)
        score[int(self.rng.integers(len(cand)))] = MAX_NODE_SCORE
        return score, None


class BestFitPolicy(Policy):
    """best_fit_score.go: (1 - sum_i 0.5 * (free_i - req_i) / maxSpec_i) * 100, truncated,
    then min-max normalised to 0..100 with integer division (NormalizeScore)."""

    name = "bestfit"

    def scores(self, pod, cand):
        lg = self.ledger
        free_cpu = lg.cpu_left[cand]
        free_gpu = lg.total_left[cand]
        raw = (free_cpu - pod.cpu) / MAX_SPEC_CPU * 0.5 + (free_gpu - pod.total_milli) / (
            MAX_SPEC_GPU
        ) * 0.5
        score = np.trunc((1.0 - raw) * MAX_NODE_SCORE).astype(np.int64)
        return normalize_score(score), None


def normalize_score(score: np.ndarray) -> np.ndarray:
    lo, hi = int(score.min()), int(score.max())
    if hi == lo:
        return np.zeros_like(score)
    return (score - lo) * MAX_NODE_SCORE // (hi - lo)


class DotProdPolicy(Policy):
    """dot_product_score.go with dimExt "share" and norm "max" (the experiments' defaults).

    Virtual node vectors: each partly used device that fits a shared pod ([cpu left, its milli
    left]) and, if enough idle devices, [cpu left, idle devices x 1000]; score
    1 - <node, pod> / 2 over max-spec-normalised vectors, best group wins (first on ties), and
    the winning group also chooses the device (gpusel = DotProductScore).
    """

    name = "dotprod"

    def scores(self, pod, cand):
        lg = self.ledger
        cpu_term = lg.cpu_left[cand] / MAX_SPEC_CPU * (pod.cpu / MAX_SPEC_CPU)
        req = pod.total_milli
        gl = lg.gpu_left[cand]
        idle = (gl == MILLI).sum(axis=1) * MILLI
        groups = np.full((len(cand), G + 1), -np.inf)
        if req < MILLI:
            partial = (gl < MILLI) & (gl >= req)
            vals = 1.0 - (cpu_term[:, None] + gl / MAX_SPEC_GPU * (req / MAX_SPEC_GPU)) / 2
            groups[:, :G] = np.where(partial, vals, -np.inf)
        excl = 1.0 - (cpu_term + idle / MAX_SPEC_GPU * (req / MAX_SPEC_GPU)) / 2
        groups[:, G] = np.where(req <= idle, excl, -np.inf)
        best = np.argmax(groups, axis=1)
        top = groups[np.arange(len(cand)), best]
        score = np.where(np.isfinite(top), np.trunc(MAX_NODE_SCORE * top), 0).astype(np.int64)
        devices = None
        if pod.shared:
            # Group G is "exclusive": the first idle device.
            first_idle = np.argmax(gl == MILLI, axis=1)
            devices = np.where(best < G, best, first_idle)
        return score, devices


class GpuPackingPolicy(Policy):
    """gpu_packing_score.go: shared devices first, then free devices of used nodes, then
    free nodes (fewer GPUs first). CPU-only pods score 0 everywhere."""

    name = "gpupacking"

    def scores(self, pod, cand):
        if pod.milli <= 0:
            return np.zeros(len(cand), dtype=np.int64), None
        lg = self.ledger
        ngpu = lg.cluster.ngpu[cand]
        full = lg.full[cand]
        sgl = lg.sorted_left[cand]  # least left first
        elig = sgl >= pod.milli
        used = elig & (np.cumsum(elig, axis=1) <= pod.num)
        full_used = (used & (sgl == MILLI)).sum(axis=1)
        pct = (sgl * 100 // MILLI * used).sum(axis=1)
        case1 = np.maximum(MAX_NODE_SCORE - pct // 10, MAX_NODE_SCORE // 2)
        case2 = np.maximum(MAX_NODE_SCORE // 2 - full_used, MAX_NODE_SCORE // 3)
        case3 = np.maximum(MAX_NODE_SCORE // 3 - full, full)
        score = np.where(full == ngpu, case3, np.where(full_used > 0, case2, case1))
        return score.astype(np.int64), None


class GpuClusteringPolicy(Policy):
    """gpu_clustering_score.go: prefer nodes whose pods share this pod's GPU-count tag."""

    name = "gpuclustering"

    def scores(self, pod, cand):
        if pod.num == 0:
            return np.zeros(len(cand), dtype=np.int64), None
        lg = self.ledger
        aff = lg.affinity[cand]
        tag = affinity_tag(pod.num, pod.milli)
        kinds = (aff > 0).sum(axis=1)
        left = lg.total_left[cand]
        base = MAX_NODE_SCORE // 4 * (MAX_SPEC_GPU - left) // MAX_SPEC_GPU
        q = MAX_NODE_SCORE // 4
        same = aff[:, tag] > 0
        score = np.where(
            same,
            np.where(kinds == 1, base + 3 * q, base + 2 * q),
            np.where(kinds == 0, base + q, base),
        )
        return score.astype(np.int64), None


class BinpackPolicy(Policy):
    """Volcano binpack as scheduler/core/plugins/binpack.py scores a node, with the seed conf's
    weights (binpack.weight 10, cpu 2, memory 2, gpu 20), vectorised over nodes. The core's GPU
    dimension is whole devices; here a fractional pod requests ``milli/1000`` GPU and a node's
    used GPU is its allocated milli / 1000. Within the node the device is chosen best-fit."""

    name = "binpack"
    weights = BINPACK_WEIGHTS

    def scores(self, pod, cand):
        lg, cl, w = self.ledger, self.ledger.cluster, self.weights
        # In the core's order (resource names sorted: cpu, gpu, memory) and with its values
        # (GPUs in cards, exact to the milli-GPU), so the sums round alike and the live core's
        # replay (core_engine.py) can be held to the same placements.
        parts = [(pod.cpu, cl.cpu[cand], cl.cpu[cand] - lg.cpu_left[cand], w["cpu"])]
        if pod.num:
            cap = cl.ngpu[cand].astype(float)
            used = (cl.ngpu[cand] * MILLI - lg.total_left[cand]) / MILLI
            parts.append((pod.total_milli / MILLI, cap, used, w["gpu"]))
        parts.append((pod.mem, cl.mem[cand], cl.mem[cand] - lg.mem_left[cand], w["memory"]))
        return binpack_vector(parts), None


class BinpackGpuPolicy(BinpackPolicy):
    """The same Volcano binpack with the GPU weight only: kept as a documented negative result.

    It was the best of the weight grid while ties went to the CSV order (91.2% on default);
    under the simulator's random node order it is the worst (83.9%): CPU-only pods score the
    same on every node and scatter over the GPU nodes (results/binpack_grid_default.tsv)."""

    name = "binpack-gpu"
    weights = BINPACK_GPU_WEIGHTS


class BinpackBestFitWholePolicy(Policy):
    """Diagnostic, not a proposal: Volcano binpack (seed weights) for pods that share one GPU,
    BestFit for every other pod (whole GPUs, CPU only). With its twin below it locates where
    binpack loses to BestFit: in the node choice of whole-GPU and CPU pods, or of shared ones."""

    name = "binpack+bestfit-whole"
    bestfit_for_shared = False

    def __init__(self, *args):
        super().__init__(*args)
        self._binpack, self._bestfit = BinpackPolicy(*args), BestFitPolicy(*args)

    def scores(self, pod, cand):
        bestfit = pod.shared if self.bestfit_for_shared else not pod.shared
        return (self._bestfit if bestfit else self._binpack).scores(pod, cand)


class BinpackBestFitSharedPolicy(BinpackBestFitWholePolicy):
    """Diagnostic: BestFit for pods that share one GPU, Volcano binpack for the others."""

    name = "binpack+bestfit-shared"
    bestfit_for_shared = True


def binpack_vector(parts) -> np.ndarray:
    """binpacking_score over arrays: parts are (request, capacity, used, weight)."""
    score, weight_sum = 0.0, 0
    for request, capacity, used, weight in parts:
        if request == 0 or weight == 0:
            continue
        capacity = np.asarray(capacity, dtype=float)
        safe = np.where(capacity == 0, 1.0, capacity)
        score = score + np.where(capacity == 0, 0.0, (request + used) * weight / safe)
        weight_sum += weight
    if weight_sum:
        score = score / weight_sum
    return np.asarray(score, dtype=float) * MAX_NODE_SCORE * BINPACK_WEIGHT


class FgdPolicy(Policy):
    """fgd_score.go: score = int(sigmoid((frag_before - frag_after) / 1000) * 100); a shared pod
    tries every device that fits and keeps the first best one. Scores depend only on a node's
    state, so they are cached per pod shape and recomputed for nodes changed since."""

    name = "fgd"
    exact = False

    def __init__(self, *args):
        super().__init__(*args)
        self.cache: dict[tuple, list] = {}

    def _compute(self, pod: Pod, nodes: np.ndarray):
        lg, tracker = self.ledger, self.fragmentation
        cpu = lg.cpu_left[nodes] - pod.cpu
        gl = lg.gpu_left[nodes]
        if pod.shared:
            # Devices with equal milli left give equal states, so only the first device of each
            # value that fits is evaluated: argmax keeps the first best device either way.
            rows, devs = np.nonzero((gl >= pod.milli) & first_of_value(gl))
            states = gl[rows]
            states[np.arange(len(rows)), devs] -= pod.milli
            after = tracker.evaluate(nodes[rows], cpu[rows], states)
            before = tracker.frag[nodes]
            score = np.full(gl.shape, -np.inf)
            score[rows, devs] = self._score(before[rows] - after)
            device = np.argmax(score, axis=1)  # first best device
            return score[np.arange(len(nodes)), device], device
        new = gl - exclusive_take(gl, pod.num) * MILLI if pod.num else gl
        after = tracker.evaluate(nodes, cpu, new)
        before = tracker.frag[nodes]
        return self._score(before - after), np.zeros(len(nodes), dtype=np.int64)

    def _score(self, delta):
        sig = 1.0 / (1.0 + np.exp(-delta / MILLI))
        return np.floor(sig * MAX_NODE_SCORE)

    def node_scores(self, pod: Pod):
        key = (pod.cpu, pod.num, pod.milli, pod.spec_id)
        entry = self.cache.get(key)
        lg = self.ledger
        if entry is None:
            nodes = np.arange(len(lg.cpu_left))
            entry = [np.zeros(len(nodes)), np.zeros(len(nodes), dtype=np.int64), 0]
            self.cache[key] = entry
        else:
            nodes = np.flatnonzero(lg.modified >= entry[2])
        if len(nodes):
            s, d = self._compute(pod, nodes)
            entry[0][nodes] = s
            entry[1][nodes] = d
        entry[2] = lg.step
        return entry[0], entry[1]

    def scores(self, pod, cand):
        s, d = self.node_scores(pod)
        return s[cand], (d[cand] if pod.shared else None)


def first_of_value(gl: np.ndarray) -> np.ndarray:
    """(K, G) bool: the device is the lowest-indexed one of its node holding that milli left."""
    same = gl[:, :, None] == gl[:, None, :]
    return ~(same & EARLIER).any(axis=2)


EARLIER = np.tril(np.ones((G, G), dtype=bool), k=-1)  # [i, j]: device j comes before device i


class FgdBestFitPolicy(FgdPolicy):
    """Variant: FGD's gradient without the int(sigmoid x 100) quantisation (the exact change of
    expected fragmentation), ties broken by best fit (least GPU then CPU left afterwards).
    Measured worse than FGD (docs/replay/README.md): with exact scores almost nothing ties, and
    the ties are what let FGD consolidate."""

    name = "fgd-bf"

    def _score(self, delta):
        return np.asarray(delta, dtype=float)

    def choose(self, pod, cand):
        scores, devices = self.scores(pod, cand)
        lg = self.ledger
        top = scores.max()
        best = np.flatnonzero(scores >= top - 1e-6)
        if len(best) > 1:
            gpu_after = lg.total_left[cand[best]]
            cpu_after = lg.cpu_left[cand[best]]
            jitter = self.rng.random(len(best))
            best = best[np.lexsort((jitter, cpu_after, gpu_after))[:1]]
        pick = int(best[0])
        device = None if devices is None else int(devices[pick])
        return int(cand[pick]), device


class FgdTieBreakPolicy(FgdPolicy):
    """FGD's integer score; ties go by ``tie_keys`` (most significant first), then the run's
    node order. With no keys this is FGD's own tie-break."""

    def tie_keys(self, nodes: np.ndarray) -> tuple:
        return ()

    def choose(self, pod, cand):
        scores, devices = self.scores(pod, cand)
        best = np.flatnonzero(scores == scores.max())
        if len(best) > 1:
            nodes = cand[best]
            keys = (self.rank[nodes], *reversed(self.tie_keys(nodes)))
            best = best[np.lexsort(keys)[:1]]
        pick = int(best[0])
        device = None if devices is None else int(devices[pick])
        return int(cand[pick]), device


class FgdPackPolicy(FgdTieBreakPolicy):
    """Ours: FGD's integer score, ties broken towards consolidation rather than by node order
    alone: a node that already has a used GPU, then the node with the fewest GPUs (keeps the
    8-GPU nodes whole for multi-GPU pods), then the run's node order (``rank``: the simulator's
    random name order by default, the index with tie_break="first").

    Why ties: int(sigmoid(delta / 1000) x 100) puts nodes whose fragmentation change differs by
    less than about 40 milli-GPU in one bucket, so the tie-break decides most placements; with
    exact scores (fgd-bf) the consolidation is lost. No tuned parameter."""

    name = "fgd-pack"

    def tie_keys(self, nodes: np.ndarray) -> tuple:
        ngpu = self.ledger.cluster.ngpu[nodes]
        return self.ledger.full[nodes] == ngpu, ngpu


class FgdFillPolicy(FgdTieBreakPolicy):
    """Ours: FGD's integer score, ties to the node whose GPUs are least idle (the smallest share
    of fully free devices), then the run's node order.

    Why: the sigmoid bucket leaves most placements to the tie-break, and the simulator's
    random node order scatters them; filling the node that already has the fewest idle devices
    (as a share, so a half-used 2-GPU node counts like a half-used 8-GPU one) keeps idle devices
    together on few nodes for the multi-GPU pods. No tuned parameter. Picked from 30 tie-break
    and device-choice variants on seeds 42-46 of the default list only (docs/replay/README.md);
    the other lists and seeds were not looked at before."""

    name = "fgd-fill"

    def tie_keys(self, nodes: np.ndarray) -> tuple:
        lg = self.ledger
        return (lg.full[nodes] / np.maximum(lg.cluster.ngpu[nodes], 1),)


class GpuFragPolicy(FgdPolicy):
    """FGD under the name of the core plugin that implements it (scheduler/core/plugins/
    gpufrag.py): the reference ``replay-openb --engine core --policy gpufrag`` must match."""

    name = "gpufrag"


class GpuFragFillPolicy(FgdFillPolicy):
    """fgd-fill under the name of the core conf that implements it (gpufrag with
    ``gpufrag.tieBreak: fill``)."""

    name = "gpufrag-fill"


POLICY_CLASSES = {
    cls.name: cls
    for cls in (
        RandomPolicy,
        FirstFitPolicy,
        BestFitPolicy,
        DotProdPolicy,
        GpuPackingPolicy,
        GpuClusteringPolicy,
        BinpackPolicy,
        BinpackGpuPolicy,
        BinpackBestFitWholePolicy,
        BinpackBestFitSharedPolicy,
        FgdPolicy,
        FgdBestFitPolicy,
        FgdPackPolicy,
        FgdFillPolicy,
        GpuFragPolicy,
        GpuFragFillPolicy,
    )
}


# one run -----------------------------------------------------------------------------------------
@dataclass
class RunResult:
    policy: str
    seed: int
    pods: int
    failed: int
    alloc_by_arrived: list[float]  # % of GPU capacity, index = arrived %
    frag_by_arrived: list[float]  # FGD fragmentation, % of GPU capacity
    frag_ratio_by_arrived: list[float]  # fragmentation, % of idle GPU
    seconds: float
    cpu_seconds: float = 0.0  # of this process: comparable across machine loads, unlike wall
    extra: dict = field(default_factory=dict)


def run_one(
    cluster: Cluster,
    pods: PodList,
    policy: str,
    seed: int,
    inflate: float = 1.3,
    tie_break: str = "name",
    binpack_weights: dict | None = None,
) -> RunResult:
    started, cpu_started = time.perf_counter(), time.process_time()
    capacity = cluster.gpu_capacity_milli
    order = arrival_order(pods, capacity, seed, inflate)
    specs = sorted(set(pods.spec))
    spec_id = {s: i for i, s in enumerate(specs)}
    access = access_matrix(list(cluster.models), specs)
    typical = typical_pods(pods.cpu, pods.milli, pods.num, pods.spec)
    ledger = Ledger(cluster)
    frag = FragTracker(ledger, typical, access_matrix(list(cluster.models), typical.spec))
    impl = POLICY_CLASSES[policy](ledger, access, frag, np.random.default_rng(seed + 7919))
    impl.tie_break = tie_break
    if tie_break == "name":
        impl.rank = node_rank(len(cluster.names), seed)
    if binpack_weights is not None and policy == "binpack":
        impl.weights = binpack_weights
    last = int(math.floor(inflate * 100 + 1e-9))
    alloc = [math.nan] * (last + 1)
    frag_pct = [math.nan] * (last + 1)
    frag_ratio = [math.nan] * (last + 1)
    arrived, next_mark, failed = 0, 0, 0
    placements = PlacementDigest()
    listed = [
        Pod(c, m, n, g, spec_id[s])
        for c, m, n, g, s in zip(
            pods.cpu.tolist(), pods.mem.tolist(), pods.num.tolist(), pods.milli.tolist(), pods.spec
        )
    ]
    columns = [np.ascontiguousarray(access[:, k]) for k in range(len(specs))]
    for i in order.tolist():
        pod = listed[i]
        arrived += pod.total_milli
        fit = ledger.fits(pod.cpu, pod.mem, pod.num, pod.milli, columns[pod.spec_id])
        cand = np.flatnonzero(fit)
        if len(cand) == 0:
            failed += 1
            placements.add(None, ())
        else:
            node, device = impl.choose(pod, cand)
            taken = ledger.place(node, pod.cpu, pod.mem, pod.num, pod.milli, device)
            placements.add(cluster.names[node], taken)
            frag.node_changed(node)
        while next_mark <= last and arrived * 100 >= next_mark * capacity:
            idle = capacity - ledger.allocated_milli
            total_frag = float(frag.frag.sum())
            alloc[next_mark] = round(100 * ledger.allocated_milli / capacity, 3)
            frag_pct[next_mark] = round(100 * total_frag / capacity, 3)
            frag_ratio[next_mark] = round(100 * total_frag / idle, 3) if idle else 0.0
            next_mark += 1
    return RunResult(
        policy,
        seed,
        len(order),
        failed,
        alloc,
        frag_pct,
        frag_ratio,
        round(time.perf_counter() - started, 2),
        round(time.process_time() - cpu_started, 2),
        {"placement_digest": placements.hexdigest()},
    )


class PlacementDigest:
    """sha256 of every pod's placement in arrival order: (node name or none, devices)."""

    def __init__(self):
        self._hash = hashlib.sha256()

    def add(self, node: str | None, devices: tuple[int, ...]) -> None:
        self._hash.update(f"{node or '-'}:{','.join(map(str, devices))};".encode())

    def hexdigest(self) -> str:
        return self._hash.hexdigest()[:16]


def _run_job(job):
    nodes_path, pods_path, policy, seed, inflate, tie_break, weights, engine = job
    cluster, pods = load_nodes(nodes_path), load_pods(pods_path)
    if engine == "core":
        from bench.replay.core_engine import run_core

        return run_core(cluster, pods, policy, seed, inflate, weights)
    return run_one(cluster, pods, policy, seed, inflate, tie_break, weights)


def run_many(
    nodes_path,
    pods_path,
    policies,
    seeds,
    inflate=1.3,
    jobs=1,
    tie_break="name",
    binpack_weights=None,
    engine="numpy",
) -> list[RunResult]:
    """``engine``: "numpy" (the reference policies) or "core" (the scheduling core's own
    plugins, binpack and gpufrag, through a live session: core_engine.py)."""
    # Slowest policies first so a pool stays busy to the end.
    slow = {
        "fgd": 0,
        "gpufrag": 0,
        "fgd-bf": 0,
        "fgd-pack": 0,
        "fgd-fill": 0,
        "dotprod": 1,
        "gpupacking": 1,
    }
    ordered = sorted(policies, key=lambda p: slow.get(p, 2))
    work = [
        (nodes_path, pods_path, p, s, inflate, tie_break, binpack_weights, engine)
        for p in ordered
        for s in seeds
    ]
    if jobs <= 1:
        return [_run_job(w) for w in work]
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        return pool.map(_run_job, work, chunksize=1)


def mean_curve(curves: list[list[float]]) -> list[float]:
    arr = np.array(curves, dtype=float)
    return [round(float(v), 3) for v in np.nanmean(arr, axis=0)]


# published results ---------------------------------------------------------------------------------
def load_published(path: Path, workload: str) -> dict[str, dict]:
    """FGD expected_results CSV rows for ``workload`` (e.g. openb_pod_list_default):
    {policy: {"seeds": n, "mean": [per arrived %]}}."""
    out: dict[str, list] = {}
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        first = header.index("0")
        for row in reader:
            if row[0] != workload:
                continue
            out.setdefault(row[1], []).append([float(v) for v in row[first:]])
    return {
        name: {"seeds": len(rows), "mean": mean_curve(rows)} for name, rows in sorted(out.items())
    }


def summarise(results: list[RunResult], published: dict | None = None) -> dict:
    by_policy: dict[str, list[RunResult]] = {}
    for r in results:
        by_policy.setdefault(r.policy, []).append(r)
    summary = {}
    for policy, runs in by_policy.items():
        alloc = mean_curve([r.alloc_by_arrived for r in runs])
        frag = mean_curve([r.frag_by_arrived for r in runs])
        entry = {
            "seeds": [r.seed for r in runs],
            "mean_alloc_by_arrived": alloc,
            "mean_frag_by_arrived": frag,
            "mean_frag_ratio_by_arrived": mean_curve([r.frag_ratio_by_arrived for r in runs]),
            "alloc_at_end": alloc[-1],
            "alloc_at_end_std": round(float(np.std([r.alloc_by_arrived[-1] for r in runs])), 3),
            "alloc_at_end_per_seed": [r.alloc_by_arrived[-1] for r in runs],
            "frag_at_end": frag[-1],
            "failed_pods_mean": round(float(np.mean([r.failed for r in runs])), 1),
            "pods_mean": round(float(np.mean([r.pods for r in runs])), 1),
            "seconds_per_run": round(float(np.mean([r.seconds for r in runs])), 2),
            "cpu_seconds_per_run": round(float(np.mean([r.cpu_seconds for r in runs])), 2),
            # node and cards of every pod in arrival order, per seed: equal digests, equal runs
            "placement_digest_per_seed": [r.extra.get("placement_digest") for r in runs],
        }
        name = PUBLISHED_NAMES.get(PUBLISHED_ALIASES.get(policy, policy))
        if published and name in published:
            pub = published[name]["mean"]
            entry["published_alloc_at_end"] = pub[min(len(alloc), len(pub)) - 1]
        summary[policy] = entry
    return summary

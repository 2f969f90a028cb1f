"""The openb replay through the live scheduling core (``replay-openb --engine core``).

Same methodology as ``openb.run_one`` (arrival order, inflation, one pod at a time, none
removed, a pod that fits nowhere fails), but every decision is the product's own: one session
of ``scheduler.core`` per seed holds the whole cluster (nodes with their GPU cards) and every
arriving pod as a one-pod job; each pod in turn goes through allocate's ``choose_node`` (the
resource and device fit, the predicates plugin, the conf's node-order plugins over the node
classes) and is bound with a statement, so the session's books move exactly as a cycle's do.

A pod's ``gpu_spec`` (allowed models) becomes required node affinity on the nodes' model label,
which the gpufrag plugin's typical pods carry as the numpy FGD's carry the spec, so the digests
are compared on the ``gpuspec`` lists too.

Ties: the core gives a tie to the first node in name order; the nodes are named
``<rank>-<sn>`` with the seed's ``node_rank``, the simulator's own naming, so the tie rule is
the numpy reference's. Policies: ``binpack`` (the seed conf's binpack: weight 10, cpu 2,
memory 2, gpu 20) and ``gpufrag`` (FGD), each checked against its numpy reference by a digest
of the placements (node and cards of every pod, in arrival order).
"""

from __future__ import annotations

import math
import time

import numpy as np

from bench.replay.fragmentation import MILLI
from bench.replay.openb import (
    BINPACK_WEIGHT,
    BINPACK_WEIGHTS,
    Cluster,
    PlacementDigest,
    PodList,
    RunResult,
    arrival_order,
    node_rank,
)
from scheduler.core.actions.allocate import AllocateState, choose_node
from scheduler.core.config import parse_conf
from scheduler.core.cycle import open_session
from scheduler.core.plugins.gpufrag import Fragmentation, NodeConstraint, TypicalPods
from scheduler.core.resources import CPU, GPU, MEMORY, PODS, Resources
from scheduler.core.statement import Statement
from scheduler.core.types import GpuDevice, JobInfo, NodeInfo, QueueInfo, Snapshot, TaskInfo

CORE_POLICIES = ("binpack", "gpufrag", "gpufrag-fill")
_NO_POD_CAP = 10**9  # the trace's nodes state no pod limit
MODEL_LABEL = "gpu-model"


def conf_for(policy: str, binpack_weights: dict | None = None):
    if policy == "binpack":
        weights = binpack_weights or BINPACK_WEIGHTS
        scorer = {
            "name": "binpack",
            "arguments": {
                "binpack.weight": BINPACK_WEIGHT,
                "binpack.cpu": weights["cpu"],
                "binpack.memory": weights["memory"],
                "binpack.resources": "gpu",
                "binpack.resources.gpu": weights["gpu"],
            },
        }
    elif policy == "gpufrag":
        scorer = {"name": "gpufrag"}
    elif policy == "gpufrag-fill":
        scorer = {"name": "gpufrag", "arguments": {"gpufrag.tieBreak": "fill"}}
    else:
        raise ValueError(f"the core engine runs {', '.join(CORE_POLICIES)}, not {policy!r}")
    return parse_conf(
        {"actions": "allocate", "tiers": [{"plugins": [{"name": "predicates"}, scorer]}]}
    )


def snapshot_for(cluster: Cluster, pods: PodList, order: np.ndarray, rank: np.ndarray):
    """Nodes named by rank; one pending one-pod job per arrival (``p<position>``)."""
    nodes = []
    for i, name in enumerate(cluster.names):
        ngpu = int(cluster.ngpu[i])
        allocatable = {CPU: int(cluster.cpu[i]), MEMORY: int(cluster.mem[i]), PODS: _NO_POD_CAP}
        if ngpu:
            allocatable[GPU] = ngpu
        model = cluster.models[i]
        nodes.append(
            NodeInfo(
                f"{int(rank[i]):04d}-{name}",
                Resources(allocatable),
                labels=((MODEL_LABEL, model),) if model else (),
                gpus=tuple(GpuDevice(d, model) for d in range(ngpu)),
            )
        )
    # one request vector per listed pod: the session interns requests by identity
    requests = []
    for cpu, mem, num, milli in zip(
        pods.cpu.tolist(), pods.mem.tolist(), pods.num.tolist(), pods.milli.tolist()
    ):
        values = {CPU: cpu, MEMORY: mem}
        if num:
            values[GPU] = num if milli >= MILLI else milli / MILLI
        requests.append(Resources(values))
    affinity = [_model_affinity(spec) for spec in pods.spec]
    jobs = tuple(
        JobInfo(
            f"p{k}",
            "trace",
            (TaskInfo(f"p{k}", requests[i], affinity=affinity[i]),),
            min_available=1,
            created=k,
        )
        for k, i in enumerate(order.tolist())
    )
    return Snapshot(tuple(nodes), (QueueInfo("trace"),), jobs)


def _model_affinity(spec: str) -> dict | None:
    """A pod's allowed GPU models (``A|B``) as required node affinity on the model label."""
    if not spec:
        return None
    expression = {"key": MODEL_LABEL, "operator": "In", "values": spec.split("|")}
    terms = [{"matchExpressions": [expression]}]
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }


def run_core(
    cluster: Cluster,
    pods: PodList,
    policy: str,
    seed: int,
    inflate: float = 1.3,
    binpack_weights: dict | None = None,
) -> RunResult:
    started, cpu_started = time.perf_counter(), time.process_time()
    capacity = cluster.gpu_capacity_milli
    order = arrival_order(pods, capacity, seed, inflate)
    rank = node_rank(len(cluster.names), seed)
    ssn = open_session(snapshot_for(cluster, pods, order, rank), conf_for(policy, binpack_weights))
    # The trace's typical pods, as the reference computes them: the listed pods, not the
    # arrival order with its random copies (the session's own would count the copies).
    constraints = {spec: NodeConstraint.of((), _model_affinity(spec)) for spec in set(pods.spec)}
    listed = zip(
        pods.cpu.tolist(),
        pods.milli.tolist(),
        pods.num.tolist(),
        (constraints[spec] for spec in pods.spec),
    )
    typical = TypicalPods.from_pods(listed)
    plugin = ssn.plugins.get("gpufrag")
    if plugin is not None:
        plugin.set_typical(typical)
    measure = Fragmentation(typical, ssn.node_list)
    state = AllocateState(ssn)  # one allocate run over the whole arrival sequence
    original = {f"{int(rank[i]):04d}-{name}": name for i, name in enumerate(cluster.names)}
    last = int(math.floor(inflate * 100 + 1e-9))
    alloc = [math.nan] * (last + 1)
    frag_pct = [math.nan] * (last + 1)
    frag_ratio = [math.nan] * (last + 1)
    arrived, next_mark, failed, allocated = 0, 0, 0, 0
    placements = PlacementDigest()
    total_milli = (pods.num * pods.milli).tolist()
    for k, i in enumerate(order.tolist()):
        task = ssn.tasks[f"p{k}"]
        arrived += total_milli[i]
        node, _ = choose_node(state, task)
        if node is None:
            failed += 1
            placements.add(None, ())
        else:
            stmt = Statement(ssn)
            stmt.allocate(task, node.name)
            stmt.commit()
            placements.add(original[node.name], task.gpus)
            allocated += total_milli[i]
        while next_mark <= last and arrived * 100 >= next_mark * capacity:
            total_frag = sum(measure.of_node(n) for n in ssn.node_list)
            idle = capacity - allocated
            alloc[next_mark] = round(100 * allocated / capacity, 3)
            frag_pct[next_mark] = round(100 * total_frag / capacity, 3)
            frag_ratio[next_mark] = round(100 * total_frag / idle, 3) if idle else 0.0
            next_mark += 1
    ssn.release()
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
        {"placement_digest": placements.hexdigest(), "engine": "core"},
    )

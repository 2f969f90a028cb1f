"""gpufrag: FGD's fragmentation measure and node score in the core."""

import random

import numpy as np
import pytest

from bench.replay.fragmentation import accessible, node_frag, typical_pods
from scheduler.core.config import ConfigError, parse_conf
from scheduler.core.cycle import run_cycle
from scheduler.core.plugins import gpufrag
from scheduler.core.plugins.gpufrag import Fragmentation, TypicalPods, fgd_score
from scheduler.core.scenario import load_scenario, result_to_dict

GI = 1024**3


def _tiers(*scorers):
    return [
        {"plugins": [{"name": "priority"}, {"name": "gang"}]},
        {"plugins": [{"name": "predicates"}, {"name": "proportion"}, *scorers]},
    ]


def _node(name, gpus=4, cpu=64000):
    return {
        "name": name,
        "allocatable": {"cpu": cpu, "memory": 256 * GI, "gpu": gpus},
        "gpus": [{"index": i} for i in range(gpus)],
    }


def _pod(name, gpu=None, cpu=1000, **extra):
    requests = {"cpu": cpu}
    if gpu is not None:
        requests["gpu"] = gpu
    return {"name": name, "requests": requests, **extra}


def _run(nodes, jobs, *scorers):
    data = {
        "config": {"actions": "enqueue, allocate", "tiers": _tiers(*scorers)},
        "nodes": nodes,
        "queues": [{"name": "q"}],
        "jobs": [
            {"name": f"j{n}", "queue": "q", "created": n, "tasks": [task]}
            for n, task in enumerate(jobs)
        ],
    }
    snapshot, conf = load_scenario(data)
    return result_to_dict(run_cycle(snapshot, conf))


def test_the_measure_equals_the_replays_numpy_reference_on_random_states():
    rng = random.Random(7)
    shapes = [(rng.choice([0, 2000, 8000]), rng.choice([0, 250, 500, 1000]), 0) for _ in range(60)]
    shapes = [
        (c, m, 0 if m == 0 else (1 if m < 1000 else rng.choice([1, 2, 4]))) for c, m, _ in shapes
    ]
    cpu, milli, num = (np.array(col) for col in zip(*shapes))
    reference = typical_pods(cpu, milli, num, [""] * len(shapes))
    mine = Fragmentation(TypicalPods.from_pods((c, m, n, None) for c, m, n in shapes))
    assert mine.typical.count == tuple(reference.count.tolist())
    states = [
        (
            rng.randrange(0, 64001, 1000),
            tuple(rng.choice([0, 100, 250, 500, 750, 1000]) for _ in range(8)),
        )
        for _ in range(200)
    ]
    expected = node_frag(
        np.array([c for c, _ in states]),
        np.array([g for _, g in states]),
        np.ones((len(states), len(reference)), dtype=bool),
        reference,
    )
    assert [mine.of(c, g) for c, g in states] == expected.tolist()


def test_hand_computed_fragmentation_and_score():
    # typical pods: half the pods ask half a card, half ask a whole one
    frag = Fragmentation(TypicalPods([(1000, 500, 1, 1), (1000, 1000, 1, 1)]))
    # cards left 1000 and 300: the half-card type cannot use the 300 (frag 300), the whole-card
    # type cannot either (300): expected 300
    assert frag.of(8000, (1000, 300)) == 300
    # with too little CPU neither type fits: every idle milli is fragmented
    assert frag.of(500, (1000, 300)) == 1300
    assert fgd_score(0) == 50
    assert fgd_score(300) == 57  # int(sigmoid(0.3) x 100)


def test_a_share_goes_where_it_leaves_least_fragmentation():
    # typical pods (the snapshot's): 0.4 and 0.5 of a card. n1's cards have 1000 and 600 left,
    # n2's 1000 and 1000. The 0.5 share on n1's 600 card leaves 100 that neither type can use
    # (score int(sigmoid(-0.1) x 100) = 47); on a whole card of either node nothing is lost
    # (50): the tie goes to n1 by name, card 0.
    nodes = [_node("n1", 2), _node("n2", 2)]
    running = _pod("r", 0.4, status="Running", node="n1", gpu_indices=[1])
    out = _run(nodes, [running, _pod("s", 0.5)], {"name": "gpufrag"})
    assert out["devices"] == {"s": [0]}
    assert out["bind"] == {"s": "n1"}
    # binpack's best fit would have filled the 600 card instead
    assert _run(nodes, [running, _pod("s", 0.5)], {"name": "binpack"})["devices"] == {"s": [1]}


def test_it_sits_in_a_tier_with_binpack_and_its_weight_counts():
    nodes = [_node("n1", 4), _node("n2", 4)]
    jobs = [_pod("r", 1, status="Running", node="n2", gpu_indices=[0]), _pod("a", 0.5)]
    both = _run(
        nodes,
        jobs,
        {"name": "gpufrag", "arguments": {"gpufrag.weight": 3}},
        {"name": "binpack"},
    )
    assert both["bind"] == {"a": "n2"}


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"gpufrag.weight": -1}, "gpufrag.weight"),
        ({"gpufrag.threshold": 0}, "gpufrag.threshold"),
        ({"gpufrag.threshold": 101}, "gpufrag.threshold"),
        ({"gpufrag.cpuPods": "maybe"}, "gpufrag.cpuPods"),
        ({"gpufrag.tieBreak": "pack"}, "gpufrag.tieBreak"),
    ],
)
def test_bad_arguments_name_the_field(arguments, field):
    with pytest.raises(ConfigError) as info:
        gpufrag.build(arguments)
    assert info.value.field == field


def test_the_conf_names_it():
    conf = parse_conf({"actions": "allocate", "tiers": [{"plugins": [{"name": "gpufrag"}]}]})
    assert [option.name for tier in conf.tiers for option in tier] == ["gpufrag"]


def test_typical_pods_cover_the_threshold_most_popular_first():
    pods = [(1000, 1000, 1, None)] * 6 + [(2000, 500, 1, None)] * 3 + [(4000, 0, 0, None)]
    typical = TypicalPods.from_pods(pods, threshold=0.9)
    assert list(zip(typical.cpu, typical.milli, typical.count)) == [
        (1000, 1000, 6),
        (2000, 500, 3),
    ]
    without_cpu = TypicalPods.from_pods(pods, cpu_pods=False)
    assert 0 not in without_cpu.milli


def test_nodes_with_the_same_cards_in_any_order_score_alike():
    from scheduler.core.cycle import open_session

    nodes = [_node("n1", 2), _node("n2", 2)]
    jobs = [
        _pod("r1", 0.5, status="Running", node="n1", gpu_indices=[0]),
        _pod("r2", 0.5, status="Running", node="n2", gpu_indices=[1]),
        _pod("s", 0.25),
    ]
    data = {
        "config": {"actions": "allocate", "tiers": _tiers({"name": "gpufrag"})},
        "nodes": nodes,
        "queues": [{"name": "q"}],
        "jobs": [{"name": f"j{n}", "queue": "q", "tasks": [t]} for n, t in enumerate(jobs)],
    }
    snapshot, conf = load_scenario(data)
    ssn = open_session(snapshot, conf)
    plugin, task = ssn.plugins["gpufrag"], ssn.tasks["s"]
    n1, n2 = ssn.nodes["n1"], ssn.nodes["n2"]
    assert n1.state_key() == n2.state_key()
    assert plugin.score(task, n1) == plugin.score(task, n2)
    # a quarter on a half-used card would leave 250 that the half-card pods cannot use: each
    # node gives it its wholly free card, whichever index that is
    assert plugin.pick(task, n1, False) == (1,)
    assert plugin.pick(task, n2, False) == (0,)


def test_the_fill_tie_break_prefers_the_node_with_fewer_wholly_free_cards():
    # one whole card asked; n1 has 1 of 4 cards busy, n2 3 of 4: FGD scores both alike here
    # (no share in the workload), so plain ties go to n1 by name and fill goes to n2
    nodes = [_node("n1", 4), _node("n2", 4)]
    running = [
        _pod("a", 1, status="Running", node="n1", gpu_indices=[0]),
        *(_pod(f"b{i}", 1, status="Running", node="n2", gpu_indices=[i]) for i in range(3)),
    ]
    plain = _run(nodes, [*running, _pod("w", 1)], {"name": "gpufrag"})
    fill = _run(
        nodes,
        [*running, _pod("w", 1)],
        {"name": "gpufrag", "arguments": {"gpufrag.tieBreak": "fill"}},
    )
    assert plain["bind"] == {"w": "n1"}
    assert fill["bind"] == {"w": "n2"}


MODELS = ("T4", "V100", "G2")
SPECS = ("", "", "T4", "V100|G2", "G2|V100", "G2|V100|V100", "A100")


def _model_node(name, model, gpus=4):
    return {
        **_node(name, gpus),
        "labels": {"gpu-model": model},
        "gpus": [{"index": i, "model": model} for i in range(gpus)],
    }


def _in_models(spec):
    if not spec:
        return None
    values = spec.split("|")
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpu-model", "operator": "In", "values": values}]}
                ]
            }
        }
    }


def _session(nodes, jobs, *scorers):
    from scheduler.core.cycle import open_session

    data = {
        "config": {"actions": "allocate", "tiers": _tiers(*scorers)},
        "nodes": nodes,
        "queues": [{"name": "q"}],
        "jobs": [{"name": f"j{n}", "queue": "q", "tasks": [t]} for n, t in enumerate(jobs)],
    }
    return open_session(*load_scenario(data))


def test_constrained_measure_equals_the_numpy_reference_with_gpu_specs():
    # FGD's gpu_spec as required node affinity on the model label: per node, the typical types
    # whose models it does not have count all its idle milli, as node_frag's access matrix does
    rng = random.Random(11)
    nodes = [_model_node(f"n{i}", MODELS[i % 3]) for i in range(6)]
    ssn = _session(nodes, [_pod("p", 1)], {"name": "gpufrag"})
    pods = []
    for _ in range(80):
        milli = rng.choice([0, 250, 500, 1000])
        num = 0 if milli == 0 else (1 if milli < 1000 else rng.choice([1, 2]))
        pods.append((rng.choice([2000, 8000]), milli, num, rng.choice(SPECS)))
    constraints = {s: gpufrag.NodeConstraint.of((), _in_models(s)) for s in SPECS}
    mine = Fragmentation(
        TypicalPods.from_pods((c, m, n, constraints[s]) for c, m, n, s in pods), ssn.node_list
    )
    cpu, milli, num = (np.array(col) for col in list(zip(*pods))[:3])
    reference = typical_pods(cpu, milli, num, [s for *_, s in pods])
    assert mine.typical.count == tuple(reference.count.tolist())
    assert len(mine.rows) == 4  # every type / not T4 / not V100 / not G2
    for node in ssn.node_list:
        model = node.labels["gpu-model"]
        access = np.array([[accessible(model, s) for s in reference.spec]])
        for _ in range(30):
            cpu_left = rng.randrange(0, 64001, 1000)
            left = tuple(rng.choice([0, 250, 500, 750, 1000]) for _ in range(4))
            expected = node_frag(np.array([cpu_left]), np.array([left]), access, reference)
            row = mine.row_of.get(node.name, 0)
            assert mine.of(cpu_left, left, row) == expected[0]


def test_a_session_derives_each_types_models_from_its_pods_selector():
    # the session's own typical pods: half the pods may use only T4 cards (node selector); a T4
    # node and a V100 node in equal states, so only the constraint tells them apart
    nodes = [_model_node("t4", "T4", 2), _model_node("v100", "V100", 2)]
    t4 = {"gpu-model": "T4"}
    jobs = [_pod(f"a{i}", 0.5, node_selector=t4) for i in range(2)]
    jobs += [_pod(f"b{i}", 1) for i in range(2)]
    ssn = _session(nodes, jobs, {"name": "gpufrag"})
    frag = ssn.plugins["gpufrag"]._frag
    t4_node, v100_node = ssn.nodes["t4"], ssn.nodes["v100"]
    # on the V100 node the T4-only half-card type finds nothing it may use: both its idle cards
    # count for that half of the pods; on the T4 node every type can use a free card
    assert frag.of_node(t4_node) == 0
    assert frag.of_node(v100_node) == 1000
    assert t4_node.state_key() != v100_node.state_key()


def test_equally_popular_types_keep_the_simulators_order_of_gpu_specs():
    # GetTypicalPods breaks ties on the GpuType string: a constraint's text must order alike
    specs = ["", "P100", "P100|T4", "T4", "V100M16|V100M32", "V100M16|V100M32|V100M32", "A10|T4"]
    pods = [(4000, 1000, 1, s) for s in specs]
    constraints = {s: gpufrag.NodeConstraint.of((), _in_models(s)) for s in specs}
    mine = TypicalPods.from_pods((c, m, n, constraints[s]) for c, m, n, s in pods)
    cpu, milli, num = (np.array(col) for col in list(zip(*pods))[:3])
    reference = typical_pods(cpu, milli, num, specs, threshold=1.0)
    by_constraint = {c: s for s, c in constraints.items()}
    assert [by_constraint[c] for c in mine.constraint] == list(reference.spec)

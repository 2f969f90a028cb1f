import numpy as np
import pytest

from bench.replay import openb
from bench.replay.fragmentation import access_matrix, node_frag, typical_pods
from scheduler.core.plugins.binpack import resource_binpacking_score


def cluster(ngpu=(8, 2), cpu=64000, mem=262144, models=("V100", "T4")):
    n = len(ngpu)
    return openb.Cluster(
        names=tuple(f"n{i}" for i in range(n)),
        cpu=np.full(n, cpu, dtype=np.int64),
        mem=np.full(n, mem, dtype=np.int64),
        ngpu=np.array(ngpu, dtype=np.int64),
        models=tuple(models[i % len(models)] for i in range(n)),
    )


def pods(rows):
    cpu, mem, num, milli, spec = zip(*rows)
    return openb.PodList(np.array(cpu), np.array(mem), np.array(num), np.array(milli), tuple(spec))


def setup(policy, cl, pl):
    specs = sorted(set(pl.spec))
    access = access_matrix(list(cl.models), specs)
    tp = typical_pods(pl.cpu, pl.milli, pl.num, pl.spec)
    ledger = openb.Ledger(cl)
    frag = openb.FragTracker(ledger, tp, access_matrix(list(cl.models), tp.spec))
    impl = openb.POLICY_CLASSES[policy](ledger, access, frag, np.random.default_rng(0))
    return ledger, impl


def test_fractional_pods_share_one_device_up_to_1000_milli():
    ledger = openb.Ledger(cluster((1,)))
    everywhere = np.ones(1, dtype=bool)
    ledger.place(0, 1000, 1, 1, 600, None)
    assert ledger.fits(1000, 1, 1, 400, everywhere)[0]
    assert not ledger.fits(1000, 1, 1, 500, everywhere)[0]
    ledger.place(0, 1000, 1, 1, 400, None)
    assert ledger.gpu_left[0, 0] == 0
    assert ledger.allocated_milli == 1000


def test_multi_gpu_pod_takes_whole_free_devices_on_one_node():
    ledger = openb.Ledger(cluster((2,)))
    everywhere = np.ones(1, dtype=bool)
    ledger.place(0, 1000, 1, 1, 100, None)
    assert not ledger.fits(1000, 1, 2, 1000, everywhere)[0]
    assert ledger.fits(1000, 1, 1, 1000, everywhere)[0]


def test_cpu_memory_and_gpu_model_are_enforced():
    cl = cluster((8, 2))
    ledger = openb.Ledger(cl)
    access = access_matrix(list(cl.models), ["T4"])[:, 0]
    assert list(ledger.fits(1000, 1, 1, 1000, access)) == [False, True]
    assert not ledger.fits(64001, 1, 0, 0, np.ones(2, dtype=bool)).any()
    assert not ledger.fits(1, 262145, 0, 0, np.ones(2, dtype=bool)).any()


def test_best_fit_device_picks_least_left_that_fits():
    assert openb.best_fit_device(np.array([1000, 300, 600, 0]), 250) == 1
    assert openb.best_fit_device(np.array([1000, 300, 600, 0]), 500) == 2


def test_inflation_reaches_130_percent_of_capacity():
    pl = pods([(1000, 1, 1, 1000, ""), (1000, 1, 1, 500, ""), (1000, 1, 0, 0, "")])
    order = openb.arrival_order(pl, 10_000, seed=1, inflate=1.3)
    requested = int((pl.num * pl.milli)[order].sum())
    assert requested >= 13_000
    assert requested - int((pl.num * pl.milli)[order[-1]]) < 13_000
    assert sorted(order[:3]) == [0, 1, 2]  # the whole list first, shuffled


def test_fragmentation_hand_computed():
    # one typical pod type: 1 x 600 milli, 1000 cpu (freq 1)
    pl = pods([(1000, 1, 1, 600, "")])
    tp = typical_pods(pl.cpu, pl.milli, pl.num, pl.spec)
    gl = np.array([[1000, 500, 0, 0, 0, 0, 0, 0], [500, 0, 0, 0, 0, 0, 0, 0]])
    frag = node_frag(np.array([2000, 2000]), gl, np.ones((2, 1), dtype=bool), tp)
    # node 0 fits (500 milli on the second device is a fragment); node 1 cannot host it
    assert list(frag) == [500.0, 500.0]
    frag = node_frag(np.array([500, 2000]), gl, np.ones((2, 1), dtype=bool), tp)
    assert frag[0] == 1500.0  # lacks CPU: all idle GPU counts


def test_bestfit_prefers_the_fuller_node():
    cl = cluster((8, 2))
    pl = pods([(1000, 1, 1, 1000, "")])
    ledger, impl = setup("bestfit", cl, pl)
    scores, _ = impl.scores(openb.Pod(1000, 1, 1, 1000, 0), np.array([0, 1]))
    # raw: 8-GPU node (1 - (63/128*.5 + 7000/8000*.5))*100 = 31.8 -> 31; 2-GPU node 71.8 -> 71
    assert list(scores) == [0, 100]


def test_dotprod_hand_computed():
    cl = cluster((8, 2))
    pl = pods([(1000, 1, 1, 1000, "")])
    ledger, impl = setup("dotprod", cl, pl)
    scores, _ = impl.scores(openb.Pod(64000, 1, 1, 1000, 0), np.array([0, 1]))
    # 1 - (64000/128000 * 64000/128000 + idle/8000 * 1000/8000) / 2
    assert list(scores) == [
        int(100 * (1 - (0.25 + 0.125) / 2)),
        int(100 * (1 - (0.25 + 0.25 / 8) / 2)),
    ]


def test_gpupacking_cases():
    cl = cluster((8, 2))
    pl = pods([(1000, 1, 1, 500, "")])
    ledger, impl = setup("gpupacking", cl, pl)
    pod = openb.Pod(1000, 1, 1, 500, 0)
    scores, _ = impl.scores(pod, np.array([0, 1]))
    assert list(scores) == [25, 31]  # case 3: 33 - free GPUs
    ledger.place(0, 1000, 1, 1, 300, None)
    scores, _ = impl.scores(pod, np.array([0, 1]))
    assert scores[0] == 100 - 70 // 10  # case 1: shared device with 700 left


def test_gpuclustering_prefers_same_tag():
    cl = cluster((8, 8))
    pl = pods([(1000, 1, 1, 1000, "")])
    ledger, impl = setup("gpuclustering", cl, pl)
    ledger.place(0, 1000, 1, 1, 1000, None)
    scores, _ = impl.scores(openb.Pod(1000, 1, 1, 1000, 0), np.array([0, 1]))
    assert list(scores) == [25 * 1000 // 8000 + 75, 25]


def test_binpack_matches_the_core_formula():
    cl = cluster((8, 2))
    pl = pods([(1000, 1, 1, 1000, "")])
    ledger, impl = setup("binpack", cl, pl)
    ledger.place(1, 2000, 1024, 1, 1000, None)
    pod = openb.Pod(4000, 2048, 1, 500, 0)
    scores, _ = impl.scores(pod, np.array([0, 1]))
    for i, node in enumerate([0, 1]):
        parts = [
            resource_binpacking_score(4000, 64000, 64000 - ledger.cpu_left[node], 2),
            resource_binpacking_score(2048, 262144, 262144 - ledger.mem_left[node], 2),
            resource_binpacking_score(
                0.5, cl.ngpu[node], cl.ngpu[node] - ledger.gpu_left[node].sum() / 1000, 20
            ),
        ]
        assert scores[i] == pytest.approx(sum(parts) / 24 * 100 * 10)


def test_fgd_prefers_the_placement_that_adds_least_fragmentation():
    cl = cluster((2, 2), models=("T4", "T4"))
    pl = pods([(1000, 1, 1, 1000, ""), (1000, 1, 2, 1000, "")])
    ledger, impl = setup("fgd", cl, pl)
    ledger.place(0, 1000, 1, 1, 1000, None)
    impl.fragmentation.node_changed(0)
    node, _ = impl.choose(openb.Pod(1000, 1, 1, 1000, 0), np.array([0, 1]))
    assert node == 0  # filling node 0 leaves node 1 whole for 2-GPU pods


def test_run_one_is_deterministic_and_reports_the_curve():
    cl = cluster((8, 2, 1))
    pl = pods([(1000, 1024, 1, 1000, ""), (2000, 1024, 1, 300, ""), (4000, 1024, 2, 1000, "")])
    a = openb.run_one(cl, pl, "fgd", seed=3)
    b = openb.run_one(cl, pl, "fgd", seed=3)
    assert a.alloc_by_arrived == b.alloc_by_arrived
    assert len(a.alloc_by_arrived) == 131
    assert a.alloc_by_arrived[-1] <= 100


def naive_node_frag(cpu_left, gpu_left, access, tp):
    """The per-type formula before the per-level rewrite, kept as the reference."""
    total = gpu_left.sum(axis=1)
    ge = gpu_left[:, None, :] >= tp.milli[None, :, None]
    host = ge.sum(axis=2) >= tp.num[None, :]
    small = (gpu_left[:, None, :] * ~ge).sum(axis=2)
    cpu_ok = cpu_left[:, None] >= tp.cpu[None, :]
    satisfied = access & host & cpu_ok & (tp.milli > 0)[None, :]
    return (np.where(satisfied, small, total[:, None]) @ tp.count) / tp.count.sum()


def mixed_pods(n=60, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        kind = rng.integers(4)
        cpu = int(rng.choice([2000, 4000, 8000, 12000]))
        if kind == 0:
            rows.append((cpu, 1024, 0, 0, ""))
        elif kind == 1:
            rows.append((cpu, 1024, 1, int(rng.choice([150, 300, 470, 810])), ""))
        else:
            rows.append((cpu, 1024, int(rng.choice([1, 2, 4])), 1000, ""))
    return pods(rows)


def test_node_frag_per_level_equals_the_per_type_formula():
    rng = np.random.default_rng(1)
    pl = mixed_pods()
    tp = typical_pods(pl.cpu, pl.milli, pl.num, pl.spec)
    gl = rng.choice([0, 100, 190, 530, 700, 1000], size=(50, openb.G))
    cpu = rng.integers(0, 16000, size=50)
    access = rng.random((50, len(tp))) < 0.8
    assert np.array_equal(node_frag(cpu, gl, access, tp), naive_node_frag(cpu, gl, access, tp))


def test_ledger_summaries_and_lazy_fragmentation_follow_placements():
    cl = cluster((8, 4, 2, 1, 8), cpu=32000)
    pl = mixed_pods()
    ledger, impl = setup("random", cl, pl)
    tracker = impl.fragmentation
    everywhere = np.ones(len(cl.names), dtype=bool)
    placed = 0
    for i in range(len(pl)):
        pod = openb.Pod(int(pl.cpu[i]), 1024, int(pl.num[i]), int(pl.milli[i]), 0)
        cand = np.flatnonzero(ledger.fits(pod.cpu, pod.mem, pod.num, pod.milli, everywhere))
        if len(cand) == 0:
            continue
        node, device = impl.choose(pod, cand)
        ledger.place(node, pod.cpu, pod.mem, pod.num, pod.milli, device)
        tracker.node_changed(node)
        placed += 1
    assert placed > 10
    gl = ledger.gpu_left
    assert np.array_equal(ledger.max_left, gl.max(axis=1))
    assert np.array_equal(ledger.full, (gl == 1000).sum(axis=1))
    assert np.array_equal(ledger.total_left, gl.sum(axis=1))
    assert np.array_equal(ledger.sorted_left, np.sort(gl, axis=1))
    expected = node_frag(ledger.cpu_left, gl, tracker.node_access, tracker.typical)
    assert np.allclose(tracker.frag, expected)


def test_fgd_shared_pod_scores_match_trying_every_device():
    cl = cluster((8, 8, 2), models=("T4",))
    pl = mixed_pods()
    ledger, impl = setup("fgd", cl, pl)
    # equal values on several devices: the evaluation of one device per value must not matter
    for node, device, milli in [(0, 0, 300), (0, 1, 300), (0, 2, 810), (1, 0, 470), (2, 1, 150)]:
        ledger.place(node, 1000, 1, 1, milli, device)
        impl.fragmentation.node_changed(node)
    pod = openb.Pod(2000, 1, 1, 190, 0)
    scores, devices = impl.scores(pod, np.arange(3))
    tp, frag = impl.typical, impl.fragmentation
    for node in range(3):
        best, best_dev = -np.inf, None
        for dev in range(openb.G):
            row = ledger.gpu_left[node].copy()
            if row[dev] < pod.milli:
                continue
            row[dev] -= pod.milli
            after = node_frag(
                np.array([ledger.cpu_left[node] - pod.cpu]),
                row[None, :],
                frag.node_access[node : node + 1],
                tp,
            )[0]
            score = np.floor(100 / (1 + np.exp(-(frag.frag[node] - after) / 1000)))
            if score > best:
                best, best_dev = score, dev
        assert scores[node] == best
        assert devices[node] == best_dev


def test_random_policy_draws_among_the_feasible_nodes():
    cl = cluster((8, 8, 8, 8, 8))
    pl = pods([(1000, 1, 1, 1000, "")])
    _, impl = setup("random", cl, pl)
    picks = {impl.choose(openb.Pod(1000, 1, 1, 1000, 0), np.arange(5))[0] for _ in range(40)}
    assert len(picks) > 2  # first fit would always give node 0


def test_firstfit_takes_the_lowest_feasible_index():
    cl = cluster((8, 8, 8))
    pl = pods([(1000, 1, 1, 1000, "")])
    _, impl = setup("firstfit", cl, pl)
    assert impl.choose(openb.Pod(1000, 1, 1, 1000, 0), np.array([1, 2]))[0] == 1


def four_way_tie(policy, ngpu):
    """A 1-GPU pod on four nodes that FGD's score ties: the tie-break alone decides."""
    ledger, impl = setup(policy, cluster(ngpu), pods([(1000, 1, 1, 1000, "")]))
    impl.scores = lambda pod, cand: (np.full(len(cand), 50.0), None)
    return ledger, impl, openb.Pod(1000, 1, 1, 1000, 0)


def test_fgd_pack_breaks_ties_towards_used_then_smaller_nodes():
    ledger, impl, pod = four_way_tie("fgd-pack", (8, 2, 8, 2))
    assert impl.choose(pod, np.arange(4))[0] == 1  # all idle: fewest GPUs, lowest index
    ledger.place(2, 1000, 1, 1, 1000, None)
    assert impl.choose(pod, np.arange(4))[0] == 2  # a node with a used GPU first
    impl.scores = lambda pod, cand: (np.array([50.0, 49.0, 10.0, 50.0]), None)
    assert impl.choose(pod, np.arange(4))[0] == 3  # the score still comes first


def test_fgd_fill_breaks_ties_towards_the_least_idle_node_as_a_share():
    ledger, impl, pod = four_way_tie("fgd-fill", (8, 2, 8, 4))
    assert impl.choose(pod, np.arange(4))[0] == 0  # all fully idle: the node order
    impl.rank = np.array([3, 2, 1, 0])
    assert impl.choose(pod, np.arange(4))[0] == 3  # ... the run's order, not the index
    ledger.place(0, 1000, 1, 3, 1000, None)  # node 0: 5 of 8 idle (0.625)
    ledger.place(3, 1000, 1, 2, 1000, None)  # node 3: 2 of 4 idle (0.5)
    assert impl.choose(pod, np.arange(4))[0] == 3
    ledger.place(1, 1000, 1, 1, 1000, None)  # node 1: 1 of 2 idle (0.5), ties with 3 -> order
    assert impl.choose(pod, np.arange(4))[0] == 3
    impl.rank = np.arange(4)
    assert impl.choose(pod, np.arange(4))[0] == 1
    impl.scores = lambda pod, cand: (np.array([50.0, 10.0, 49.0, 10.0]), None)
    assert impl.choose(pod, np.arange(4))[0] == 0  # the score still comes first


def test_binpack_weights_can_be_overridden_and_binpack_gpu_uses_gpu_only():
    cl = cluster((8, 2, 1))
    pl = pods([(4000, 1024, 1, 1000, ""), (8000, 2048, 1, 500, ""), (2000, 1024, 0, 0, "")])
    tuned = openb.run_one(cl, pl, "binpack", 5, binpack_weights={"cpu": 0, "memory": 0, "gpu": 1})
    gpu_only = openb.run_one(cl, pl, "binpack-gpu", 5)
    assert tuned.alloc_by_arrived == gpu_only.alloc_by_arrived
    _, impl = setup("binpack", cl, pl)
    impl.weights = {"cpu": 0, "memory": 0, "gpu": 1}
    scores, _ = impl.scores(openb.Pod(4000, 1024, 1, 1000, 0), np.array([0, 1, 2]))
    # GPU only: (1 + 0) / capacity x 100 x 10
    assert list(scores) == pytest.approx([1000 / 8, 1000 / 2, 1000])


def test_summary_reports_the_spread_over_seeds():
    cl = cluster((8, 2, 1))
    pl = mixed_pods(20)
    runs = [openb.run_one(cl, pl, "bestfit", s) for s in (1, 2, 3)]
    entry = openb.summarise(runs)["bestfit"]
    ends = [r.alloc_by_arrived[-1] for r in runs]
    assert entry["alloc_at_end_std"] == pytest.approx(np.std(ends), abs=1e-3)
    assert entry["alloc_at_end_per_seed"] == ends


@pytest.mark.parametrize(
    ("policy", "bestfit_for"),
    [("binpack+bestfit-whole", "whole"), ("binpack+bestfit-shared", "shared")],
)
def test_diagnostic_split_scores_each_pod_class_by_one_policy(policy, bestfit_for):
    cl = cluster((8, 2))
    pl = pods([(1000, 1, 1, 1000, "")])
    ledger, impl = setup(policy, cl, pl)
    ledger.place(0, 2000, 1024, 1, 300, 0)
    _, binpack = setup("binpack", cl, pl)
    _, bestfit = setup("bestfit", cl, pl)
    binpack.ledger = bestfit.ledger = ledger
    cand = np.array([0, 1])
    for pod, kind in [
        (openb.Pod(1000, 1, 1, 500, 0), "shared"),
        (openb.Pod(1000, 1, 2, 1000, 0), "whole"),
        (openb.Pod(1000, 1, 0, 0, 0), "whole"),
    ]:
        expected = (bestfit if kind == bestfit_for else binpack).scores(pod, cand)[0]
        assert list(impl.scores(pod, cand)[0]) == list(expected)
    assert policy not in openb.POLICIES
    assert policy in openb.DIAGNOSTIC_POLICIES


def test_node_rank_is_a_per_seed_permutation():
    a = openb.node_rank(50, 42)
    assert sorted(a) == list(range(50))
    assert list(a) == list(openb.node_rank(50, 42))  # deterministic
    assert list(a) != list(openb.node_rank(50, 43))  # drawn anew with each seed
    assert list(a) != list(range(50))


def test_name_tie_break_takes_the_lowest_ranked_node_not_the_lowest_index():
    # simulator.go prefixes node i's name with rand.Perm()[i]; selectHost takes the smallest name
    cl = cluster((8, 8, 8, 8))
    pl = pods([(1000, 1, 1, 1000, "")])
    pod = openb.Pod(1000, 1, 1, 1000, 0)
    for policy in ("firstfit", "fgd", "bestfit", "gpupacking"):
        _, impl = setup(policy, cl, pl)
        impl.tie_break = "name"
        impl.rank = np.array([3, 2, 0, 1])
        assert impl.choose(pod, np.arange(4))[0] == 2  # four idle nodes tie
        assert impl.choose(pod, np.array([0, 1, 3]))[0] == 3
        impl.tie_break = "first"
        impl.rank = np.arange(4)
        assert impl.choose(pod, np.array([1, 3]))[0] == 1
    ledger, impl = setup("fgd-pack", cl, pl)
    impl.tie_break, impl.rank = "name", np.array([3, 2, 0, 1])
    impl.scores = lambda pod, cand: (np.full(len(cand), 50.0), None)
    assert impl.choose(pod, np.arange(4))[0] == 2  # same size, all idle: lowest rank
    ledger.place(1, 1000, 1, 1, 1000, None)
    assert impl.choose(pod, np.arange(4))[0] == 1  # a used node still comes first


def test_run_one_uses_the_seed_node_order_by_default(monkeypatch):
    # Ranking the nodes in reverse must replay exactly like the reversed cluster in CSV order.
    ngpu = (8, 2)
    pl = pods([(1000, 1024, 1, 1000, ""), (1000, 1024, 1, 1000, ""), (4000, 1024, 8, 1000, "")])
    monkeypatch.setattr(openb, "node_rank", lambda n, seed: np.arange(n)[::-1].copy())
    for policy in ("firstfit", "fgd", "fgd-pack"):
        named = openb.run_one(cluster(ngpu, models=("T4",)), pl, policy, seed=5)
        reversed_first = openb.run_one(
            cluster(ngpu[::-1], models=("T4",)), pl, policy, seed=5, tie_break="first"
        )
        assert named.alloc_by_arrived == reversed_first.alloc_by_arrived
    # First fit in CSV order breaks the 8-GPU node with one-GPU pods; in the ranked order the
    # 2-GPU node comes first and the 8-GPU pod fits.
    named = openb.run_one(cluster(ngpu, models=("T4",)), pl, "firstfit", seed=5)
    first = openb.run_one(cluster(ngpu, models=("T4",)), pl, "firstfit", seed=5, tie_break="first")
    assert named.alloc_by_arrived[-1] == 100.0
    assert first.alloc_by_arrived[-1] == 30.0


def test_tie_break_base_without_keys_picks_like_fgd():
    _, base, pod = four_way_tie("fgd", (8, 2, 8, 4))
    tied = openb.FgdTieBreakPolicy(base.ledger, base.access, base.fragmentation, base.rng)
    tied.scores = base.scores
    for rank in ([3, 2, 1, 0], [1, 3, 0, 2]):
        base.rank = tied.rank = np.array(rank)
        assert tied.choose(pod, np.arange(4)) == base.choose(pod, np.arange(4))

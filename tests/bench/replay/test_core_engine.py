"""The replay through the live core decides exactly like the numpy reference it implements."""

import numpy as np
import pytest

from bench.replay import openb
from bench.replay.core_engine import conf_for, run_core
from bench.replay.fragmentation import typical_pods


def _cluster(n=24, seed=0):
    rng = np.random.default_rng(seed)
    ngpu = rng.choice([2, 4, 8], n)
    return openb.Cluster(
        names=tuple(f"node-{i:03d}" for i in range(n)),
        cpu=rng.choice([32000, 64000, 96000], n).astype(np.int64),
        mem=np.full(n, 262144, dtype=np.int64),
        ngpu=ngpu.astype(np.int64),
        models=tuple(rng.choice(["T4", "V100", "G2"], n).tolist()),
    )


# GPU-model constraints as the openb gpuspec lists state them: one model, several, and the
# same models listed twice over (another type for the simulator)
SPECS = ("T4", "G2|V100", "V100|T4", "G2|V100|V100")


def _pods(count=260, seed=1, specs=False):
    rng = np.random.default_rng(seed)
    shapes = [(0, 0)] * 3 + [(1, 1000)] * 4 + [(2, 1000), (4, 1000), (8, 1000)]
    shapes += [(1, m) for m in (100, 250, 300, 500, 500, 700)]
    picked = [shapes[i] for i in rng.integers(len(shapes), size=count)]
    spec = ("",) * count
    if specs:
        spec = tuple(rng.choice(("",) * 4 + SPECS, count).tolist())
    return openb.PodList(
        cpu=rng.choice([1000, 2000, 4000, 8000, 16000], count).astype(np.int64),
        mem=rng.choice([1024, 4096, 16384], count).astype(np.int64),
        num=np.array([n for n, _ in picked], dtype=np.int64),
        milli=np.array([m for _, m in picked], dtype=np.int64),
        spec=spec,
    )


@pytest.mark.parametrize("specs", [False, True], ids=["any-model", "gpu-spec"])
@pytest.mark.parametrize("policy", ["binpack", "gpufrag", "gpufrag-fill"])
@pytest.mark.parametrize("seed", [42, 43, 44])
def test_core_placements_equal_the_reference(policy, seed, specs):
    cluster, pods = _cluster(), _pods(specs=specs)
    reference = openb.run_one(cluster, pods, policy, seed)
    core = run_core(cluster, pods, policy, seed)
    assert core.extra["placement_digest"] == reference.extra["placement_digest"]
    assert core.alloc_by_arrived == reference.alloc_by_arrived
    assert core.failed == reference.failed > 0  # the run reaches a full cluster
    assert core.frag_by_arrived == pytest.approx(reference.frag_by_arrived, nan_ok=True)


def test_the_typical_pods_constraints_change_placements(monkeypatch):
    # the gpu-spec identity above is not one where constraints never matter: FGD whose typical
    # pods leave the constraints out places these pods elsewhere
    cluster, pods = _cluster(), _pods(specs=True)
    with_specs = openb.run_one(cluster, pods, "gpufrag", 42).extra["placement_digest"]
    monkeypatch.setattr(
        openb,
        "typical_pods",
        lambda cpu, milli, num, spec: typical_pods(cpu, milli, num, ("",) * len(spec)),
    )
    without = openb.run_one(cluster, pods, "gpufrag", 42).extra["placement_digest"]
    assert with_specs != without


def test_a_different_policy_places_differently():
    # the digest tells policies apart: the equality above is not a digest of nothing
    cluster, pods = _cluster(), _pods()
    binpack = run_core(cluster, pods, "binpack", 42).extra["placement_digest"]
    gpufrag = run_core(cluster, pods, "gpufrag", 42).extra["placement_digest"]
    assert binpack != gpufrag


def test_only_the_core_plugins_run_in_the_core():
    with pytest.raises(ValueError, match="not 'bestfit'"):
        conf_for("bestfit")

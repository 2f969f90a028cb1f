import pytest

from bench.replay import queues


def job(name, submit, duration, gpus, queue="vc"):
    return queues.Job(name, queue, submit, duration, gpus)


def test_jain_index():
    assert queues.jain([1, 1, 1]) == 1.0
    assert queues.jain([1, 0]) == pytest.approx(0.5)
    assert queues.jain([]) == 1.0


def test_fifo_partition_on_a_three_job_toy_trace():
    jobs = [job("a", 0, 100, 8), job("b", 10, 50, 8), job("c", 20, 10, 1)]
    out = queues.simulate_partition(jobs, 8, "fifo")
    # a runs 0-100; b waits to 100 and c waits behind b (head-of-line) until 150
    assert [(j.first_start, j.end) for j in jobs] == [(0, 100), (100, 150), (150, 160)]
    assert out["avg_queueing_s"] == pytest.approx((0 + 90 + 130) / 3, abs=0.1)
    assert out["avg_jct_s"] == pytest.approx((100 + 140 + 140) / 3, abs=0.1)


def test_sjf_partition_runs_the_shorter_job_first():
    jobs = [job("a", 0, 100, 8), job("b", 10, 50, 8), job("c", 20, 10, 8)]
    queues.simulate_partition(jobs, 8, "sjf")
    assert [j.first_start for j in jobs] == [0, 110, 100]


def test_gang_pods_and_consolidated_placement():
    assert job("x", 0, 1, 20).pods() == [8, 8, 4]
    free = [8, 3, 8]
    assert queues.place_consolidated(free, [2]) == [1]
    assert queues.place_consolidated(free, [8, 8]) is not None
    assert queues.place_consolidated(free, [8]) is None


def test_shared_cluster_through_the_core_runs_and_borrows():
    # Guarantees of half a VC leave 12 of the 24 GPUs borrowable, so "big" (8-GPU VC) can
    # run its 16-GPU gang on GPUs "small" does not use.
    jobs = [job("a", 0, 100, 16, "big"), job("b", 0, 100, 8, "small"), job("c", 5, 50, 8, "small")]
    out = queues.run_shared(jobs, {"big": 8, "small": 16}, step=1.0, guarantee_fraction=0.5)
    assert out["finished"] == 3
    assert not out["stopped_early"]
    assert out["avg_queueing_s"] < 60


def test_guarantees_summing_to_the_cluster_leave_nothing_to_borrow():
    # Volcano proportion: realCapability = cluster - sum(guarantees) + own guarantee. With each
    # queue guaranteed its whole VC that is exactly the VC, so the 16-GPU gang of the 8-GPU
    # queue never fits, even on an idle cluster (the old xfail of the test above).
    jobs = [job("a", 0, 100, 16, "big"), job("b", 0, 100, 8, "small")]
    out = queues.run_shared(jobs, {"big": 8, "small": 16}, step=1.0, guarantee_fraction=1.0)
    assert out["finished"] == 1
    assert out["stopped_early"]


def test_reclaim_gives_a_squeezed_queue_its_guarantee_back():
    # a and c borrow the whole 24-GPU cluster (each capped at 24 - 8 + 4 = 20); b then asks
    # for its guarantee of 4: reclaim evicts a borrower and b starts one step later.
    jobs = [
        job("a1", 0, 1000, 8, "a"),
        job("a2", 0, 1000, 4, "a"),
        job("c1", 0, 1000, 8, "c"),
        job("c2", 0, 1000, 4, "c"),
        job("b1", 10, 100, 4, "b"),
    ]
    out = queues.run_shared(jobs, {"a": 8, "b": 8, "c": 8}, step=1.0, guarantee_fraction=0.5)
    assert out["preemptions"] >= 1
    b = out["per_queue"]["b"]
    assert b["avg_queueing_s"] == pytest.approx(1.0)
    assert b["guarantee_gpus"] == 4
    assert b["starved_within_guarantee_time_share"] == pytest.approx(1 / 100, abs=1e-3)
    assert not out["stopped_early"]


def test_utilisation_ends_each_job_at_its_own_finish_time():
    # No cycle runs between the two jobs (nothing waits), yet the first job stops counting at
    # t=100: busy 8 GPUs x 200 s over 16 GPUs x 1100 s.
    jobs = [job("x", 0, 100, 8, "a"), job("y", 1000, 100, 8, "a")]
    out = queues.run_shared(jobs, {"a": 16}, step=60.0, guarantee_fraction=0.5)
    assert out["cycles"] == 2
    assert out["gpu_utilisation"] == pytest.approx(1600 / (16 * 1100), abs=1e-4)
    assert out["jain_satisfaction"] == 1.0
    assert out["per_queue"]["a"]["below_guarantee_time_share"] == 0.0


def test_vc_scale_shrinks_every_vc_to_at_least_one_node(tmp_path):
    path = tmp_path / "vcs.csv"
    path.write_text("vc,node num\nbig,64\nsmall,1\n")
    assert queues.load_vcs(path) == {"big": 512, "small": 8}
    assert queues.load_vcs(path, 0.25) == {"big": 128, "small": 8}


def test_vcs_are_grouped_into_tenants_of_about_equal_size():
    vcs = {"a": 64, "b": 32, "c": 32, "d": 16, "e": 8, "f": 8}
    tenants = queues.group_tenants(vcs, 3)
    sizes = {}
    for vc, tenant in tenants.items():
        sizes[tenant] = sizes.get(tenant, 0) + vcs[vc]
    assert tenants == {"a": "t1", "b": "t2", "c": "t3", "d": "t2", "e": "t3", "f": "t3"}
    assert sizes == {"t1": 64, "t2": 48, "t3": 48}


def test_tree_mode_lends_inside_a_tenant_and_reports_per_tenant():
    # Tenant t1 = queues a (busy) and b (idle), tenant t2 = queue c. In the tree a may use b's
    # share (lent inside t1) before c's tenant lends anything; c's 8-GPU job arrives later and
    # gets t2's guarantee back by reclaim.
    jobs = [
        job("a1", 0, 1000, 8, "a"),
        job("a2", 0, 1000, 8, "a"),
        job("a3", 0, 1000, 8, "a"),
        job("c1", 10, 100, 8, "c"),
    ]
    vcs = {"a": 8, "b": 8, "c": 8}
    tenants = {"a": "t1", "b": "t1", "c": "t2"}
    out = queues.run_shared(jobs, vcs, step=1.0, guarantee_fraction=1.0, tenants=tenants, tree=True)
    assert out["tree"] is True
    t1, t2 = out["per_tenant"]["t1"], out["per_tenant"]["t2"]
    assert (t1["queues"], t1["guarantee_gpus"], t2["guarantee_gpus"]) == (["a", "b"], 16, 8)
    assert t1["avg_queueing_s"] == 0  # a runs two 8-GPU gangs at once: b's share is lent to it
    assert t2["avg_queueing_s"] <= 2  # c's tenant is idle at first, so its share is free
    assert not out["stopped_early"]


def test_flat_and_tree_runs_report_the_same_tenants():
    jobs = [job("a1", 0, 100, 8, "a"), job("c1", 0, 100, 8, "c")]
    vcs = {"a": 8, "b": 8, "c": 8}
    tenants = {"a": "t1", "b": "t1", "c": "t2"}
    flat = queues.run_shared(jobs, vcs, step=1.0, tenants=tenants)
    tree = queues.run_shared(jobs, vcs, step=1.0, tenants=tenants, tree=True)
    assert (flat["tree"], tree["tree"]) == (False, True)
    assert set(flat["per_tenant"]) == set(tree["per_tenant"]) == {"t1", "t2"}


def test_upstream_proportion_leaves_gpus_idle_that_the_work_conserving_conf_lends():
    # a (weight 16) waits on a 2 x 8 gang that fits no two free nodes; b (weight 8) is at its
    # share of 8, so upstream holds b2 (4 GPUs) back beside a free node until b1 ends at 1000.
    jobs = [
        job("a1", 0, 1000, 8, "a"),
        job("b1", 0, 1000, 8, "b"),
        job("a2", 5, 100, 16, "a"),
        job("b2", 5, 100, 4, "b"),
    ]
    vcs = {"a": 16, "b": 8}
    upstream = queues.run_shared(jobs, vcs, step=1.0, guarantee_fraction=0.5)
    lending = queues.run_shared(jobs, vcs, step=1.0, guarantee_fraction=0.5, work_conserving=True)
    assert upstream["idle_gpu_seconds_while_fitting_job_waits"] == pytest.approx(4 * 995, abs=20)
    assert upstream["per_queue"]["b"]["avg_queueing_s"] == pytest.approx(995 / 2, abs=5)
    assert lending["idle_gpu_seconds_while_fitting_job_waits"] == 0
    assert lending["per_queue"]["b"]["avg_queueing_s"] == 0
    assert lending["preemptions"] == upstream["preemptions"] == 0


def test_the_idle_figure_packs_waiting_jobs_within_their_queues_ceilings():
    # Three nodes, one busy: p and r (8 GPUs each, queue q) take the two free ones and s (4)
    # finds no room; with q allowed 16 and holding 8, only p counts and s takes r's node.
    everyone = [job("x", 0, 1, 8, "q"), job("p", 0, 1, 8, "q"), job("r", 1, 1, 8, "q")]
    everyone.append(job("s", 2, 1, 4, "z"))
    by_name = {j.name: j for j in everyone}
    running = {"x": {"x-0": "n000"}}
    pending = {name: by_name[name] for name in ("p", "r", "s")}
    assert queues.fitting_idle_gpus(3, running, pending, by_name) == 16
    assert queues.fitting_idle_gpus(3, running, pending, by_name, {"q": 16}, {"q": 8}) == 12


@pytest.mark.parametrize("tree", [False, True])
def test_the_work_conserving_conf_turns_both_switches_on(tree):
    upstream = queues.parse_conf_text(queues.conf_text(tree=tree, work_conserving=False))
    seed_like = queues.parse_conf_text(queues.conf_text(tree=tree, work_conserving=True))
    off = {"lendIdle": False, "excludeNeverRunnable": False}
    assert upstream.plugin("proportion").arguments == off
    assert seed_like.plugin("proportion").arguments == dict.fromkeys(off, True)
    assert seed_like.plugin("proportion").enabled("enableHierarchy") is tree

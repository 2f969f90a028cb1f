from tests.scheduler.core.builders import GI, make_job, make_node, make_queue, make_task, res, run


def _tiers(arguments):
    return [{"plugins": [{"name": "gang"}, {"name": "nodeorder", "arguments": arguments}]}]


def test_balanced_resource_prefers_the_balanced_node():
    nodes = [
        make_node("n1", gpu=0, cpu=2000, memory=2 * GI),
        make_node("n2", gpu=0, cpu=4000, memory=2 * GI),
    ]
    job = make_job("j", "q", [make_task("t", requests=res(cpu=1000, memory=GI))], 1)
    tiers = _tiers({"leastrequested.weight": 0, "balancedresource.weight": 10})
    result = run(nodes, [make_queue("q")], [job], actions="allocate", tiers=tiers)
    assert [(b.task, b.node) for b in result.binds] == [("t", "n1")]


def test_most_requested_packs():
    nodes = [
        make_node("n1", gpu=0, cpu=8000, memory=8 * GI),
        make_node("n2", gpu=0, cpu=8000, memory=8 * GI),
    ]
    busy = make_task("busy", requests=res(cpu=4000, memory=4 * GI), status="Running", node="n2")
    jobs = [make_job("b", "q", [busy], 0), make_job("j", "q", [make_task("t", requests=res())], 1)]
    tiers = _tiers(
        {"leastrequested.weight": 0, "balancedresource.weight": 0, "mostrequested.weight": 1}
    )
    result = run(nodes, [make_queue("q")], jobs, actions="allocate", tiers=tiers)
    assert [(b.task, b.node) for b in result.binds] == [("t", "n2")]

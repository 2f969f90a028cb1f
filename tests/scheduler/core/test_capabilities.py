"""The framework acts on what plugins declare, never on which plugin registered a hook."""

import ast
import dataclasses
import pathlib
import types

import pytest

import scheduler.core
from scheduler.core import plugins
from scheduler.core.actions.allocate import AllocateState
from scheduler.core.config import default_conf, parse_conf
from scheduler.core.cycle import open_session, run_cycle
from scheduler.core.plugins._quota import new_attr
from scheduler.core.session import Session
from scheduler.core.types import PodGroupPhase, Snapshot
from scheduler.core.verdict import quota_conclusion
from tests.scheduler.core.builders import make_job, make_node, make_queue, make_task


@pytest.fixture(autouse=True)
def _strangers(monkeypatch):
    """Plugins of names the framework has never heard of; each registers nothing by itself
    (the tests register hooks for them)."""
    for name in ("mine", "a", "b", "myquota"):
        plugin = types.SimpleNamespace(on_session_open=lambda ssn: None)
        module = types.SimpleNamespace(PLUGIN_NAME=name, build=lambda arguments, p=plugin: p)
        monkeypatch.setitem(plugins.PLUGINS, name, module)


def _snapshot(*jobs):
    nodes = tuple(make_node(f"n{i}") for i in range(4))
    return Snapshot(nodes, (make_queue("q"),), jobs or (make_job("p", "q", [make_task("p0")]),))


def _session(tiers, *jobs) -> Session:
    conf = parse_conf({"actions": "allocate", "tiers": tiers})
    return open_session(_snapshot(*jobs), conf)


def test_an_undeclared_scorer_turns_the_class_shortcut_off():
    """A scorer that says nothing about itself may look at anything: every node is scored."""
    ssn = _session([{"plugins": [{"name": "gang"}, {"name": "binpack"}, {"name": "mine"}]}])
    task = ssn.tasks["p0"]
    assert AllocateState(ssn).class_equivalent(task)
    ssn.add_node_order_fn("mine", lambda task, node: 0.0)
    assert not ssn.scorers_state_only()
    assert not AllocateState(ssn).class_equivalent(task)
    ssn.add_node_order_fn("mine", lambda task, node: 0.0, state_only=True)
    assert AllocateState(ssn).class_equivalent(task)


def test_a_predicate_reading_other_pods_turns_the_class_shortcut_off_while_enabled():
    ssn = _session(
        [{"plugins": [{"name": "gang"}, {"name": "binpack"}, {"name": "mine"}]}],
    )
    task = ssn.tasks["p0"]
    ssn.add_predicate_fn("mine", lambda task, node: None, reads_pods=True)
    assert not AllocateState(ssn).class_equivalent(task)
    off = [
        {
            "plugins": [
                {"name": "gang"},
                {"name": "binpack"},
                {"name": "mine", "enablePredicate": False},
            ]
        }
    ]
    ssn = _session(off)
    ssn.add_predicate_fn("mine", lambda task, node: None, reads_pods=True)
    assert AllocateState(ssn).class_equivalent(ssn.tasks["p0"])


def test_the_predicates_plugin_declares_pods_with_anti_affinity():
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}
            ]
        }
    }
    tiers = [{"plugins": [{"name": "gang"}, {"name": "predicates"}, {"name": "binpack"}]}]
    plain = _session(tiers)
    assert AllocateState(plain).class_equivalent(plain.tasks["p0"])
    running = make_job("r", "q", [make_task("r0", status="Running", node="n0", affinity=anti)])
    repelled = _session(tiers, running, make_job("p", "q", [make_task("p0")], 1))
    assert not AllocateState(repelled).class_equivalent(repelled.tasks["p0"])


class _Shares:
    """A quota plugin under a name the framework has never heard of."""

    binds_deserved = False
    divides_tree = False

    def __init__(self, attr):
        self.attr = attr

    def share(self, queue):
        return self.attr if queue == self.attr.queue.name else None


def test_a_quota_plugin_of_any_name_gives_the_shares_and_binds_when_its_hook_is_on():
    tiers = [{"plugins": [{"name": "gang"}, {"name": "myquota"}]}]
    ssn = _session(tiers)
    assert ssn.queue_share("q") is None
    attr = new_attr(ssn.queues["q"])
    shares = _Shares(attr)
    ssn.add_queue_shares("myquota", shares)
    assert ssn.queue_share("q") is attr
    assert ssn.binding_quota("q") is None  # its allocatable hook is not registered
    ssn.add_allocatable_fn("myquota", lambda queue, task: False)
    assert ssn.binding_quota("q") == (shares, attr)
    off = [{"plugins": [{"name": "gang"}, {"name": "myquota", "enabledAllocatable": False}]}]
    ssn = _session(off)
    ssn.add_queue_shares("myquota", shares)
    ssn.add_allocatable_fn("myquota", lambda queue, task: False)
    assert ssn.binding_quota("q") is None
    assert quota_conclusion(ssn, ssn.jobs["p"], ssn.queues["q"]) == ""


def test_the_allocatable_hook_explains_with_the_sentence_it_declared():
    tiers = [{"plugins": [{"name": "gang"}, {"name": "a"}, {"name": "b"}]}]
    ssn = _session(tiers)
    queue, task = ssn.queues["q"], ssn.tasks["p0"]
    ssn.add_allocatable_fn("a", lambda queue, task: False)
    assert ssn.explain_allocatable(queue, task) == "queue q has no room for p0 (a)"
    ssn = _session(tiers)
    ssn.add_allocatable_fn("a", lambda queue, task: True)
    ssn.add_allocatable_fn("b", lambda queue, task: True, explain=lambda q, t: f"{q.name} full")
    # the refusal came from a gang's other pods: the declared sentence still explains it
    assert ssn.explain_allocatable(queue, task) == "q full"


def test_preempt_keeps_failures_per_job_only_when_a_preemptable_hook_declares_it():
    ssn = _session([{"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "mine"}]}])
    assert not ssn.preemptable_by_preemptor_job()
    ssn.add_preemptable_fn("mine", lambda p, c: (c, 1), by_preemptor_job=True)
    assert ssn.preemptable_by_preemptor_job()
    drf = _session([{"plugins": [{"name": "priority"}, {"name": "drf"}]}])
    assert drf.preemptable_by_preemptor_job()


def test_rescheduling_is_reported_by_the_hook_that_declares_it():
    snapshot = _snapshot()
    assert run_cycle(snapshot, default_conf()).rescheduling_ran  # never ran before: due
    later = Snapshot(snapshot.nodes, snapshot.queues, snapshot.jobs, 10.0, last_rescheduling=5.0)
    assert not run_cycle(later, default_conf()).rescheduling_ran
    ssn = _session([{"plugins": [{"name": "gang"}, {"name": "mine"}]}])
    ssn.add_victim_tasks_fn("mine", list)
    assert not ssn.rescheduling_ran()
    ssn.add_victim_tasks_fn("mine", list, rescheduling=True)
    assert ssn.rescheduling_ran()


def test_victim_tasks_are_asked_lazily_plugin_by_plugin():
    tiers = [{"plugins": [{"name": "gang"}, {"name": "a"}, {"name": "b"}]}]
    ssn = _session(tiers)
    asked = []

    def victims(name):
        def fn():
            asked.append(name)
            yield ssn.tasks["p0"]

        return fn

    ssn.add_victim_tasks_fn("a", victims("a"))
    ssn.add_victim_tasks_fn("b", victims("b"))
    stream = ssn.victim_tasks()
    assert next(stream) is ssn.tasks["p0"]
    assert asked == ["a"]
    assert list(stream) == [ssn.tasks["p0"]]
    assert asked == ["a", "b"]


def test_drf_declares_that_a_failed_preemptor_says_nothing_of_another_job_of_its_shape():
    """Job a (already half the cluster) may not take from v under drf; job b, of the same
    queue, priority and pod shape but holding nothing, may. Without the declaration preempt
    would carry a's failure over to b."""
    nodes = (make_node("n1"), make_node("n2"))
    victim = make_job(
        "v", "q", [make_task(f"v{i}", status="Running", node="n1") for i in range(8)], 0
    )
    victim = dataclasses.replace(victim, priority=1, min_available=1)
    a_tasks = [make_task(f"a{i}", status="Running", node="n2") for i in range(8)]
    a = dataclasses.replace(
        make_job("a", "q", [*a_tasks, make_task("a8")], 1), priority=10, min_available=9
    )
    b = make_job("b", "q", [make_task("b0")], 2)
    b = dataclasses.replace(b, priority=10, phase=PodGroupPhase.INQUEUE)
    tiers = [
        {
            "plugins": [
                {"name": "priority"},
                {"name": "gang"},
                {"name": "drf", "enableJobOrder": False},
            ]
        }
    ]
    conf = parse_conf({"actions": "preempt", "tiers": tiers})
    result = run_cycle(Snapshot(nodes, (make_queue("q"),), (victim, a, b)), conf)
    assert [(p.task, p.node) for p in result.pipelined] == [("b0", "n1")]
    assert [(e.task, e.preemptor_task) for e in result.evictions] == [("v7", "b0")]


# The framework's own modules: they read declarations, never plugin names or attributes.
FRAMEWORK = [
    "session.py",
    "dispatch.py",
    "registry.py",
    "hooks.py",
    "cycle.py",
    "statement.py",
    "verdict.py",
    "reasons.py",
    "actions",
]
# The modules that hold the hooks' registrations (``*_fns``); the rest asks the dispatchers.
HOOK_OWNERS = {"dispatch.py", "registry.py"}
# "rescheduling" is also a kind of eviction (preempt, reclaim, rescheduling, admin), which the
# preempt action records for the evictions the rescheduling hook asks for.
EVICTION_KINDS = {"rescheduling"}


def _framework_sources():
    root = pathlib.Path(scheduler.core.__file__).parent
    for entry in FRAMEWORK:
        path = root / entry
        yield from sorted(path.glob("*.py")) if path.is_dir() else [path]


def test_the_framework_names_no_plugin_and_probes_none():
    names = set(plugins.PLUGINS) - {"mine", "a", "b", "myquota"}
    found = []
    for path in _framework_sources():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Constant) and node.value in names - EVICTION_KINDS:
                found.append(f"{where} names plugin {node.value!r}")
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in (
                "getattr",
                "hasattr",
            ):
                found.append(f"{where} probes an attribute")
            elif isinstance(node, ast.Attribute) and node.attr.endswith("_fns"):
                if path.name not in HOOK_OWNERS:
                    found.append(f"{where} reads the hook {node.attr} instead of its dispatcher")
            elif isinstance(node, ast.Attribute) and node.attr == "plugins":
                # the session declares the registry and the cycle fills it from the conf;
                # nothing else looks a plugin up
                declared = path.name == "session.py" and isinstance(node.ctx, ast.Store)
                if not declared and path.name != "cycle.py":
                    found.append(f"{where} reads plugins by name")
    assert found == []

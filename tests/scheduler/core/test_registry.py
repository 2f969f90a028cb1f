"""Each hook is registered by a method of its own shape: mypy refuses a plugin that registers
a function of another shape or declares what its hook has no use for."""

import os
import pathlib
import textwrap

import pytest
from mypy import api

ROOT = pathlib.Path(__file__).resolve().parents[3]

PLUGIN = """
from scheduler.core.hooks import FitError
from scheduler.core.session import Session
from scheduler.core.state import Job, Node, Task
from scheduler.core.types import Vote


def on_session_open(ssn: Session) -> None:
    def job_order(left: Job, right: Job) -> int:
        return 0

    def fits(task: Task, node: Node) -> FitError | None:
        return None

    ssn.add_job_order_fn("mine", job_order, key=lambda job: -job.priority)
    ssn.add_predicate_fn("mine", fits, reads_pods=True, lasting=fits)
    ssn.add_node_order_fn("mine", lambda task, node: 1.0, state_only=True)
    ssn.add_preemptable_fn("mine", lambda p, c: (c, Vote.PERMIT), by_preemptor_job=True)
    ssn.add_job_enqueueable_fn("mine", lambda job: Vote.ABSTAIN)
"""


def _mypy(source: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """mypy --strict's errors on ``source``, each as "line: message"."""
    path = tmp_path / "plugin.py"
    path.write_text(textwrap.dedent(source))
    monkeypatch.chdir(ROOT)  # where the scheduler package is found
    report, _, _ = api.run(["--strict", "--no-incremental", "--config-file", os.devnull, str(path)])
    prefix = f"{path}:"
    return [line[len(prefix) :] for line in report.splitlines() if line.startswith(prefix)]


def test_a_plugin_registering_each_hook_by_its_shape_passes(tmp_path, monkeypatch):
    assert _mypy(PLUGIN, tmp_path, monkeypatch) == []


@pytest.mark.parametrize(
    ("registration", "error"),
    [
        pytest.param(
            'ssn.add_job_order_fn("mine", fits)',
            'Argument 2 to "add_job_order_fn" of "HookRegistry" has incompatible type',
            id="a-predicate-as-a-job-order",
        ),
        pytest.param(
            'ssn.add_task_order_fn("mine", job_order)',
            'Argument 2 to "add_task_order_fn" of "HookRegistry" has incompatible type',
            id="a-job-order-as-a-task-order",
        ),
        pytest.param(
            'ssn.add_node_order_fn("mine", lambda task, node: "high")',
            "Incompatible return value type",
            id="a-score-that-is-no-number",
        ),
        pytest.param(
            'ssn.add_predicate_fn("mine", fits, state_only=True)',
            'Unexpected keyword argument "state_only" for "add_predicate_fn"',
            id="a-declaration-the-hook-has-not",
        ),
        pytest.param(
            'ssn.add_job_ready_fn("mine", lambda job: job.tasks)',
            "Incompatible return value type",
            id="a-job-ready-fn-answering-no-bool",
        ),
    ],
)
def test_a_registration_of_another_shape_fails_mypy(tmp_path, monkeypatch, registration, error):
    source = PLUGIN + f"    {registration}\n"
    line = len(source.splitlines())
    errors = _mypy(source, tmp_path, monkeypatch)
    assert errors, "mypy accepted it"
    assert all(e.startswith(f"{line}: ") for e in errors), errors  # only the added line
    assert any(e.startswith(f"{line}: error: {error}") for e in errors), errors

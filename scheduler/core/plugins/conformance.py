"""conformance: never evict system pods.

Source: volcano-sh/volcano pkg/scheduler/plugins/conformance/conformance.go (kube-system namespace
and system-critical priority classes are protected; the snapshot carries no priority class, so
the namespace is the test).
"""

from __future__ import annotations

from typing import Any

from scheduler.core.session import Session
from scheduler.core.state import Task
from scheduler.core.types import Vote

PLUGIN_NAME = "conformance"
_PROTECTED_NAMESPACES = frozenset({"kube-system"})


def build(arguments: dict[str, Any]) -> ConformancePlugin:
    return ConformancePlugin()


class ConformancePlugin:
    name = PLUGIN_NAME

    def on_session_open(self, ssn: Session) -> None:
        def evictable(preemptor: Task, candidates: list[Task]) -> tuple[list[Task], int]:
            victims = [
                task
                for task in candidates
                if ssn.jobs[task.job].info.namespace not in _PROTECTED_NAMESPACES
            ]
            return victims, Vote.PERMIT

        ssn.add_preemptable_fn(self.name, evictable)
        ssn.add_reclaimable_fn(self.name, evictable)

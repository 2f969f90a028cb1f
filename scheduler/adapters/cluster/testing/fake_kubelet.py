"""A fake kubelet for the local real control plane (control_plane.py): registers GPU nodes as
API objects and drives the pods bound to them through the API server, by the same rules as the
emulator's kubelets (kubelet.py): admission against the node's allocatable (OutOf<resource>),
image pull failures on demand, Pending -> Running, `sleep N` -> Succeeded, and graceful
deletion confirmed (the final delete with grace 0, as a kubelet does once containers stop).

It only acts on nodes labelled with its owner (OWNER_LABEL), so a test's kubelet and the one
`control_plane up --nodes N` starts never drive each other's pods, and pods on nodes nobody owns
(another test's, a deleted node's) are left alone, as with a node whose kubelet is gone.

    python -m scheduler.adapters.cluster.testing.fake_kubelet --kubeconfig PATH --owner NAME
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from scheduler.adapters.cluster.testing.kubelet import (
    FINISHED_PHASES,
    Kubelet,
    finished_status,
    kubelet_step,
    node_ready,
    parse_time,
    usage_of,
)

OWNER_LABEL = "fake-kubelet.gpuportal.example/owner"
GPU_RESOURCE = "nvidia.com/gpu"
logger = logging.getLogger(__name__)
Raw = dict[str, Any]


def node_body(
    name: str,
    *,
    owner: str,
    gpus: int = 8,
    cpu: str = "96",
    memory: str = "768Gi",
    pods: int = 110,
    gpu_resource: str = GPU_RESOURCE,
    labels: dict[str, str] | None = None,
    taints: list[Raw] | None = None,
) -> Raw:
    """A Node as a kubelet registers it: capacity = allocatable, Ready."""
    resources = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if gpus:
        resources[gpu_resource] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {**(labels or {}), OWNER_LABEL: owner}},
        "spec": {"taints": taints or []},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [ready_condition(True)],
        },
    }


def ready_condition(ready: bool) -> Raw:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": "KubeletReady" if ready else "KubeletStopped",
        "message": "fake kubelet" if ready else "fake kubelet stopped posting status",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


class FakeKubelet:
    """The node agent of every node labelled with `owner`. `tick()` does one pass; `start()`
    runs passes in a thread until `stop()`."""

    def __init__(
        self,
        api: client.CoreV1Api,
        *,
        owner: str,
        kubelet: Kubelet | None = None,
        pod_selector: str = "",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.owner = owner
        self.kubelet = kubelet or Kubelet()
        self.pod_selector = pod_selector
        self.clock = clock
        self._admitted: set[str] = set()  # pod uids
        self._pull_attempts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- nodes -------------------------------------------------------------------------------

    def register_node(self, name: str, **fields: Any) -> None:
        body = node_body(name, owner=self.owner, **fields)
        self.api.create_node(body)  # type: ignore[arg-type]  # the client takes plain dicts too
        # TaintNodesByCondition admission gives a new node node.kubernetes.io/not-ready, which
        # the node lifecycle controller lifts on its next pass once the node is Ready (up to
        # 5 s): lifted here at once, so a test's first cycle sees the node usable.
        self.api.patch_node(name, {"spec": {"taints": body["spec"]["taints"] or None}})

    def register_nodes(self, names: Iterable[str], **fields: Any) -> None:
        for name in names:
            self.register_node(name, **fields)

    def set_ready(self, name: str, ready: bool) -> None:
        """The Ready condition; the node lifecycle controller adds or lifts the not-ready
        taints on its next pass, as on any cluster."""
        self.api.patch_node_status(name, {"status": {"conditions": [ready_condition(ready)]}})

    def remove_nodes(self) -> None:
        """Deletes every node this kubelet owns (the pods on them stay, orphaned, until the
        pod garbage collector takes them)."""
        for node in self._nodes().values():
            with contextlib.suppress(ApiException):
                self.api.delete_node(node["metadata"]["name"])

    # -- pods --------------------------------------------------------------------------------

    def finish(self, namespace: str, name: str, *, exit_code: int) -> None:
        """The pod's containers exit with `exit_code` now."""
        pod = self.api.read_namespaced_pod(namespace=namespace, name=name)
        raw = self.api.api_client.sanitize_for_serialization(pod)
        self._write_status(raw, finished_status(raw, self.clock(), exit_code=exit_code))

    def tick(self) -> None:
        with self._lock:
            nodes = self._nodes()
            if not nodes:
                return
            pods = self._bound_pods()
            by_node: dict[str, list[Raw]] = {}
            for pod in pods:
                by_node.setdefault(pod["spec"]["nodeName"], []).append(pod)
            now = self.clock()
            for node_name, node in sorted(nodes.items()):
                if not node_ready(node):
                    continue  # its kubelet is not answering
                for pod in by_node.get(node_name, ()):
                    self._handle(pod, node, by_node[node_name], now)

    def _handle(self, pod: Raw, node: Raw, on_node: list[Raw], now: float) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        if meta.get("deletionTimestamp"):
            due = parse_time(meta["deletionTimestamp"])
            if self.kubelet.honour_sigterm or now >= due:
                self._confirm_deletion(pod)
            return
        if (pod.get("status") or {}).get("phase") in FINISHED_PHASES:
            return
        step = kubelet_step(
            pod,
            node,
            now=now,
            kubelet=self.kubelet,
            admitted=uid in self._admitted,
            pull_attempts=self._pull_attempts.get(uid, 0),
            node_usage=lambda: usage_of(
                other
                for other in on_node
                if other["metadata"]["uid"] != uid
                and (
                    other["metadata"]["uid"] in self._admitted
                    or (other.get("status") or {}).get("phase") == "Running"
                )
            ),
        )
        if step.admitted:
            self._admitted.add(uid)
        if step.pull_attempts:
            self._pull_attempts[uid] = step.pull_attempts
        for changes in step.writes:
            pod = self._write_status(pod, changes)

    def _write_status(self, pod: Raw, changes: Raw) -> Raw:
        meta = pod["metadata"]
        try:
            answer = self.api.patch_namespaced_pod_status(
                meta["name"], meta["namespace"], {"status": changes}, _preload_content=False
            )
        except ApiException as exc:
            if exc.status in (404, 409):  # gone or changed meanwhile: the next pass sees it
                return pod
            raise
        return _json(answer)

    def _confirm_deletion(self, pod: Raw) -> None:
        meta = pod["metadata"]
        with contextlib.suppress(ApiException):
            self.api.delete_namespaced_pod(
                meta["name"],
                meta["namespace"],
                grace_period_seconds=0,
                body=client.V1DeleteOptions(
                    grace_period_seconds=0, preconditions=client.V1Preconditions(uid=meta["uid"])
                ),
            )
        self._admitted.discard(meta["uid"])
        self._pull_attempts.pop(meta["uid"], None)

    def _nodes(self) -> dict[str, Raw]:
        raw = _json(self.api.list_node(label_selector=f"{OWNER_LABEL}={self.owner}",
                                       _preload_content=False))  # fmt: skip
        return {item["metadata"]["name"]: item for item in raw.get("items") or []}

    def _bound_pods(self) -> list[Raw]:
        # Read as JSON, not into the client's models: a pass over thousands of pods every
        # fraction of a second would cost more CPU than what it drives.
        answer = self.api.list_pod_for_all_namespaces(
            field_selector="spec.nodeName!=",
            label_selector=self.pod_selector or None,
            resource_version="0",  # from the API server's cache: no etcd read per pass
            _preload_content=False,
        )
        return list(_json(answer).get("items") or [])

    # -- running -----------------------------------------------------------------------------

    def start(self, interval: float = 0.2) -> FakeKubelet:
        self._stop.clear()
        self._thread = threading.Thread(
            target=self.run, args=(interval,), name=f"fake-kubelet-{self.owner}", daemon=True
        )
        self._thread.start()
        return self

    def run(self, interval: float = 0.2) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # a loop that must outlive any one failed pass
                logger.exception("fake kubelet %s: pass failed", self.owner)
            self._stop.wait(interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def _json(response: Any) -> Raw:
    try:
        return dict(json.loads(response.data))
    finally:
        response.release_conn()


def start_for_plane(plane: Any, *, nodes: int, gpus: int) -> None:
    """`control_plane up --nodes N`: registers gpu-worker-1..N (owner `cluster-up`) unless
    they exist, and runs this module as a process beside the plane."""
    api = client.CoreV1Api(config.new_client_from_config(str(plane.admin_kubeconfig)))
    existing = {node.metadata.name for node in api.list_node().items if node.metadata}
    kubelet = FakeKubelet(api, owner="cluster-up")
    for index in range(1, nodes + 1):
        name = f"gpu-worker-{index}"
        if name not in existing:
            kubelet.register_node(
                name, gpus=gpus, labels={"nvidia.com/gpu.product": "A100-SXM4-40GB"}
            )
    if "fake-kubelet" not in plane.running():
        plane.add_process(
            "fake-kubelet",
            [sys.executable, "-m", __name__, "--kubeconfig", str(plane.admin_kubeconfig),
             "--owner", "cluster-up"],
        )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--owner", required=True, help=f"drive nodes labelled {OWNER_LABEL}=OWNER")
    parser.add_argument("--pod-selector", default="", help="only pods with these labels")
    parser.add_argument("--start-seconds", type=float, default=1.0)
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    api = client.CoreV1Api(config.new_client_from_config(args.kubeconfig))
    kubelet = FakeKubelet(
        api,
        owner=args.owner,
        kubelet=Kubelet(start_seconds=args.start_seconds),
        pod_selector=args.pod_selector,
    )
    kubelet.run(args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())

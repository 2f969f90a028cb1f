"""Smoke check of the Kubernetes backend against any cluster (deploy/smoke.sh runs it):
a 2-pod gang is created unbound, bound whole, seen Running, one pod evicted, and everything
cleaned up, through the same code the portal's cycle uses (KubernetesBackend), with the
portal's RBAC. Needs no database: only KUBECONFIG (or the in-cluster account).

The pods carry their own instance label (`smoke-<random>`), so the check can never touch the
portal's pods or anyone else's, and ask for 10 millicores and 16 MiB, no GPU unless --gpus.
Exit status 0 when every step passed, 1 otherwise, with one line per step.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import time
from collections.abc import Callable

from kubernetes.client.exceptions import ApiException

from jobspec import labels
from jobspec.labels import tenant_namespace
from jobspec.pods import DesiredPod
from scheduler.adapters.cluster.base import ClusterError, ObservedNode, ObservedPod
from scheduler.adapters.cluster.kubernetes import DEFAULT_SCHEDULER_NAME, KubernetesBackend
from scheduler.adapters.cluster.watch_cache import object_listers

DEFAULT_IMAGE = "registry.k8s.io/pause:3.10"
GANG = 2


class SmokeFailed(Exception):
    pass


def usable_nodes(nodes: list[ObservedNode], gpu_name: str, gpus: int) -> list[ObservedNode]:
    """Ready, schedulable, untainted for NoSchedule/NoExecute, with the GPUs asked for."""
    return [
        node
        for node in nodes
        if node.ready
        and not node.unschedulable
        and not any(t.get("effect") in ("NoSchedule", "NoExecute") for t in node.taints)
        and node.allocatable.get(gpu_name, 0) - node.used_by_others.get(gpu_name, 0) >= gpus
    ]


def run(backend: KubernetesBackend, *, image: str, gpus: int, timeout: float, say) -> None:
    gpu_name = next(iter(backend.gpu_resource_names), "nvidia.com/gpu")
    nodes = usable_nodes(backend.list_nodes(), gpu_name, gpus)
    if not nodes:
        raise SmokeFailed("no Ready, schedulable, untainted node with room for the test pods")
    say(f"nodes: {len(nodes)} usable, gang placed on {', '.join(n.name for n in nodes[:GANG])}")
    job_id = f"smoke-{backend.instance.removeprefix('smoke-')}"
    gang = [_pod(backend, job_id, i, nodes[i % len(nodes)].name, image, gpus, gpu_name)
            for i in range(GANG)]  # fmt: skip
    try:
        for pod in gang:
            backend.create_pod(pod)
        pods = _wait(backend, lambda seen: len(seen) == GANG, timeout, "both pods created")
        if any(pod.node_name for pod in pods.values()):
            raise SmokeFailed("a pod was bound before the whole gang existed")
        say(
            f"created: {GANG} pods in {backend.namespace}, unbound, "
            f"schedulerName {backend.scheduler_name}"
        )
        for pod in gang:
            backend.bind_pod(pod.name, pod.namespace, pod.node_name)
        _wait(
            backend,
            lambda seen: all(p.phase == "Running" for p in seen.values()) and len(seen) == GANG,
            timeout,
            "both pods Running",
        )
        say(f"placed: {GANG} pods bound through pods/binding and Running")
        evicted = gang[0]
        backend.delete_pod(evicted.name, evicted.namespace, grace_seconds=5)
        _wait(backend, lambda seen: evicted.name not in seen, timeout, "the evicted pod gone")
        say(f"evicted: {evicted.name} deleted gracefully and gone")
    finally:
        for pod in gang:
            try:
                backend.delete_pod(pod.name, pod.namespace, grace_seconds=0)
            except ClusterError as error:
                say(f"cleanup: {pod.name}: {error}")
    _wait(backend, lambda seen: not seen, timeout, "every test pod gone")
    # The gang's owner object (its ConfigMap): this run's instance owns nothing else.
    owners = backend.sweep_job_objects(keep=set())
    say(f"cleaned up: no test pod left, {', '.join(owners) or 'no owner object'} deleted")
    watches_check(backend, say)


def watches_check(backend: KubernetesBackend, say: Callable[[str], None]) -> None:
    """The cycle worker's cache watches the portal's objects in every jobs namespace. Roles
    applied from an older deploy file grant list without watch: the portal still works, but
    each cycle lists them instead, so it is said as a warning, not a failure."""
    listers = {
        kind[:-1] + "ies" if kind.endswith("y") else kind + "s": list_fn  # ConfigMaps, ...
        for kind, list_fn in object_listers(backend.core_v1).items()
    }
    refused = []
    for kind, list_fn in listers.items():
        try:
            response = list_fn(
                backend.namespace,
                watch=True,
                timeout_seconds=1,
                label_selector=labels.owned_selector(backend.instance),
                _preload_content=False,
                _request_timeout=(5, 10),
            )
        except ApiException as error:
            if error.status != 403:
                raise ClusterError(
                    f"watch {kind} in {backend.namespace}: {error.reason}"
                ) from error
            refused.append(kind)
            continue
        response.close()
        response.release_conn()
    if refused:
        say(
            f"warning: watching {', '.join(refused)} in {backend.namespace} is refused (403), "
            "so the cycle lists them every time instead; apply the portal's Roles there again "
            "(deploy/rbac.yaml, or python -m portal.cluster.rbac_for_tenant <tenant> | "
            "kubectl apply -f -)"
        )
    else:
        say(f"watched: the portal's {', '.join(listers)} in {backend.namespace}")


def _pod(
    backend: KubernetesBackend,
    job_id: str,
    replica: int,
    node: str,
    image: str,
    gpus: int,
    gpu_name: str,
) -> DesiredPod:
    requests = {"cpu": 10, "memory": 16 * 2**20}
    if gpus:
        requests[gpu_name] = gpus
    prefix = labels.object_prefix(backend.instance)
    return DesiredPod(
        name=labels.pod_name(job_id, "worker", replica, prefix=prefix),
        namespace=backend.namespace,
        node_name=node,
        image=image,
        command=[],
        env={},
        requests=requests,
        labels=labels.replica_labels(
            job_id=job_id,
            task="worker",
            replica=replica,
            queue="smoke",
            tenant="smoke",
            instance=backend.instance,
        ),
        annotations={},
        min_available=GANG,
        owner=labels.job_object_name(job_id, prefix),
    )


def _wait(
    backend: KubernetesBackend,
    done: Callable[[dict[str, ObservedPod]], bool],
    timeout: float,
    what: str,
) -> dict[str, ObservedPod]:
    deadline = time.monotonic() + timeout
    while True:
        seen = {pod.name: pod for pod in backend.list_pods()}
        if done(seen):
            return seen
        if time.monotonic() > deadline:
            states = ", ".join(
                f"{p.name} {p.phase}{f' ({p.reason})' if p.reason else ''}" for p in seen.values()
            )
            raise SmokeFailed(f"timed out after {timeout:.0f} s waiting for {what}: {states}")
        time.sleep(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    into = parser.add_mutually_exclusive_group()
    into.add_argument("--namespace", default="gpu-jobs", help="the portal's jobs namespace")
    into.add_argument(
        "--tenant",
        help="with a namespace per tenant: check this tenant's namespace (--namespace-prefix "
        "and the tenant's name, as the portal names it), with the portal's grants there",
    )
    parser.add_argument("--namespace-prefix", default="gpu-", help="KUBERNETES_NAMESPACE_PREFIX")
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--gpus", type=int, default=0, help="GPUs per test pod")
    parser.add_argument("--gpu-resource", default="nvidia.com/gpu")
    parser.add_argument("--scheduler-name", default=DEFAULT_SCHEDULER_NAME)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per step")
    args = parser.parse_args(argv)

    def say(line: str) -> None:
        print(f"smoke: {line}", flush=True)

    try:
        namespace = (
            tenant_namespace(args.tenant, args.namespace_prefix) if args.tenant else args.namespace
        )
    except ValueError as error:
        parser.error(str(error))
    try:
        backend = KubernetesBackend.from_config(
            namespace,
            [args.gpu_resource],
            scheduler_name=args.scheduler_name,
            instance=f"smoke-{secrets.token_hex(3)}",
        )
        run(backend, image=args.image, gpus=args.gpus, timeout=args.timeout, say=say)
    except (SmokeFailed, ClusterError) as error:
        say(f"FAILED: {error}")
        return 1
    say("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())

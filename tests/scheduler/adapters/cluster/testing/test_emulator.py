"""The emulated API server behaves like a real one where the portal depends on it, as seen
through the official client over HTTP."""

from __future__ import annotations

import json
import threading

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

NS = "gpu-jobs"
GPU = "nvidia.com/gpu"


@pytest.fixture
def api(cluster):
    configuration = client.Configuration(host=cluster.url)
    configuration.retries = False
    return client.CoreV1Api(client.ApiClient(configuration))


def pod_body(name, *, node=None, gpus=1, command=None, image="train:1", labels=None, **meta):
    resources = {"requests": {"cpu": "1", GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
    spec = {"containers": [{"name": "main", "image": image, "resources": resources}]}
    if command:
        spec["containers"][0]["command"] = command
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": "train"}, **meta},
        "spec": spec,
    }


def gpu_node(cluster, name="gpu-a", gpus=8, **kwargs):
    cluster.add_node(
        name, {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(gpus)}, **kwargs
    )


def status_of(api, name):
    return api.read_namespaced_pod(name, NS).status


def bind(api, name, node):
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=name),
        target=client.V1ObjectReference(kind="Node", name=node),
    )
    # _preload_content=False: the server answers a Status, which the generated client cannot
    # read as the V1Binding it declares.
    return api.create_namespaced_pod_binding(name, NS, body, _preload_content=False)


def api_error(call, *args, **kwargs) -> ApiException:
    with pytest.raises(ApiException) as caught:
        call(*args, **kwargs)
    return caught.value


# -- lists -----------------------------------------------------------------------------------


def test_list_pages_by_limit_from_one_consistent_snapshot(cluster, api):
    for index in range(5):
        api.create_namespaced_pod(NS, pod_body(f"p-{index}"))

    first = api.list_namespaced_pod(NS, limit=2)
    api.create_namespaced_pod(NS, pod_body("p-late"))  # after the list began: not in it
    api.delete_namespaced_pod("p-4", NS)
    second = api.list_namespaced_pod(NS, limit=2, _continue=first.metadata._continue)
    third = api.list_namespaced_pod(NS, limit=2, _continue=second.metadata._continue)

    names = [p.metadata.name for page in (first, second, third) for p in page.items]
    assert names == ["p-0", "p-1", "p-2", "p-3", "p-4"]
    assert first.metadata.remaining_item_count == 3
    assert third.metadata._continue is None
    assert second.metadata.resource_version == first.metadata.resource_version


def test_an_expired_continue_token_answers_410(cluster, api):
    for index in range(3):
        api.create_namespaced_pod(NS, pod_body(f"p-{index}"))
    first = api.list_namespaced_pod(NS, limit=1)

    cluster.compact()
    error = api_error(api.list_namespaced_pod, NS, limit=1, _continue=first.metadata._continue)

    assert error.status == 410
    assert "too old" in error.body


def test_lists_honour_label_and_field_selectors_across_namespaces(cluster, api):
    gpu_node(cluster)
    api.create_namespaced_pod(NS, pod_body("ours", labels={"gpuportal.io/managed": "true"}))
    cluster.add_pod(
        {
            "metadata": {"name": "theirs", "namespace": "other"},
            "spec": {"nodeName": "gpu-a", "containers": [{"name": "c"}]},
        }
    )

    managed = api.list_pod_for_all_namespaces(label_selector="gpuportal.io/managed=true")
    on_node = api.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-a")

    assert [p.metadata.name for p in managed.items] == ["ours"]
    assert [p.metadata.name for p in on_node.items] == ["theirs"]


# -- watches ---------------------------------------------------------------------------------


def stream(api, **kwargs):
    return watch.Watch().stream(api.list_namespaced_pod, NS, timeout_seconds=1, **kwargs)


def test_a_watch_resumes_after_a_resource_version_with_every_later_change(cluster, api):
    api.create_namespaced_pod(NS, pod_body("before"))
    listed = api.list_namespaced_pod(NS)
    api.create_namespaced_pod(NS, pod_body("after"))
    api.delete_namespaced_pod("before", NS)

    events = [
        (e["type"], e["object"].metadata.name)
        for e in stream(api, resource_version=listed.metadata.resource_version)
    ]

    assert events == [("ADDED", "after"), ("DELETED", "before")]


def test_a_watch_from_a_compacted_resource_version_gets_410(cluster, api):
    api.create_namespaced_pod(NS, pod_body("p"))
    old = api.list_namespaced_pod(NS).metadata.resource_version
    api.create_namespaced_pod(NS, pod_body("q"))
    cluster.compact()

    error = api_error(list, stream(api, resource_version=old))

    assert error.status == 410


def test_bookmarks_carry_the_current_resource_version(cluster, api):
    api.create_namespaced_pod(NS, pod_body("p"))
    rv = api.list_namespaced_pod(NS).metadata.resource_version
    events = []
    watcher = watch.Watch()

    def consume():
        for event in watcher.stream(
            api.list_namespaced_pod,
            NS,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=5,
        ):
            events.append(event)
            watcher.stop()

    reader = threading.Thread(target=consume)
    reader.start()
    _wait_for(lambda: cluster.watch_count() == 1)
    gpu_node(cluster)  # another resource moves the resourceVersion; no pod event
    cluster.bookmark()
    reader.join(timeout=5)

    assert [e["type"] for e in events] == ["BOOKMARK"]
    assert int(watcher.resource_version) == int(rv) + 1


def test_dropped_watches_end_their_streams(cluster, api):
    done = threading.Event()

    def consume():
        list(watch.Watch().stream(api.list_namespaced_pod, NS, timeout_seconds=30))
        done.set()

    threading.Thread(target=consume, daemon=True).start()
    _wait_for(lambda: cluster.watch_count() == 1)

    assert cluster.drop_watches() == 1
    assert done.wait(timeout=5)


# -- what the server refuses -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        pytest.param(pod_body("Bad_Name"), 422, "metadata.name", id="invalid-name"),
        pytest.param(
            pod_body("ok", labels={"app": "x" * 64}),
            422,
            "metadata.labels",
            id="label-value-too-long",
        ),
        pytest.param(
            {"metadata": {"name": "ok"}, "spec": {"containers": []}},
            422,
            "spec.containers",
            id="no-containers",
        ),
        pytest.param(
            {
                "metadata": {"name": "ok"},
                "spec": {
                    "containers": [
                        {"name": "m", "image": "x", "resources": {"requests": {GPU: "1"}}}
                    ]
                },
            },
            422,
            "must be equal to nvidia.com/gpu limit",
            id="gpu-request-without-limit",
        ),
        pytest.param(
            pod_body("ok", namespace="elsewhere"), 400, "namespace", id="namespace-mismatch"
        ),
    ],
)
def test_invalid_objects_are_refused_and_not_stored(cluster, api, body, status, words):
    error = api_error(api.create_namespaced_pod, NS, body)

    assert error.status == status
    assert words in error.body
    assert cluster.pod_names() == []


def test_a_name_in_use_answers_409_even_while_terminating(cluster, api):
    gpu_node(cluster)
    cluster.ignore_sigterm()
    api.create_namespaced_pod(NS, pod_body("p", node="gpu-a"))
    api.delete_namespaced_pod("p", NS)

    assert api_error(api.create_namespaced_pod, NS, pod_body("p")).status == 409


def test_pod_spec_is_immutable_and_stale_updates_conflict(cluster, api):
    api.create_namespaced_pod(NS, pod_body("p"))
    stale = api.read_namespaced_pod("p", NS).metadata.resource_version
    api.patch_namespaced_pod("p", NS, {"metadata": {"labels": {"x": "1"}}})

    moved = api_error(api.patch_namespaced_pod, "p", NS, {"spec": {"nodeName": "gpu-a"}})
    raced = api_error(
        api.patch_namespaced_pod,
        "p",
        NS,
        {"metadata": {"resourceVersion": stale, "labels": {"x": "2"}}},
    )

    assert (moved.status, raced.status) == (422, 409)


# -- binding ---------------------------------------------------------------------------------


def test_binding_assigns_an_unbound_pod_once(cluster, api):
    gpu_node(cluster)
    api.create_namespaced_pod(NS, pod_body("p"))

    answer = bind(api, "p", "gpu-a")
    again = api_error(bind, api, "p", "gpu-b")

    assert answer.status in (200, 201)
    assert api.read_namespaced_pod("p", NS).spec.node_name == "gpu-a"
    assert again.status == 409
    assert "already assigned" in again.body


def test_binding_a_terminating_or_missing_pod_fails(cluster, api):
    gpu_node(cluster)
    cluster.add_pod(
        {
            "metadata": {"name": "p", "namespace": NS, "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c"}]},
        }
    )

    assert api_error(bind, api, "p", "gpu-a").status == 409
    assert api_error(bind, api, "missing", "gpu-a").status == 404


# -- deletion --------------------------------------------------------------------------------


def test_a_deleted_pod_whose_containers_ignore_sigterm_terminates_for_its_grace_period(
    cluster, api
):
    gpu_node(cluster)
    cluster.ignore_sigterm()
    api.create_namespaced_pod(NS, pod_body("p", node="gpu-a"))

    api.delete_namespaced_pod("p", NS, grace_period_seconds=30)
    terminating = api.read_namespaced_pod("p", NS)
    cluster.advance(29)
    still_there = cluster.pod_names()
    cluster.advance(1)

    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 30
    assert still_there == ["p"]
    assert cluster.pod_names() == []


def test_a_pod_on_a_not_ready_node_stays_terminating_until_force_deleted(cluster, api):
    gpu_node(cluster)
    api.create_namespaced_pod(NS, pod_body("p", node="gpu-a"))
    cluster.set_node_ready("gpu-a", False)

    api.delete_namespaced_pod("p", NS, grace_period_seconds=30)
    cluster.advance(3600)
    stuck = cluster.pod_names()
    api.delete_namespaced_pod("p", NS, grace_period_seconds=0)

    assert stuck == ["p"]
    assert cluster.pod_names() == []


def test_the_pod_garbage_collector_takes_a_deleted_nodes_pods_after_its_quarantine(cluster, api):
    gpu_node(cluster)
    gpu_node(cluster, "gpu-b")
    api.create_namespaced_pod(NS, pod_body("orphan", node="gpu-a"))
    api.create_namespaced_pod(NS, pod_body("kept", node="gpu-b"))
    cluster.delete_node("gpu-a")

    cluster.advance(39)
    before = sorted(cluster.pod_names())
    cluster.advance(1)

    assert before == ["kept", "orphan"]
    assert cluster.pod_names() == ["kept"]


def test_an_unbound_pod_is_deleted_at_once(cluster, api):
    api.create_namespaced_pod(NS, pod_body("p"))

    api.delete_namespaced_pod("p", NS, grace_period_seconds=30)

    assert cluster.pod_names() == []


def test_deleting_an_owner_collects_its_dependents(cluster, api):
    gpu_node(cluster)
    owner = api.create_namespaced_config_map(NS, {"metadata": {"name": "job-7"}})
    reference = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "job-7",
        "uid": owner.metadata.uid,
    }
    api.create_namespaced_pod(NS, pod_body("p", ownerReferences=[reference]))
    api.create_namespaced_pod(NS, pod_body("unrelated"))

    api.delete_namespaced_config_map("job-7", NS)

    assert cluster.pod_names() == ["unrelated"]


# -- kubelets --------------------------------------------------------------------------------


def test_a_bound_pod_goes_pending_running_succeeded(cluster, api):
    gpu_node(cluster)
    api.create_namespaced_pod(NS, pod_body("p", node="gpu-a", command=["sleep", "60"]))

    phases = [status_of(api, "p").phase]
    cluster.advance(1)
    phases.append(status_of(api, "p").phase)
    cluster.advance(60)
    finished = status_of(api, "p")

    assert phases == ["Pending", "Running"]
    assert finished.phase == "Succeeded"
    assert finished.container_statuses[0].state.terminated.exit_code == 0


def test_an_image_that_cannot_be_pulled_keeps_the_pod_pending_with_the_reason(cluster, api):
    gpu_node(cluster)
    cluster.fail_image_pull("registry.local/missing:1")
    api.create_namespaced_pod(NS, pod_body("p", node="gpu-a", image="registry.local/missing:1"))

    cluster.advance(1)
    first = status_of(api, "p")
    cluster.advance(10)
    later = status_of(api, "p")

    assert first.phase == later.phase == "Pending"
    assert first.container_statuses[0].state.waiting.reason == "ErrImagePull"
    assert later.container_statuses[0].state.waiting.reason == "ImagePullBackOff"


def test_the_kubelet_rejects_a_pod_its_admitted_pods_leave_no_room_for(cluster, api):
    gpu_node(cluster, gpus=8)
    cluster.add_pod(
        {
            "metadata": {"name": "other-team", "namespace": "ml"},
            "spec": {
                "nodeName": "gpu-a",
                "containers": [
                    {"name": "c", "resources": {"requests": {GPU: "4"}, "limits": {GPU: "4"}}}
                ],
            },
            "status": {"phase": "Running"},
        }
    )
    api.create_namespaced_pod(NS, pod_body("fits", node="gpu-a", gpus=4))
    api.create_namespaced_pod(NS, pod_body("too-many", node="gpu-a", gpus=1))

    cluster.advance(1)

    assert status_of(api, "fits").phase == "Running"
    rejected = status_of(api, "too-many")
    assert (rejected.phase, rejected.reason) == ("Failed", "OutOfnvidia.com/gpu")
    assert "requested: 1, used: 8, capacity: 8" in rejected.message


def test_a_not_ready_node_leaves_its_pods_as_they_are(cluster, api):
    gpu_node(cluster, ready=False)
    api.create_namespaced_pod(NS, pod_body("p", node="gpu-a"))

    cluster.advance(60)

    assert status_of(api, "p").phase == "Pending"


def _wait_for(condition, timeout=5.0):
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


def test_a_kubelet_told_to_refuse_a_resource_rejects_pods_asking_for_it(cluster, api):
    gpu_node(cluster)
    cluster.fail_admission("gpu-a", GPU)
    api.create_namespaced_pod(NS, pod_body("gpu", node="gpu-a"))
    cluster.add_pod(
        {
            "metadata": {"name": "cpu-only", "namespace": NS},
            "spec": {"nodeName": "gpu-a", "containers": [{"name": "c", "image": "x"}]},
        }
    )

    cluster.advance(1)

    rejected = status_of(api, "gpu")
    assert (rejected.phase, rejected.reason) == ("Failed", "OutOfnvidia.com/gpu")
    assert status_of(api, "cpu-only").phase == "Running"


def test_a_long_running_emulator_keeps_a_bounded_request_log_and_still_answers():
    """The process the benchmarks and the smoke script run: kmock matches each request by
    scanning its log, so the log is kept short there."""
    from scheduler.adapters.cluster.testing.emulator import EmulatedCluster

    emulated = EmulatedCluster(request_log_limit=4)
    try:
        configuration = client.Configuration(host=emulated.url)
        configuration.retries = False
        api = client.CoreV1Api(client.ApiClient(configuration))
        for index in range(30):
            api.create_namespaced_config_map(NS, {"metadata": {"name": f"cm-{index}"}})
        assert api.read_namespaced_config_map("cm-29", NS).metadata.name == "cm-29"
        assert api_error(api.read_namespaced_config_map, "cm-30", NS).status == 404
        assert len(api.list_namespaced_config_map(NS).items) == 30
        logged = emulated.on_loop(lambda: len(emulated.handler._requests))
        assert logged <= 2 * 4 + 1
    finally:
        emulated.close()


def running_pod(cluster, api, name="logger", containers=("main",)):
    gpu_node(cluster)
    body = pod_body(name, node="gpu-a")
    body["spec"]["containers"] = [
        {"name": container, "image": "train:1"} for container in containers
    ]
    api.create_namespaced_pod(NS, body)
    cluster.advance(1)
    assert status_of(api, name).phase == "Running"
    return name


def test_pods_log_is_the_containers_text_with_tail_lines_and_container(cluster, api):
    running_pod(cluster, api, containers=("main", "sidecar"))
    cluster.write_log(NS, "logger", [f"step {index}" for index in range(5)], "main")
    cluster.write_log(NS, "logger", ["proxy up"], "sidecar")

    assert api.read_namespaced_pod_log("logger", NS, container="main") == "".join(
        f"step {index}\n" for index in range(5)
    )
    assert api.read_namespaced_pod_log("logger", NS, container="main", tail_lines=2) == (
        "step 3\nstep 4\n"
    )
    assert api.read_namespaced_pod_log("logger", NS, container="sidecar") == "proxy up\n"


def test_pods_log_of_one_container_needs_no_name_and_may_be_empty(cluster, api):
    running_pod(cluster, api)
    assert api.read_namespaced_pod_log("logger", NS) == ""
    cluster.write_log(NS, "logger", ["hello"])
    assert api.read_namespaced_pod_log("logger", NS, tail_lines=10) == "hello\n"


def test_pods_log_refuses_what_the_api_server_refuses(cluster, api):
    running_pod(cluster, api, containers=("main", "sidecar"))
    api.create_namespaced_pod(NS, pod_body("unbound"))

    missing = api_error(api.read_namespaced_pod_log, "nope", NS)
    assert missing.status == 404
    unknown = api_error(api.read_namespaced_pod_log, "logger", NS, container="other")
    assert (unknown.status, json.loads(unknown.body)["message"]) == (
        400,
        "container other is not valid for pod logger",
    )
    unnamed = api_error(api.read_namespaced_pod_log, "logger", NS)
    assert (unnamed.status, json.loads(unnamed.body)["message"]) == (
        400,
        "a container name must be specified for pod logger, choose one of: [main sidecar]",
    )
    unbound = api_error(api.read_namespaced_pod_log, "unbound", NS)
    assert (unbound.status, json.loads(unbound.body)["message"]) == (
        400,
        "pod unbound does not have a host assigned",
    )
    previous = api_error(api.read_namespaced_pod_log, "logger", NS, container="main", previous=True)
    assert previous.status == 400


def test_pods_log_of_a_container_not_started_is_refused_with_its_waiting_reason(cluster, api):
    gpu_node(cluster)
    cluster.fail_image_pull("missing:1")
    api.create_namespaced_pod(NS, pod_body("pulling", node="gpu-a", image="missing:1"))
    cluster.advance(1)

    refused = api_error(api.read_namespaced_pod_log, "pulling", NS)
    assert (refused.status, json.loads(refused.body)["message"]) == (
        400,
        'container "main" in pod "pulling" is waiting to start: ErrImagePull',
    )


def test_a_deleted_pods_log_is_gone(cluster, api):
    running_pod(cluster, api)
    cluster.write_log(NS, "logger", ["last words"])
    cluster.delete_pod(NS, "logger", grace_seconds=0)
    assert api_error(api.read_namespaced_pod_log, "logger", NS).status == 404

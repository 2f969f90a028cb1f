"""Bad input never gives a 500: every invalid request is a 4xx whose JSON names the field."""

import json
from http import HTTPStatus

import pytest
import yaml

from portal.common.validators import DNS_LABEL_RE
from portal.jobs.models import Job
from tests.portal.conftest import job_body

pytestmark = pytest.mark.django_db

TASK = {"name": "worker", "replicas": 1, "image": "busybox", "gpus": 1}


def _job(**changes):
    body = {"queue": "nlp-train", "name": "hostile", "tasks": [dict(TASK)]}
    body.update(changes)
    return body


def _task(**changes):
    return _job(tasks=[{**TASK, **changes}])


JOB_BODIES = [
    ("missing everything", {}, {"queue", "name", "tasks"}),
    ("name wrong type", _job(name=["x"]), {"name"}),
    ("name not a dns label", _job(name="Bad_Name!"), {"name"}),
    ("name unicode", _job(name="модель-训练"), {"name"}),
    ("name too long", _job(name="a" * 64), {"name"}),
    ("name fullwidth look-alike", _job(name="ｈostile"), {"name"}),
    ("name mathematical bold", _job(name="𝐡𝐨𝐬𝐭𝐢𝐥𝐞"), {"name"}),
    ("name newline inside", _job(name="nl\nname"), {"name"}),
    ("priority huge", _job(priority=10**30), {"priority"}),
    ("priority string", _job(priority="high"), {"priority"}),
    ("priority float", _job(priority=1.5), {"priority"}),
    ("min_available zero", _job(min_available=0), {"min_available"}),
    ("min_available negative", _job(min_available=-3), {"min_available"}),
    ("min_available above replicas", _job(min_available=5), {"min_available"}),
    ("duration negative", _job(expected_duration_seconds=-1), {"expected_duration_seconds"}),
    ("unknown job field", _job(gpus=4), {"gpus"}),
    ("tasks not a list", _job(tasks={"name": "x"}), {"tasks"}),
    ("tasks empty", _job(tasks=[]), {"tasks"}),
    ("task not an object", _job(tasks=["worker"]), {"tasks[0]"}),
    ("task garbage nested", _job(tasks=[[[[{"a": [1]}]]]]), {"tasks[0]"}),
    ("task unknown field", _task(color="red"), {"tasks[0].color"}),
    ("task missing image", _job(tasks=[{"name": "w", "replicas": 1}]), {"tasks[0].image"}),
    ("gpus negative", _task(gpus=-1), {"tasks[0].gpus"}),
    ("gpus huge", _task(gpus=2**70), {"tasks[0].gpus"}),
    ("gpus string", _task(gpus="eight"), {"tasks[0].gpus"}),
    ("gpus bool-ish object", _task(gpus={"n": 1}), {"tasks[0].gpus"}),
    ("replicas zero", _task(replicas=0), {"tasks[0].replicas"}),
    ("memory huge", _task(memory_bytes=10**40), {"tasks[0].memory_bytes"}),
    ("cpu negative", _task(cpu_millis=-5), {"tasks[0].cpu_millis"}),
    ("command not strings", _task(command=[1, {"a": 2}]), {"tasks[0].command[1]"}),
    ("env not a mapping", _task(env=["A=1"]), {"tasks[0].env"}),
    ("env nested", _task(env={"A": {"B": "C"}}), {"tasks[0].env.A"}),
    ("task name bad", _task(name="Worker One"), {"tasks[0].name"}),
    (
        "duplicate task names",
        _job(tasks=[dict(TASK), dict(TASK)]),
        {"tasks[1].name"},
    ),
    # Huge counts: every limit of portal.jobs.limits, by the API as by every other way in.
    ("gpus 2**62", _task(gpus=2**62), {"tasks[0].gpus"}),
    ("gpus 5000", _task(gpus=5000), {"tasks[0].gpus"}),
    ("replicas 1,000,000", _task(replicas=1_000_000), {"tasks[0].replicas", "tasks"}),
    ("replicas 200,000", _task(replicas=200_000), {"tasks[0].replicas", "tasks"}),
    (
        "64 tasks x 10,000 replicas in one small body",
        _job(tasks=[{**TASK, "name": f"t{i}", "replicas": 10_000} for i in range(64)]),
        {"tasks"},
    ),
    (
        "tasks each within, the job over",
        _job(tasks=[{**TASK, "name": f"t{i}", "replicas": 1024} for i in range(3)]),
        {"tasks"},
    ),
    (
        "5,000 tasks, refused before any is read",
        _job(tasks=[{"name": f"t{i}", "replicas": 1, "image": "x"} for i in range(5000)]),
        {"tasks"},
    ),
    ("cpu 10**12 millicores", _task(cpu_millis=10**12), {"tasks[0].cpu_millis"}),
    ("memory 2**60", _task(memory_bytes=2**60), {"tasks[0].memory_bytes"}),
    ("command 300 items", _task(command=["x"] * 300), {"tasks[0].command"}),
    ("command 20,000 chars", _task(command=["x" * 20_000]), {"tasks[0].command"}),
    ("env 200 vars", _task(env={f"V{i}": "1" for i in range(200)}), {"tasks[0].env"}),
    ("env 40,000 chars", _task(env={"BIG": "x" * 40_000}), {"tasks[0].env"}),
    ("image 501 chars", _task(image="i" * 501), {"tasks[0].image"}),
    (
        "selector 33 entries",
        _task(node_selector={f"k{i}": "v" for i in range(33)}),
        {"tasks[0].node_selector"},
    ),
    (
        "selector value 64 chars",
        _task(node_selector={"gpu-model": "v" * 64}),
        {"tasks[0].node_selector"},
    ),
    # What the API server would refuse at pod creation (jobspec.names).
    ("env name with =", _task(env={"A=B": "1"}), {"tasks[0].env"}),
    ("env name empty", _task(env={"": "1"}), {"tasks[0].env"}),
    ("image with a space and a newline", _task(image="trainer: 1\nevil"), {"tasks[0].image"}),
    (
        "selector key not a label key",
        _task(node_selector={"bad key!": "v"}),
        {"tasks[0].node_selector"},
    ),
    (
        "tolerationSeconds beyond int64",
        _task(
            tolerations=[
                {
                    "key": "nvidia.com/gpu",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 2**63,
                }
            ]
        ),
        {"tasks[0].tolerations"},
    ),  # fmt: skip
    ("NUL in a command", _task(command=["python", "a\x00b"]), {"tasks[0].command[1]"}),
    ("NUL in the name", _job(name="a\x00b"), {"name"}),
    ("priority 10**12", _job(priority=10**12), {"priority"}),
    ("duration 10**9 s", _job(expected_duration_seconds=10**9), {"expected_duration_seconds"}),
    ("min_available 2**40", _job(min_available=2**40), {"min_available"}),
    ("queue unknown", _job(queue="nope"), {"queue"}),
    ("queue huge id", _job(queue="9" * 40), {"queue"}),
    ("queue foreign", _job(queue="vision-train"), {"queue"}),
    ("queue wrong type", _job(queue={"id": 1}), {"queue"}),
    # Every field at fault in one answer, the queue included.
    ("queue unknown and tasks empty", _job(queue="nope", tasks=[]), {"queue", "tasks"}),
    (
        "queue foreign and gpus bad",
        _task(gpus=-1) | {"queue": "vision-train"},
        {"queue", "tasks[0].gpus"},
    ),
]


@pytest.mark.parametrize(
    ("body", "fields"), [pytest.param(b, f, id=name) for name, b, f in JOB_BODIES]
)
def test_job_create_rejects_with_field_paths(world, api_for, body, fields):
    response = api_for("researcher").post("/api/v1/jobs/", body, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    payload = response.json()
    assert payload["code"] == "invalid"
    assert fields <= set(payload["errors"]), payload
    assert not Job.objects.filter(name="hostile").exists()


RAW_BODIES = [
    ("truncated json", b'{"queue": "nlp-train", ', "application/json"),
    ("not json at all", b"\xff\xfe\x00garbage", "application/json"),
    ("NaN", b'{"queue": NaN}', "application/json"),
    ("json array", b"[1, 2, 3]", "application/json"),
    ("json string", b'"just a string"', "application/json"),
    ("json null", b"null", "application/json"),
    ("deep json", b"[" * 100_000 + b"]" * 100_000, "application/json"),
    ("huge int literal", b'{"priority": ' + b"9" * 5000 + b"}", "application/json"),
    ("malformed yaml", b"kind: Job\n  spec: [unclosed", "application/yaml"),
    ("yaml not a manifest", b"queue: nlp-train\nname: x\n", "text/yaml"),
    ("yaml scalar", b"just words", "application/yaml"),
    ("yaml alias bomb", b"a: &a [x, x]\nb: [*a, *a]\n", "application/yaml"),
    ("deep yaml", b"[" * 50_000 + b"]" * 50_000, "application/yaml"),
    ("two yaml documents", b"kind: Job\n---\nkind: Job\n", "application/yaml"),
    ("yaml python tag", b"!!python/object/apply:os.system ['true']", "application/yaml"),
]


@pytest.mark.parametrize(
    ("raw", "content_type"), [pytest.param(r, c, id=name) for name, r, c in RAW_BODIES]
)
def test_malformed_bodies_are_400_naming_body_or_fields(world, api_for, raw, content_type):
    response = api_for("researcher").post("/api/v1/jobs/", raw, content_type=content_type)
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    assert response.json()["errors"]


def test_body_over_the_limit_is_413(world, api_for):
    raw = json.dumps(_job(name="x" * 300_000)).encode()
    response = api_for("researcher").post("/api/v1/jobs/", raw, content_type="application/json")
    assert response.status_code == HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    assert "body" in response.json()["errors"]


def test_unsupported_content_type_is_415(world, api_for):
    response = api_for("researcher").post(
        "/api/v1/jobs/", b"queue=nlp-train", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == HTTPStatus.UNSUPPORTED_MEDIA_TYPE
    assert "body" in response.json()["errors"]


QUEUE_BODIES = [
    ("weight zero", {"weight": 0}, {"weight"}),
    ("weight too big", {"weight": 70000}, {"weight"}),
    ("weight string", {"weight": "heavy"}, {"weight"}),
    ("weight null", {"weight": None}, {"weight"}),
    ("guarantee negative", {"guarantee_gpus": -1}, {"guarantee_gpus"}),
    ("guarantee huge", {"guarantee_gpus": 2**40}, {"guarantee_gpus"}),
    ("guarantee above cluster", {"guarantee_gpus": 33}, {"guarantee_gpus"}),
    (
        "guarantee above capability",
        {"guarantee_gpus": 8, "capability_gpus": 4},
        {"guarantee_gpus"},
    ),
    ("memory overflow", {"capability_memory_bytes": 2**64}, {"capability_memory_bytes"}),
    ("state unknown", {"state": "paused"}, {"state"}),
    ("reclaimable garbage", {"reclaimable": [1]}, {"reclaimable"}),
    ("unknown field", {"name": "renamed"}, {"name"}),
    ("tenant not editable", {"tenant": 2}, {"tenant"}),
    ("not an object", [1, 2], {"non_field_errors"}),
]


@pytest.mark.parametrize(
    ("body", "fields"), [pytest.param(b, f, id=name) for name, b, f in QUEUE_BODIES]
)
def test_queue_update_rejects_with_field_names(world, api_for, body, fields):
    url = f"/api/v1/queues/{world['nlp_queue'].pk}/"
    response = api_for("lead").patch(url, body, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    assert fields <= set(response.json()["errors"])


# Years 1 and 9999, in UTC and at offsets that cannot be converted to UTC at all.
EXTREME_TIMES = [
    "0001-01-01T00:00:00Z",
    "0001-01-01",
    "0001-01-01T00:00:00%2B01:00",
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:59:59-01:00",
    "1969-12-31T23:59:59Z",
]

QUERIES = [
    ("/api/v1/jobs/?status=exploded", {"status"}),
    ("/api/v1/jobs/?since=yesterday", {"since"}),
    ("/api/v1/jobs/?mine=perhaps", {"mine"}),
    ("/api/v1/jobs/?queue=" + "q" * 100, {"queue"}),
    ("/api/v1/queues/?tenant=-1", {"tenant"}),
    ("/api/v1/queues/?tenant=" + "9" * 30, {"tenant"}),
    ("/api/v1/queues/{q}/usage/?resolution=week", {"resolution"}),
    ("/api/v1/queues/{q}/usage/?since=2025-01-02T00:00Z&until=2025-01-01T00:00Z", {"until"}),
    ("/api/v1/queues/{q}/usage/?since=2020-01-01T00:00Z&resolution=minute", {"since"}),
    ("/api/v1/queues/{q}/usage/?since=%00%ff", {"since"}),
    ("/api/v1/nodes/?schedulable=maybe", {"schedulable"}),
    *[
        (f"{path}?{param}={time}", {param})
        for path, params in (
            ("/api/v1/queues/{q}/usage/", ("since", "until")),
            ("/api/v1/jobs/", ("since",)),
        )
        for param in params
        for time in EXTREME_TIMES
    ],
]


@pytest.mark.parametrize(("url", "fields"), QUERIES)
def test_bad_query_parameters_are_400(world, api_for, url, fields):
    response = api_for("lead").get(url.format(q=world["nlp_queue"].pk))
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    assert fields <= set(response.json()["errors"])


ADMIN_QUERIES = [
    ("/api/v1/preemptions/?action=nuke", {"action"}),
    ("/api/v1/preemptions/?queue=abc", {"queue"}),
    ("/api/v1/preemptions/?tenant=0", {"tenant"}),
    ("/api/v1/preemptions/?since=2025-02-01T00:00Z&until=2025-01-01T00:00Z", {"until"}),
    *[
        (f"/api/v1/preemptions/?{param}={time}", {param})
        for param in ("since", "until")
        for time in EXTREME_TIMES
    ],
]


@pytest.mark.parametrize(("url", "fields"), ADMIN_QUERIES)
def test_bad_admin_query_parameters_are_400(world, api_for, url, fields):
    response = api_for("staff").get(url)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert fields <= set(response.json()["errors"])


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/jobs/99999999999999999999999/",
        "/api/v1/jobs/9223372036854775808/why/",
        "/api/v1/queues/99999999999999999999/",
        "/api/v1/nodes/18446744073709551616/",
        "/api/v1/jobs/0/",
    ],
)
def test_huge_and_missing_ids_are_404(world, api_for, url):
    assert api_for("staff").get(url).status_code == HTTPStatus.NOT_FOUND


@pytest.mark.parametrize(
    "url", ["/api/v1/jobs/-1/", "/api/v1/jobs/abc/", "/api/v1/jobs/1.5/cancel/"]
)
def test_non_integer_ids_do_not_route(world, api_for, url):
    assert api_for("staff").get(url).status_code == HTTPStatus.NOT_FOUND


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"text": 5},
        {"text": ""},
        {"text": "actions: [not, a, string]\n"},
        {"text": "::: not yaml"},
        {"text": 'actions: "allocate"\ntiers:\n- plugins:\n  - name: no-such-plugin\n'},
        {"text": "x" * 200_000},
        {"text": 'actions: "allocate"\ntiers: []\n', "activate": "sometimes"},
        {"text": 'actions: "allocate"\ntiers: []\n', "extra": 1},
    ],
)
def test_bad_scheduler_configs_are_400_naming_the_field(world, api_for, body):
    response = api_for("staff").post("/api/v1/scheduler-configs/", body, format="json")
    assert response.status_code in (HTTPStatus.BAD_REQUEST, HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
    assert response.json()["errors"]


def test_submit_with_unicode_everywhere_else_is_fine(world, api_for):
    body = job_body(
        world["nlp_queue"],
        tasks=[
            {
                "name": "worker",
                "replicas": 1,
                "image": "registry.example/model:latest",
                "command": ["python", "-c", "print('héllo ✓')"],
                "env": {"GREETING": "こんにちは"},
            }
        ],
    )
    response = api_for("researcher").post("/api/v1/jobs/", body, format="json")
    assert response.status_code == HTTPStatus.CREATED
    assert response.json()["tasks"][0]["env"] == {"GREETING": "こんにちは"}


def test_an_image_no_kubelet_can_pull_is_400_naming_the_field(world, api_for):
    """A reference outside the image grammar (github.com/distribution/reference) would be
    accepted by the API server and fail every pod with InvalidImageName."""
    task = {"name": "worker", "replicas": 1, "image": "registry.example/模型:latest"}
    response = api_for("researcher").post(
        "/api/v1/jobs/", job_body(world["nlp_queue"], tasks=[task]), format="json"
    )
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert "image reference" in response.json()["errors"]["tasks[0].image"][0]


NEWLINE_NAMES = ["nl-name\n", "nl-name\r\n", "nl-name\u2028", "nl-name\x85"]


def _manifest(name: str, task_name: str = "worker") -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {
                "queue": "nlp-train",
                "tasks": [
                    {
                        "name": task_name,
                        "replicas": 1,
                        "template": {"spec": {"containers": [{"image": "busybox"}]}},
                    }
                ],
            },
        }
    )


@pytest.mark.parametrize("name", NEWLINE_NAMES)
@pytest.mark.parametrize("where", ["job", "task"])
@pytest.mark.parametrize("as_yaml", [False, True], ids=["json", "yaml"])
def test_no_entry_point_stores_a_name_with_a_line_break(world, api_for, name, where, as_yaml):
    """Refused, or stripped of the surrounding whitespace by the JSON serializer: a name that
    reaches the database is a DNS label, whole."""
    job_name, task_name = (name, "worker") if where == "job" else ("hostile", name)
    client = api_for("researcher")
    if as_yaml:
        response = client.post(
            "/api/v1/jobs/", _manifest(job_name, task_name), content_type="application/yaml"
        )
    else:
        response = client.post(
            "/api/v1/jobs/", _task(name=task_name) | {"name": job_name}, format="json"
        )
    assert response.status_code in (HTTPStatus.CREATED, HTTPStatus.BAD_REQUEST), response.content
    for job in Job.objects.prefetch_related("tasks"):
        assert DNS_LABEL_RE.fullmatch(job.name), job.name
        assert all(DNS_LABEL_RE.fullmatch(task.name) for task in job.tasks.all()), job.pk
    if response.status_code == HTTPStatus.BAD_REQUEST:
        errors = response.json()["errors"]
        expected = "name" if where == "job" else "tasks[0].name"
        if as_yaml:
            expected = "metadata.name" if where == "job" else "spec.tasks[0].name"
        assert expected in errors, errors


@pytest.mark.parametrize(
    "key", ["x\r\nSet-Cookie: a=b", "x\ny", "x\u2028y", "x\ty", "plugins\x85", "é" * 3, "k" * 64]
)
@pytest.mark.parametrize("as_yaml", [False, True], ids=["json", "yaml"])
def test_an_unknown_spec_field_that_is_no_field_name_is_400(world, api_for, key, as_yaml):
    """Ignored spec fields are listed in X-Manifest-Ignored-Fields: a line break there was a
    500 (BadHeaderError) after the job had been written."""
    manifest = yaml.safe_load(_manifest("hostile"))
    manifest["spec"][key] = True
    client = api_for("researcher")
    if as_yaml:
        body = yaml.safe_dump(manifest, allow_unicode=True)
        response = client.post("/api/v1/jobs/", body, content_type="application/yaml")
    else:
        response = client.post("/api/v1/jobs/", manifest, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    assert "spec" in response.json()["errors"]
    assert not Job.objects.filter(name="hostile").exists()


def test_plain_unknown_spec_fields_are_listed_in_a_header(world, api_for):
    manifest = yaml.safe_load(_manifest("hostile"))
    # maxRetry, policies and ttlSecondsAfterFinished are honoured, so not listed.
    manifest["spec"] |= {"maxRetry": 3, "ttlSecondsAfterFinished": 60, "scheduler_name.x-1": "v"}
    response = api_for("researcher").post("/api/v1/jobs/", manifest, format="json")
    assert response.status_code == HTTPStatus.CREATED, response.content
    assert response["X-Manifest-Ignored-Fields"] == "spec.scheduler_name.x-1"
    assert Job.objects.get(name="hostile").ttl_seconds_after_finished == 60

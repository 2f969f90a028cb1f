"""Fractional GPU requests: the cost rule, the limits, and every way a job comes in."""

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.test import Client, override_settings
from rest_framework.test import APIClient

from jobspec import gpushare, volcano
from jobspec.limits import (
    GPU_FRACTION_AND_WHOLE,
    GPU_MEMORY_ABOVE_LARGEST,
    GPU_MEMORY_UNKNOWN,
    GPU_SHARING_OFF,
    gpus_number_error,
    task_gpu_errors,
)
from jobspec.podtemplate import pod_template_parse
from portal.cli.main import build_parser, manifest_from_flags
from portal.jobs.forms import TaskForm
from portal.jobs.models import JobTask
from portal.jobs.services import job_submit
from tests.factories import NodeFactory

# --- the cost rule and the units ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpus", "milli", "memory", "device", "cost"),
    [
        (2, 0, 0, 81920, 2000),
        (0, 250, 0, 81920, 250),
        (0, 0, 10240, 81920, 125),  # 10 GiB of an 80 GiB card
        (0, 0, 10240, 40960, 250),
        (0, 0, 1, 81920, 1),  # rounds up: any memory costs something
        (0, 100, 20480, 81920, 250),  # compute and memory both held: the larger
        (0, 0, 10240, 0, 1000),  # device memory unknown: the most it could cost
        (0, 0, 0, 81920, 0),
    ],
)
def test_milli_cost(gpus, milli, memory, device, cost):
    assert (
        gpushare.milli_cost(
            gpus=gpus, gpu_milli=milli, gpu_memory_mib=memory, device_memory_mib=device
        )
        == cost
    )


def test_gpus_text_and_number():
    assert [gpushare.gpus_text(m) for m in (8000, 250, 1500, 0, 1)] == [
        "8",
        "0.25",
        "1.5",
        "0",
        "0.001",
    ]
    assert gpushare.gpus_number(8000) == 8
    assert isinstance(gpushare.gpus_number(8000), int)
    assert gpushare.gpus_number(250) == 0.25
    assert gpushare.request_text(gpus=0, gpu_milli=250, gpu_memory_mib=10240) == (
        "0.25 GPU + 10 GiB GPU memory"
    )
    assert gpushare.request_text(gpus=1, gpu_milli=0, gpu_memory_mib=0) == "1 GPU"


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (2, None),
        (Decimal("0.25"), None),
        ("0.5", None),
        (0.1, None),
        (Decimal("1.5"), "more than one GPU and not whole; ask for 2 whole GPUs"),
        (Decimal("-0.5"), "must not be negative; this asks for -0.5"),
        (Decimal("0.0005"), "at most 3 decimal places"),
        ("many", "must be a number of GPUs"),
        (float("nan"), "must be a number of GPUs"),
    ],
)
def test_gpus_number_error(value, error):
    message = gpus_number_error(value)
    if error is None:
        assert message is None
    else:
        assert error in message


def test_task_gpu_errors_name_the_field():
    whole_and_share = JobTask(gpus=2, gpu_milli=250)
    assert task_gpu_errors(
        whole_and_share, sharing="volcano", largest_device_mib=81920, prefix="t."
    ) == {"t.gpu_milli": [GPU_FRACTION_AND_WHOLE.format(gpus=2, share="250 milli-GPU")]}
    too_much = JobTask(gpu_memory_mib=100 * 1024)
    assert task_gpu_errors(too_much, sharing="hami", largest_device_mib=81920, prefix="") == {
        "gpu_memory_mib": [GPU_MEMORY_ABOVE_LARGEST.format(limit="80 GiB", asked="100 GiB")]
    }
    unknown = JobTask(gpu_memory_mib=1024)
    assert task_gpu_errors(unknown, sharing="hami", largest_device_mib=0, prefix="") == {
        "gpu_memory_mib": [GPU_MEMORY_UNKNOWN]
    }
    off = JobTask(gpu_milli=500)
    assert task_gpu_errors(off, sharing="none", largest_device_mib=81920, prefix="") == {
        "gpu_milli": [GPU_SHARING_OFF]
    }
    assert task_gpu_errors(JobTask(gpus=8), sharing="none", largest_device_mib=0, prefix="") == {}


# --- the service: every way in goes through it ------------------------------------------------


def _task(**overrides):
    return {"name": "infer", "replicas": 2, "image": "server:1", **overrides}


def _refused(submitter, queue, **task_fields) -> dict:
    with pytest.raises(ValidationError) as caught:
        job_submit(submitter=submitter, queue=queue, name="infer", tasks=[_task(**task_fields)])
    return caught.value.message_dict


@pytest.mark.django_db
class TestSubmit:
    def test_a_fraction_is_stored_as_milli_gpu(self, researcher, nlp_queue, cluster):
        job = job_submit(
            submitter=researcher, queue=nlp_queue, name="infer", tasks=[_task(gpus=Decimal("0.25"))]
        )
        task = job.tasks.get()
        assert (task.gpus, task.gpu_milli, task.gpu_memory_mib) == (0, 250, 0)
        assert job.gpu_ask.number == 0.5  # two replicas of a quarter
        assert task.gpus_requested == 0.25

    def test_gpu_memory_alone(self, researcher, nlp_queue, cluster):
        job = job_submit(
            submitter=researcher, queue=nlp_queue, name="infer", tasks=[_task(gpu_memory_mib=10240)]
        )
        assert job.tasks.get().gpu_request_text == "10 GiB GPU memory"

    def test_a_fraction_above_one_is_refused_under_gpus(self, researcher, nlp_queue, cluster):
        errors = _refused(researcher, nlp_queue, gpus=1.5)
        assert list(errors) == ["tasks[0].gpus"]
        assert "ask for 2 whole GPUs" in errors["tasks[0].gpus"][0]

    def test_negative_and_nonsense_gpus(self, researcher, nlp_queue, cluster):
        assert (
            "must not be negative"
            in _refused(researcher, nlp_queue, gpus="-0.5")["tasks[0].gpus"][0]
        )
        assert list(_refused(researcher, nlp_queue, gpu_milli=-5)) == ["tasks[0].gpu_milli"]

    def test_more_memory_than_the_largest_device(self, researcher, nlp_queue, cluster):
        errors = _refused(researcher, nlp_queue, gpu_memory_mib=90 * 1024)
        assert errors == {
            "tasks[0].gpu_memory_mib": [
                GPU_MEMORY_ABOVE_LARGEST.format(limit="80 GiB", asked="90 GiB")
            ]
        }

    def test_the_largest_device_counts(self, researcher, nlp_queue, cluster):
        NodeFactory(name="big", gpu_memory_mib=141 * 1024)
        job = job_submit(
            submitter=researcher, queue=nlp_queue, name="infer",
            tasks=[_task(gpu_memory_mib=90 * 1024)],
        )  # fmt: skip
        assert job.tasks.get().gpu_memory_mib == 90 * 1024

    def test_a_share_with_whole_gpus(self, researcher, nlp_queue, cluster):
        errors = _refused(researcher, nlp_queue, gpus=2, gpu_milli=500)
        assert errors == {
            "tasks[0].gpu_milli": [GPU_FRACTION_AND_WHOLE.format(gpus=2, share="500 milli-GPU")]
        }

    def test_a_share_of_a_thousand_is_a_whole_card(self, researcher, nlp_queue, cluster):
        errors = _refused(researcher, nlp_queue, gpu_milli=1000)
        assert "at most 999 milli-GPU" in errors["tasks[0].gpu_milli"][0]

    @override_settings(GPU_SHARING="none")
    def test_without_a_sharing_stack_fractions_are_refused(self, researcher, nlp_queue, cluster):
        assert _refused(researcher, nlp_queue, gpus="0.5") == {
            "tasks[0].gpu_milli": [GPU_SHARING_OFF]
        }
        assert _refused(researcher, nlp_queue, gpu_memory_mib=1024) == {
            "tasks[0].gpu_memory_mib": [GPU_SHARING_OFF]
        }
        # whole GPUs are untouched
        job_submit(submitter=researcher, queue=nlp_queue, name="w", tasks=[_task(gpus=2)])

    @override_settings(GPU_SHARING="mig")
    def test_an_unknown_sharing_stack_is_a_configuration_error(self, researcher, nlp_queue):
        from django.core.exceptions import ImproperlyConfigured

        with pytest.raises(
            ImproperlyConfigured, match="GPU_SHARING must be one of none, volcano, hami"
        ):
            job_submit(submitter=researcher, queue=nlp_queue, name="w", tasks=[_task(gpus=1)])


# --- API --------------------------------------------------------------------------------------


@pytest.fixture
def api(researcher):
    client = APIClient()
    client.force_authenticate(researcher)
    return client


def _post(api, **task_fields):
    body = {"queue": "nlp-train", "name": "infer", "tasks": [_task(**task_fields)]}
    return api.post("/api/v1/jobs/", body, format="json")


@pytest.mark.django_db
class TestApi:
    def test_decimal_gpus(self, api, nlp_queue, cluster):
        response = _post(api, gpus=0.25)
        assert response.status_code == 201, response.json()
        data = response.json()
        assert data["gpus"] == 0.5
        assert (data["tasks"][0]["gpus"], data["tasks"][0]["gpu_milli"]) == (0.25, 250)
        listed = api.get("/api/v1/jobs/").json()["results"][0]
        assert listed["gpus"] == 0.5

    def test_gpu_memory_says_what_was_asked_everywhere(self, api, researcher, nlp_queue, cluster):
        """10 GiB of GPU memory on the cluster's 40 GiB cards is a quarter of one each, as the
        scheduler counts it: not "0 GPUs" with the 10 GiB shown nowhere."""
        NodeFactory(name="small-cards", gpu_memory_mib=40960)
        response = _post(api, gpu_memory_mib=10240)
        assert response.status_code == 201, response.json()
        created = response.json()
        job_id = created["id"]
        for data in (created, api.get(f"/api/v1/jobs/{job_id}/").json()):
            assert (data["gpus"], data["gpu_memory_mib"]) == (0.5, 20480)
            assert data["gpu_request"] == "0.5 (20 GiB GPU memory)"
            (task,) = data["tasks"]
            assert (task["gpus"], task["gpu_memory_mib"]) == (0, 10240)  # as submitted
            assert task["gpu_request"] == "0.25 (10 GiB GPU memory)"
        listed = api.get("/api/v1/jobs/").json()["results"][0]
        assert (listed["gpus"], listed["gpu_request"]) == (0.5, "0.5 (20 GiB GPU memory)")

        client = Client()
        client.force_login(researcher)
        page = client.get(f"/jobs/{job_id}/").content.decode()
        assert '<dd id="job-gpus">0.5 (20 GiB GPU memory)<br>' in page
        assert "GPU memory counts as its share of a 40 GiB GPU" in page
        assert '<td data-label="GPUs" class="num">0.25 (10 GiB GPU memory)</td>' in page
        listing = client.get("/jobs/").content.decode()
        assert '<td data-label="GPUs" class="num">0.5 (20 GiB GPU memory)</td>' in listing

        from portal.jobs.selectors import pending_demand_per_queue

        assert pending_demand_per_queue() == {"nlp-train": 0.5}

    def test_whole_gpus_stay_integers(self, api, nlp_queue, cluster):
        response = _post(api, gpus=2)
        assert response.status_code == 201
        assert response.content.count(b'"gpus":4,') == 1  # the job: 2 replicas x 2
        assert response.json()["tasks"][0]["gpus"] == 2

    @pytest.mark.parametrize(
        ("fields", "key", "needle"),
        [
            ({"gpus": 1.5}, "tasks[0].gpus", "more than one GPU"),
            # The form's words: must not be negative; this asks for -0.5
            ({"gpus": -0.5}, "tasks[0].gpus", "must not be negative; this asks for -0.5"),
            ({"gpus": -1}, "tasks[0].gpus", "must not be negative; this asks for -1"),
            ({"gpus": "lots"}, "tasks[0].gpus", "A number of GPUs is required"),
            ({"gpus": True}, "tasks[0].gpus", "A number of GPUs is required"),
            ({"gpus": 0.0001}, "tasks[0].gpus", "at most 3 decimal places"),
            ({"gpu_memory_mib": 200000}, "tasks[0].gpu_memory_mib", "largest GPU"),
            ({"gpus": 1, "gpu_memory_mib": 1024}, "tasks[0].gpu_memory_mib", "whole GPUs"),
        ],
    )
    def test_bad_requests_name_the_field(self, api, nlp_queue, cluster, fields, key, needle):
        response = _post(api, **fields)
        assert response.status_code == 400
        errors = response.json()["errors"]
        assert list(errors) == [key]
        assert needle in errors[key][0]

    @override_settings(GPU_SHARING="none")
    def test_no_sharing_stack(self, api, nlp_queue, cluster):
        response = _post(api, gpus="0.5")
        assert response.status_code == 400
        assert response.json()["errors"] == {"tasks[0].gpu_milli": [GPU_SHARING_OFF]}

    def test_volcano_manifest_with_vgpu(self, api, nlp_queue, cluster):
        manifest = _manifest({"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-cores": 25})
        response = api.post("/api/v1/jobs/", manifest, format="json")
        assert response.status_code == 201, response.json()
        assert response.json()["tasks"][0]["gpu_milli"] == 250

    def test_volcano_manifest_errors_are_manifest_paths(self, api, nlp_queue, cluster):
        manifest = _manifest({"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 200000})
        response = api.post("/api/v1/jobs/", manifest, format="json")
        assert response.status_code == 400
        assert list(response.json()["errors"]) == [
            "spec.tasks[0].template.spec.containers[0].resources.limits"
        ]


# --- Volcano / HAMi resource names ------------------------------------------------------------


def _manifest(limits: dict) -> dict:
    return {
        "apiVersion": volcano.API_VERSION,
        "kind": "Job",
        "metadata": {"name": "infer"},
        "spec": {
            "queue": "nlp-train",
            "tasks": [
                {
                    "name": "server",
                    "replicas": 1,
                    "template": {
                        "spec": {"containers": [{"image": "s:1", "resources": {"limits": limits}}]}
                    },
                }
            ],
        },
    }


def _summary(limits: dict):
    template = {
        "spec": {"containers": [{"name": "s", "image": "s:1", "resources": {"limits": limits}}]}
    }
    return pod_template_parse(template, allow_host_path=False)


def _gpu_fields(limits: dict) -> tuple[int, int, int]:
    parsed = _summary(limits)
    assert parsed.errors == {}
    return parsed.summary.gpus, parsed.summary.gpu_milli, parsed.summary.gpu_memory_mib


@pytest.mark.parametrize(
    ("limits", "fields"),
    [
        ({"nvidia.com/gpu": 2}, (2, 0, 0)),
        # Volcano deviceshare
        ({"volcano.sh/vgpu-number": 2}, (2, 0, 0)),  # no share: whole cards
        ({"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-cores": 25}, (0, 250, 0)),
        ({"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 10240}, (0, 0, 10240)),
        ({"volcano.sh/vgpu-memory-percentage": 50}, (0, 500, 0)),  # the count defaults to 1
        ({"volcano.sh/vgpu-cores": "12.5"}, (0, 125, 0)),
        ({"volcano.sh/vgpu-cores": 100}, (1, 0, 0)),  # all of one card
        # HAMi
        ({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 20000}, (0, 0, 20000)),
        (
            {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 30, "nvidia.com/gpumem": 4096},
            (0, 300, 4096),
        ),
        ({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 25}, (0, 250, 0)),
    ],
)
def test_shared_gpu_resource_names(limits, fields):
    assert _gpu_fields(limits) == fields


def test_a_share_of_several_gpus_is_refused():
    errors = _summary({"nvidia.com/gpu": 2, "nvidia.com/gpumem": 4096}).errors
    assert errors == {
        "spec.containers[0].resources.limits": [
            gpushare.GPU_SHARE_ON_MANY.format(count=2, names="nvidia.com/gpumem")
        ]
    }


def test_a_percentage_above_100_is_refused():
    errors = _summary({"volcano.sh/vgpu-cores": 150}).errors
    assert errors == {
        "spec.containers[0].resources.limits.volcano.sh/vgpu-cores": [gpushare.PERCENT_ABOVE_100]
    }


# --- form and CLI -----------------------------------------------------------------------------


def _form(**data):
    base = {"name": "infer", "replicas": "1", "image": "s:1", "gpus": "1", "cpu": "", "memory": ""}
    return TaskForm(data={**base, **data})


@pytest.mark.parametrize(
    ("data", "gpus", "memory"),
    [
        ({"gpus": "0.25"}, Decimal("0.25"), 0),
        ({"gpus": "0", "gpu_memory": "10Gi"}, Decimal(0), 10240),
        ({"gpus": "0", "gpu_memory": "10"}, Decimal(0), 10240),  # a bare number is GiB
        ({"gpus": "0", "gpu_memory": "1000Mi"}, Decimal(0), 1000),
    ],
)
def test_form_fractions(data, gpus, memory):
    form = _form(**data)
    assert form.is_valid(), form.errors
    task = form.as_task(gpu_model="")
    assert (task["gpus"], task["gpu_memory_mib"]) == (gpus, memory)


def test_form_refuses_nonsense():
    form = _form(gpus="0.0001", gpu_memory="lots")
    assert not form.is_valid()
    assert set(form.errors) == {"gpus", "gpu_memory"}


def _cli(*flags: str) -> dict:
    args = build_parser().parse_args(
        ["submit", "--queue", "q", "--name", "n", "--image", "i", *flags]
    )
    return manifest_from_flags(args)["spec"]["tasks"][0]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize(
    ("flags", "limits"),
    [
        (("--gpus", "2"), {"nvidia.com/gpu": 2}),
        (("--gpus", "0.25"), {"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-cores": "25"}),
        (("--gpus", "0.125"), {"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-cores": "12.5"}),
        (("--gpu-memory", "10Gi"), {"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 10240}),
    ],
)
def test_cli_gpus(flags, limits):
    assert _cli(*flags)["resources"]["limits"] == limits


def test_cli_round_trip_through_the_parser():
    container = _cli("--gpus", "0.125")
    assert _gpu_fields(container["resources"]["limits"]) == (0, 125, 0)


def test_what_pages_say_a_pod_holds():
    from portal.cluster.models import Placement
    from portal.scheduling.models import PreemptionEvent

    assert gpushare.held_text(250, [3]) == "0.25 of GPU 3"
    assert gpushare.held_text(2000, [0, 1]) == "2 on GPUs 0, 1"
    assert gpushare.held_text(1000, []) == "1"
    assert Placement(gpus=8).gpus_held_text == "8"  # a row from before shares
    event = PreemptionEvent(gpus_freed=0, gpu_milli_freed=250, gpu_devices=[3])
    assert (event.gpus_freed_text, event.gpus_freed_number) == ("0.25 of GPU 3", 0.25)


def test_cli_refuses_a_fraction_above_one_as_the_server_would():
    from portal.cli.main import UsageError

    with pytest.raises(
        UsageError, match="--gpus: a fraction of a GPU is a share of one device: 1.5"
    ):
        _cli("--gpus", "1.5")

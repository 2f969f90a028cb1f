"""Jobs over REST: list, create (JSON or a Volcano manifest), retrieve, cancel, why."""

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiRequest,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from portal.api.base import (
    ApiSerializer,
    ApiView,
    ReusedFieldsSerializer,
    StrictSerializer,
    TimeParameterField,
    error_responses,
)
from portal.api.errors import django_validation_errors
from portal.api.pagination import ApiPagination
from portal.api.parsers import YAML_PARSERS, LimitedJSONParser
from portal.api.throttling import ApiScopedRateThrottle
from portal.cluster.selectors import placement_list_active, placement_list_ended
from portal.common import units
from portal.common.ids import parse_id
from portal.queues.access import visible_queue_get
from portal.queues.models import Queue
from portal.tenants.access import visible_tenants
from scheduler.logs import LogUnavailable, pod_log_read

from . import volcano
from .access import can_cancel_job
from .gpushare import gpus_decimal, gpus_number, milli_asked
from .limits import host_path_allowed, task_count_check
from .models import TASK_DEFAULT_CPU_MILLIS, TASK_DEFAULT_MEMORY_BYTES, Job
from .rendering import job_render
from .selectors import job_get, job_pod_names, job_queue_position, job_search, job_state
from .services import job_cancel, job_quarantine_release, job_submit

QUEUE_NOT_FOUND = "no queue {ref} that you can see"
TENANT_NOT_FOUND = "no tenant {ref} that you can see"
YAML_NEEDS_MANIFEST = f"a YAML body must be a Volcano Job manifest ({volcano.API_VERSION})"
MANIFEST_IGNORED_HEADER = "X-Manifest-Ignored-Fields"


@extend_schema_field(OpenApiTypes.NUMBER)
class GpusField(serializers.Field):
    """GPUs per pod: a whole number (2), or a fraction of one GPU (0.25) with at most three
    decimals. Shape and sign here; what a pod may ask for is `job_submit`'s to say."""

    default_error_messages = {
        "invalid": "A number of GPUs is required: whole (2) or a fraction of one GPU (0.25).",
        "negative": "Ensure this value is greater than or equal to 0.",
    }

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool):
            self.fail("invalid")
        if isinstance(data, int):
            if data < 0:
                self.fail("negative")
            return data
        if not isinstance(data, float | str) or (isinstance(data, str) and len(data) > 64):
            self.fail("invalid")
        number = gpus_decimal(data)
        if number is None:
            self.fail("invalid")
        if number < 0:
            self.fail("negative")
        return number

    def to_representation(self, value: Any) -> Any:
        return value


def resolve_queue(*, user: Any, ref: str) -> Queue | None:
    """A queue visible to `user`, by id (digits) or by name (names are unique)."""
    lookup = {"pk": pk} if (pk := parse_id(ref)) is not None else {"name": ref}
    return visible_queue_get(user, **lookup)


def _job_url(job: Job, suffix: str = "") -> str:
    return reverse(f"api:job_{suffix or 'detail'}", kwargs={"job_id": job.pk})


class JobListApi(ApiView):
    """Jobs you may see (your tenants'; all for site admins), newest first, paginated."""

    pagination_class = ApiPagination

    class FilterSerializer(ApiSerializer):
        queue = serializers.CharField(required=False, max_length=63, help_text="Queue id or name")
        tenant = serializers.CharField(required=False, max_length=63, help_text="Tenant id or name")
        status = serializers.ChoiceField(choices=Job.Status.choices, required=False)
        mine = serializers.BooleanField(required=False, default=False)
        never_runnable = serializers.BooleanField(
            required=False,
            default=False,
            help_text="Only waiting jobs the last cycle found can never run as submitted.",
        )
        since = TimeParameterField(
            required=False, help_text="Only jobs submitted at or after this time (ISO 8601)."
        )

    class OutputSerializer(ApiSerializer):
        id = serializers.IntegerField()
        name = serializers.CharField()
        tenant = serializers.CharField(source="tenant.name")
        queue = serializers.CharField(source="queue.name")
        queue_id = serializers.IntegerField()
        submitter = serializers.CharField(source="submitter.username")
        status = serializers.ChoiceField(choices=Job.Status.choices)
        priority = serializers.IntegerField()
        min_available = serializers.IntegerField()
        replicas = serializers.IntegerField(source="total_replicas")
        gpus = GpusField(
            source="total_gpus", help_text="GPUs the job asks for in all (0.25: a quarter card)"
        )
        submitted_at = serializers.DateTimeField()
        pending_reason = serializers.CharField()
        url = serializers.SerializerMethodField()

        def get_url(self, job: Job) -> str:
            return _job_url(job)

    @extend_schema(
        operation_id="jobs_list",
        tags=["jobs"],
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), **error_responses(400, 401)},
        examples=[
            OpenApiExample(
                "A pending job",
                response_only=True,
                value={
                    "count": 1,
                    "next": None,
                    "previous": None,
                    "results": [
                        {
                            "id": 7,
                            "name": "bert-large",
                            "tenant": "nlp",
                            "queue": "nlp-train",
                            "queue_id": 1,
                            "submitter": "researcher",
                            "status": "pending",
                            "priority": 0,
                            "min_available": 4,
                            "replicas": 4,
                            "gpus": 32,
                            "submitted_at": "2025-01-01T12:00:00Z",
                            "pending_reason": "queue nlp-train at capability 24/24 GPUs",
                            "url": "/api/v1/jobs/7/",
                        }
                    ],
                },
            )
        ],
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        data = filters.validated_data
        errors: dict[str, list[str]] = {}
        queue_id = tenant_id = None
        if data.get("queue"):
            queue = resolve_queue(user=request.user, ref=data["queue"])
            if queue is None:
                errors["queue"] = [QUEUE_NOT_FOUND.format(ref=data["queue"])]
            else:
                queue_id = queue.pk
        if data.get("tenant"):
            ref = data["tenant"]
            tenants = visible_tenants(request.user)
            pk = parse_id(ref)
            tenant = (
                tenants.filter(pk=pk).first()
                if pk is not None
                else tenants.filter(name=ref).first()
            )
            if tenant is None:
                errors["tenant"] = [TENANT_NOT_FOUND.format(ref=ref)]
            else:
                tenant_id = tenant.pk
        if errors:
            raise serializers.ValidationError(errors)
        jobs = job_search(
            user=request.user,
            status=data.get("status"),
            queue_id=queue_id,
            tenant_id=tenant_id,
            mine=data["mine"],
            submitted_since=data.get("since"),
            never_runnable=data["never_runnable"],
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(jobs, request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)


class JobDetailApi(ApiView):
    """One job with its tasks, active placements and pending reason (404 if not yours)."""

    class OutputSerializer(JobListApi.OutputSerializer):
        class TaskSerializer(ApiSerializer):
            name = serializers.CharField()
            replicas = serializers.IntegerField(min_value=1)
            image = serializers.CharField()
            command = serializers.ListField(child=serializers.CharField())
            env = serializers.DictField(child=serializers.CharField())
            gpus = GpusField(source="gpus_requested", help_text="per pod: 2, or 0.25")
            gpu_milli = serializers.IntegerField()
            gpu_memory_mib = serializers.IntegerField()
            cpu_millis = serializers.IntegerField()
            memory_bytes = serializers.IntegerField()
            node_selector = serializers.DictField(child=serializers.CharField())
            tolerations = serializers.ListField(child=serializers.DictField())
            pod_template = serializers.DictField(
                help_text="The task's pod template as stored ({} when built from the fields "
                "above); env valueFrom stays a reference."
            )

        class PlacementSerializer(ApiSerializer):
            task = serializers.CharField(source="task.name")
            replica = serializers.IntegerField()
            node = serializers.CharField(source="node_name")
            pod = serializers.CharField(source="pod_name")
            state = serializers.CharField()
            gpus = GpusField(source="gpus_held", help_text="GPUs the pod holds: 2, or 0.25")
            gpu_milli = serializers.IntegerField(source="milli_held")
            gpu_devices = serializers.ListField(
                child=serializers.IntegerField(), help_text="GPU device indices on the node"
            )

        class EndedPodSerializer(ApiSerializer):
            task = serializers.CharField(source="task.name")
            replica = serializers.IntegerField()
            node = serializers.CharField(source="node_name")
            pod = serializers.CharField(source="pod_name")
            state = serializers.CharField(help_text="succeeded or failed")
            exit_code = serializers.IntegerField(
                allow_null=True, help_text="The main container's exit code (null: not reported)"
            )
            exit_reason = serializers.CharField(
                help_text="As the kubelet said: Completed, Error, OOMKilled, Evicted, ..."
            )
            ended_at = serializers.DateTimeField(allow_null=True)

        url = None  # the detail has `links.self` instead
        expected_duration_seconds = serializers.IntegerField(allow_null=True)
        admitted_at = serializers.DateTimeField(allow_null=True)
        started_at = serializers.DateTimeField(allow_null=True)
        finished_at = serializers.DateTimeField(allow_null=True)
        cancelled_at = serializers.DateTimeField(allow_null=True)
        pending_reason_at = serializers.DateTimeField(allow_null=True)
        preemption_count = serializers.IntegerField()
        plugins = serializers.DictField(
            child=serializers.ListField(child=serializers.CharField()),
            help_text="Volcano job plugins the portal runs for this job, with their flags.",
        )
        max_retry = serializers.IntegerField()
        ttl_seconds_after_finished = serializers.IntegerField(allow_null=True)
        max_runtime_seconds = serializers.IntegerField(
            allow_null=True, help_text="The job's own run-time limit (null: its queue's)."
        )
        retry_count = serializers.IntegerField()
        retries = serializers.ListField(
            child=serializers.DictField(),
            help_text="Each restart a policy made: at, pod, event, action, reason.",
        )
        tasks = TaskSerializer(many=True, source="tasks.all")
        placements = serializers.SerializerMethodField()
        ended_pods = serializers.SerializerMethodField()
        can_cancel = serializers.SerializerMethodField()
        links = serializers.SerializerMethodField()

        @extend_schema_field(PlacementSerializer(many=True))
        def get_placements(self, job: Job) -> list[dict[str, Any]]:
            placements = placement_list_active(job_id=job.pk)
            return self.PlacementSerializer(placements, many=True).data

        @extend_schema_field(EndedPodSerializer(many=True))
        def get_ended_pods(self, job: Job) -> list[dict[str, Any]]:
            return self.EndedPodSerializer(placement_list_ended(job_id=job.pk), many=True).data

        def get_can_cancel(self, job: Job) -> bool:
            user = self.context["request"].user
            return can_cancel_job(user, job) and not job.is_terminal

        @extend_schema_field(
            inline_serializer(
                name="JobLinks",
                fields={
                    name: serializers.CharField() for name in ("self", "cancel", "why", "queue")
                },
            )
        )
        def get_links(self, job: Job) -> dict[str, str]:
            return {
                "self": _job_url(job),
                "cancel": _job_url(job, "cancel"),
                "why": _job_url(job, "why"),
                "queue": reverse("api:queue_detail", kwargs={"queue_id": job.queue_id}),
            }

    @extend_schema(
        operation_id="jobs_retrieve",
        tags=["jobs"],
        responses={200: OutputSerializer, **error_responses(401, 404)},
    )
    def get(self, request: Request, job_id: int) -> Response:
        job = job_get(user=request.user, job_id=job_id)
        placements = placement_list_active(job_id=job.pk)
        ended = placement_list_ended(job_id=job.pk)
        return Response(
            job_detail_data(job, user=request.user, placements=placements, ended_pods=ended)
        )


# One shared instance formats every timestamp as DRF's DateTimeField does (ISO 8601, `Z`).
_DATETIME = serializers.DateTimeField()
_DETAIL_FIELDS = tuple(JobDetailApi.OutputSerializer._declared_fields)


def job_detail_data(
    job: Job, *, user: Any, placements: Any = (), ended_pods: Any = ()
) -> dict[str, Any]:
    """What `JobDetailApi.OutputSerializer` renders for `job`, built directly.

    The serializer stays the documented schema; building its output with it deep-copies
    about forty field objects per request. Measured: answering a job creation through the
    serializer took 32.4 M instructions in the web process against 26.2 M this way (+23%,
    `python -m bench.api_profile --instructions --requests 50`), on a path whose 200 req/s
    target has little margin. A test renders jobs in every state both ways and compares them
    key by key, in order.
    """
    tasks = list(job.tasks.all())
    stamp = _DATETIME.to_representation
    data = {
        "id": job.pk,
        "name": job.name,
        "tenant": job.tenant.name,
        "queue": job.queue.name,
        "queue_id": job.queue_id,
        "submitter": job.submitter.username,
        "status": job.status,
        "priority": job.priority,
        "min_available": job.min_available,
        "replicas": sum(task.replicas for task in tasks),
        "gpus": gpus_number(sum(task.replicas * milli_asked(task) for task in tasks)),
        "submitted_at": stamp(job.submitted_at),
        "pending_reason": job.pending_reason,
        "expected_duration_seconds": job.expected_duration_seconds,
        "admitted_at": stamp(job.admitted_at),
        "started_at": stamp(job.started_at),
        "finished_at": stamp(job.finished_at),
        "cancelled_at": stamp(job.cancelled_at),
        "pending_reason_at": stamp(job.pending_reason_at),
        "preemption_count": job.preemption_count,
        "plugins": {str(name): [str(arg) for arg in args] for name, args in job.plugins.items()},
        "max_retry": job.max_retry,
        "ttl_seconds_after_finished": job.ttl_seconds_after_finished,
        "max_runtime_seconds": job.max_runtime_seconds,
        "retry_count": job.retry_count,
        "retries": list(job.retries),
        "tasks": [
            {
                "name": task.name,
                "replicas": task.replicas,
                "image": task.image,
                "command": [str(part) for part in task.command],
                "env": {str(key): str(value) for key, value in task.env.items()},
                "gpus": task.gpus_requested,
                "gpu_milli": task.gpu_milli,
                "gpu_memory_mib": task.gpu_memory_mib,
                "cpu_millis": task.cpu_millis,
                "memory_bytes": task.memory_bytes,
                "node_selector": {str(k): str(v) for k, v in task.node_selector.items()},
                "tolerations": [dict(toleration) for toleration in task.tolerations],
                "pod_template": task.pod_template,
            }
            for task in tasks
        ],
        "placements": [
            {
                "task": placement.task.name,
                "replica": placement.replica,
                "node": placement.node_name,
                "pod": placement.pod_name,
                "state": placement.state,
                "gpus": placement.gpus_held,
                "gpu_milli": placement.milli_held,
                "gpu_devices": list(placement.gpu_devices),
            }
            for placement in placements
        ],
        "ended_pods": [
            {
                "task": placement.task.name,
                "replica": placement.replica,
                "node": placement.node_name,
                "pod": placement.pod_name,
                "state": placement.state,
                "exit_code": placement.exit_code,
                "exit_reason": placement.exit_reason,
                "ended_at": stamp(placement.ended_at) if placement.ended_at else None,
            }
            for placement in ended_pods
        ],
        "can_cancel": can_cancel_job(user, job) and not job.is_terminal,
        "links": {
            "self": _job_url(job),
            "cancel": _job_url(job, "cancel"),
            "why": _job_url(job, "why"),
            "queue": reverse("api:queue_detail", kwargs={"queue_id": job.queue_id}),
        },
    }
    return {name: data[name] for name in _DETAIL_FIELDS}


VOLCANO_EXAMPLE = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: bert-large
  annotations:
    priority: "10"
spec:
  queue: nlp-train
  minAvailable: 3
  tasks:
    - name: master
      replicas: 1
      template:
        spec:
          containers:
            - image: ghcr.io/example/trainer:latest
              command: ["python", "train.py"]
              resources:
                limits: {nvidia.com/gpu: 8, cpu: "16", memory: 64Gi}
    - name: worker
      replicas: 2
      template:
        spec:
          nodeSelector: {gpu-model: H100}
          containers:
            - image: ghcr.io/example/trainer:latest
              resources:
                limits: {nvidia.com/gpu: 8, cpu: "16", memory: 64Gi}
"""


class JobCreateApi(ApiView):
    """Submit a job: the JSON body below, or a Volcano `batch.volcano.sh/v1alpha1` Job
    manifest as JSON or YAML (`Content-Type: application/yaml`). Rate limited per user."""

    parser_classes = [LimitedJSONParser, *YAML_PARSERS]
    throttle_classes = [ApiScopedRateThrottle]
    throttle_scope = "job_create"

    # Shape (and signs, so that one answer names every field at fault even when the queue is
    # unknown): the upper bounds (GPUs per pod, replicas, sizes, ...) are checked by job_submit
    # against portal.jobs.limits, the same for the form, the upload page and the CLI.
    class InputSerializer(ReusedFieldsSerializer):
        class TaskSerializer(StrictSerializer):
            name = serializers.CharField()
            replicas = serializers.IntegerField(min_value=1)
            image = serializers.CharField(required=False)
            command = serializers.ListField(
                child=serializers.CharField(allow_blank=True),
                required=False,
            )
            env = serializers.DictField(
                child=serializers.CharField(allow_blank=True),
                required=False,
            )
            gpus = GpusField(
                required=False,
                help_text="GPUs per pod: whole (2) or a share of one GPU (0.25; at most "
                "three decimals). A share needs the cluster's GPU sharing stack.",
            )
            gpu_milli = serializers.IntegerField(
                min_value=0,
                required=False,
                help_text="A share of one GPU in thousandths (250 = 0.25 GPU); instead of gpus.",
            )
            gpu_memory_mib = serializers.IntegerField(
                min_value=0,
                required=False,
                help_text="GPU memory of one device, in MiB (10240 = 10 GiB); with or instead "
                "of a share, never with whole GPUs. It costs ceil(memory / device memory x "
                "1000) milli-GPU of the device it gets.",
            )
            cpu_millis = serializers.IntegerField(
                min_value=0,
                required=False,
                help_text=f"Millicores per pod; left out: {TASK_DEFAULT_CPU_MILLIS} "
                f"({units.cores(TASK_DEFAULT_CPU_MILLIS)}).",
            )
            memory_bytes = serializers.IntegerField(
                min_value=0,
                required=False,
                help_text=f"Bytes per pod; left out: {TASK_DEFAULT_MEMORY_BYTES} "
                f"({units.gib(TASK_DEFAULT_MEMORY_BYTES)}).",
            )
            node_selector = serializers.DictField(child=serializers.CharField(), required=False)
            tolerations = serializers.ListField(
                child=serializers.DictField(),
                required=False,
                help_text="Kubernetes tolerations: key, operator (Exists|Equal), value, "
                "effect (NoSchedule|PreferNoSchedule|NoExecute), tolerationSeconds",
            )
            policies = serializers.ListField(child=serializers.DictField(), required=False)
            pod_template = serializers.DictField(
                required=False,
                help_text="A Kubernetes pod template ({metadata, spec}: several containers, "
                "initContainers, volumes, env valueFrom, ...); instead of image, command, env, "
                "gpus, cpu_millis, memory_bytes and node_selector, which it then gives.",
            )

        queue = serializers.CharField(max_length=63, help_text="Queue id or name")
        name = serializers.CharField()
        priority = serializers.IntegerField(required=False)
        min_available = serializers.IntegerField(min_value=1, required=False, allow_null=True)
        expected_duration_seconds = serializers.IntegerField(
            min_value=1, required=False, allow_null=True
        )
        tasks = TaskSerializer(many=True, allow_empty=False)
        policies = serializers.ListField(
            child=serializers.DictField(),
            required=False,
            help_text="Lifecycle policies: {event|events|exitCode, action}; events PodFailed, "
            "PodEvicted, TaskCompleted, OutOfSync, *; actions RestartJob, RestartTask, "
            "AbortJob, CompleteJob, TerminateJob.",
        )
        max_retry = serializers.IntegerField(
            required=False, help_text="Restarts a policy may make (default 3)."
        )
        ttl_seconds_after_finished = serializers.IntegerField(
            required=False,
            allow_null=True,
            help_text="Delete the finished job's pods and objects this many seconds after it "
            "ends (default: each pod FINISHED_POD_RETENTION_SECONDS after it ends).",
        )
        max_runtime_seconds = serializers.IntegerField(
            required=False,
            allow_null=True,
            help_text="End the job once it has run this many seconds, at most its queue's "
            "limit (default: its queue's limit, else none).",
        )
        plugins = serializers.DictField(
            child=serializers.ListField(child=serializers.CharField(), allow_empty=True),
            required=False,
            help_text="Volcano job plugins and their flags: svc, env, pytorch, ssh, mpi "
            '(e.g. {"pytorch": ["--master=master", "--port=23456"]}).',
        )

    OutputSerializer = JobDetailApi.OutputSerializer

    @extend_schema(
        operation_id="jobs_create",
        tags=["jobs"],
        request={
            "application/json": InputSerializer,
            "application/yaml": OpenApiRequest(
                OpenApiTypes.STR, examples=[OpenApiExample("Volcano Job", value=VOLCANO_EXAMPLE)]
            ),
        },
        responses={201: OutputSerializer, **error_responses(400, 401, 413, 415, 429)},
        examples=[
            OpenApiExample(
                "Two-task gang",
                request_only=True,
                media_type="application/json",
                value={
                    "queue": "nlp-train",
                    "name": "bert-large",
                    "priority": 0,
                    "min_available": 3,
                    "tasks": [
                        {
                            "name": "master",
                            "replicas": 1,
                            "image": "ghcr.io/example/trainer:latest",
                            "command": ["python", "train.py"],
                            "gpus": 8,
                            "cpu_millis": 16000,
                            "memory_bytes": 68719476736,
                        },
                        {
                            "name": "worker",
                            "replicas": 2,
                            "image": "ghcr.io/example/trainer:latest",
                            "gpus": 8,
                            "node_selector": {"gpu-model": "H100"},
                        },
                    ],
                },
            ),
            OpenApiExample(
                "Field errors",
                response_only=True,
                status_codes=["400"],
                value={
                    "detail": "Invalid input.",
                    "code": "invalid",
                    "errors": {
                        "tasks[0].gpus": [
                            "at most 64 GPUs per pod (JOB_MAX_GPUS_PER_POD); this asks for 5000"
                        ]
                    },
                },
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        data = request.data
        ignored: list[str] = []
        if volcano.is_volcano_manifest(data):
            try:
                spec = volcano.volcano_job_parse(
                    data, too_many_tasks=task_count_check(), allow_host_path=host_path_allowed()
                )
            except volcano.ManifestError as error:
                spec_part = data.get("spec")
                ref = spec_part.get("queue") if isinstance(spec_part, dict) else None
                raise serializers.ValidationError(
                    self._with_queue_error(request, ref, error.errors, field="spec.queue")
                ) from error
            job = self._submit(request, vars(spec), from_manifest=True)
            ignored = spec.ignored
        elif "yaml" in (request.content_type or ""):
            raise serializers.ValidationError({"body": [YAML_NEEDS_MANIFEST]})
        else:
            tasks = data.get("tasks") if isinstance(data, dict) else None
            if isinstance(tasks, list) and (too_many := task_count_check()(len(tasks))):
                # Before the serializer looks at each of them (a 256 KB body holds 5,000).
                raise serializers.ValidationError({"tasks": [too_many]})
            serializer = self.InputSerializer(data=data)
            if not serializer.is_valid():
                ref = data.get("queue") if isinstance(data, dict) else None
                raise serializers.ValidationError(
                    self._with_queue_error(request, ref, serializer.errors, field="queue")
                )
            job = self._submit(request, dict(serializer.validated_data), from_manifest=False)
        response = Response(
            # A job created in this very transaction has no placements yet.
            job_detail_data(job, user=request.user),
            status=status.HTTP_201_CREATED,
            headers={"Location": _job_url(job)},
        )
        if ignored:
            response[MANIFEST_IGNORED_HEADER] = ", ".join(f"spec.{key}" for key in ignored)
        return response

    @staticmethod
    def _with_queue_error(
        request: Request, ref: Any, errors: dict[str, Any], *, field: str
    ) -> dict[str, Any]:
        """`errors` plus the queue's under `field`, so one answer names every field at fault
        (an unknown queue is otherwise only reported once the rest of the body is valid)."""
        errors = dict(errors)
        if (
            field not in errors
            and isinstance(ref, str)
            and resolve_queue(user=request.user, ref=ref) is None
        ):
            errors[field] = [QUEUE_NOT_FOUND.format(ref=ref)]
        return errors

    def _submit(self, request: Request, data: dict[str, Any], *, from_manifest: bool) -> Job:
        queue_field = "spec.queue" if from_manifest else "queue"
        queue = resolve_queue(user=request.user, ref=data["queue"])
        if queue is None:
            raise serializers.ValidationError(
                {queue_field: [QUEUE_NOT_FOUND.format(ref=data["queue"])]}
            )
        try:
            job = job_submit(
                submitter=request.user,
                queue=queue,
                name=data["name"],
                tasks=[dict(task) for task in data["tasks"]],
                priority=data.get("priority") or 0,
                min_available=data.get("min_available"),
                expected_duration_seconds=data.get("expected_duration_seconds"),
                plugins=data.get("plugins"),
                policies=data.get("policies"),
                max_retry=data.get("max_retry"),
                ttl_seconds_after_finished=data.get("ttl_seconds_after_finished"),
                max_runtime_seconds=data.get("max_runtime_seconds"),
            )
        except DjangoValidationError as error:
            errors = django_validation_errors(error)
            if from_manifest:
                errors = {volcano.manifest_path(path): msgs for path, msgs in errors.items()}
            raise serializers.ValidationError(errors) from error
        # The response shows the job as stored without reading it back: its tenant, queue
        # and submitter are already in memory and job_submit hands over the stored tasks.
        return job


def _job_acted(request: Request, job_id: int, action: Callable[..., Job]) -> Response:
    """Run a job service as the user (`action(job=, actor=)`) and answer the job as it is now."""
    job = job_get(user=request.user, job_id=job_id)
    action(job=job, actor=request.user)
    job = job_get(user=request.user, job_id=job_id)
    placements = placement_list_active(job_id=job.pk)
    ended = placement_list_ended(job_id=job.pk)
    return Response(
        job_detail_data(job, user=request.user, placements=placements, ended_pods=ended)
    )


def _queue_tenant(request: Request, queue: str) -> str | None:
    """The tenant of `queue` if the caller may see it: where its jobs' objects go."""
    found = visible_queue_get(request.user, name=queue)
    return found.tenant.name if found is not None else None


class JobRenderApi(ApiView):
    """Dry run: every Kubernetes object the portal would create for a Volcano Job manifest
    (JSON or YAML), as `python -m portal.jobs.render` prints them; nothing is stored, the
    cluster is not asked. Errors name the manifest's fields (400)."""

    parser_classes = [LimitedJSONParser, *YAML_PARSERS]
    throttle_classes = [ApiScopedRateThrottle]
    throttle_scope = "job_create"

    class OutputSerializer(ApiSerializer):
        objects = serializers.ListField(
            child=serializers.DictField(),
            help_text="Secret, ConfigMap, Service and NetworkPolicy of the job's plugins, then its pods "
            "(no node yet; `new` stands for the job id the portal assigns on submit).",
        )
        warnings = serializers.ListField(child=serializers.CharField())

    @extend_schema(
        operation_id="jobs_render",
        tags=["jobs"],
        request={
            "application/yaml": OpenApiRequest(
                OpenApiTypes.STR, examples=[OpenApiExample("Volcano Job", value=VOLCANO_EXAMPLE)]
            ),
            "application/json": OpenApiTypes.OBJECT,
        },
        responses={200: OutputSerializer, **error_responses(400, 401, 413, 415, 429)},
    )
    def post(self, request: Request) -> Response:
        if not volcano.is_volcano_manifest(request.data):
            raise serializers.ValidationError({"body": [RENDER_NEEDS_MANIFEST]})
        rendered = job_render(request.data, tenant_of=lambda name: _queue_tenant(request, name))
        if rendered.errors:
            raise serializers.ValidationError(rendered.errors)
        return Response({"objects": rendered.objects, "warnings": rendered.warnings})


class JobCancelApi(ApiView):
    """Cancel a job that has not finished: its submitter, a lead of its tenant, or staff."""

    OutputSerializer = JobDetailApi.OutputSerializer

    @extend_schema(
        operation_id="jobs_cancel",
        tags=["jobs"],
        request=None,
        responses={200: OutputSerializer, **error_responses(400, 401, 403, 404)},
    )
    def post(self, request: Request, job_id: int) -> Response:
        return _job_acted(request, job_id, job_cancel)


class JobReleaseApi(ApiView):
    """Release a quarantined job back to pending (site admins): the scheduler stopped working
    on it when its data made a scheduling step fail; its reason says which and why."""

    OutputSerializer = JobDetailApi.OutputSerializer

    @extend_schema(
        operation_id="jobs_release",
        tags=["jobs"],
        request=None,
        responses={200: OutputSerializer, **error_responses(400, 401, 403, 404)},
    )
    def post(self, request: Request, job_id: int) -> Response:
        return _job_acted(request, job_id, job_quarantine_release)


class ClusterUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The cluster could not be asked."
    default_code = "cluster_unavailable"


LOG_TAIL_DEFAULT, LOG_TAIL_MAX = 200, 5000
RENDER_NEEDS_MANIFEST = f"the body must be a Volcano Job manifest ({volcano.API_VERSION})"
LOG_POD_NOT_OF_JOB = "pod {pod} is not a pod of this job"
LOG_NO_PODS = "this job has had no pod yet"


class JobLogsApi(ApiView):
    """A pod's log (the pods/log subresource on Kubernetes; on the simulated cluster, lines it
    writes itself) with how the pod ended: exit code and reason (OOMKilled, Error, Evicted).
    `pod` is one of the job's pods (default: its latest); `tail` the last lines (default 200)."""

    class FilterSerializer(StrictSerializer):
        pod = serializers.CharField(required=False, max_length=253)
        tail = serializers.IntegerField(
            required=False, min_value=1, max_value=LOG_TAIL_MAX, default=LOG_TAIL_DEFAULT
        )

    class OutputSerializer(ApiSerializer):
        pod = serializers.CharField()
        pods = serializers.ListField(child=serializers.CharField(), help_text="The job's pods.")
        phase = serializers.CharField(allow_null=True, help_text="None: the pod is gone.")
        exit_code = serializers.IntegerField(allow_null=True)
        reason = serializers.CharField(allow_null=True)
        lines = serializers.ListField(child=serializers.CharField())

    @extend_schema(
        operation_id="jobs_logs",
        tags=["jobs"],
        parameters=[FilterSerializer],
        responses={200: OutputSerializer, **error_responses(400, 401, 404, 503)},
    )
    def get(self, request: Request, job_id: int) -> Response:
        job = job_get(user=request.user, job_id=job_id)
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        pods = job_pod_names(job=job)
        pod = filters.validated_data.get("pod") or (pods[0] if pods else None)
        if pod is None:
            raise serializers.ValidationError({"pod": [LOG_NO_PODS]})
        if pod not in pods:
            raise serializers.ValidationError({"pod": [LOG_POD_NOT_OF_JOB.format(pod=pod)]})
        try:
            log = pod_log_read(pod_name=pod, tail=filters.validated_data["tail"])
        except LogUnavailable as error:
            raise ClusterUnavailable(str(error)) from error
        return Response(
            {
                "pod": pod,
                "pods": pods,
                "phase": log.phase,
                "exit_code": log.exit_code,
                "reason": log.reason,
                "lines": log.lines,
            }
        )


class JobWhyApi(ApiView):
    """Why a job is pending: the last cycle's reason and the jobs ahead of it in its queue's
    line as that cycle ordered it (the configured job order: priority, gang, drf ... as the
    scheduler conf says). Jobs you may not see are counted in `hidden_jobs_ahead` without being
    named."""

    class OutputSerializer(ApiSerializer):
        class AheadSerializer(ApiSerializer):
            id = serializers.IntegerField()
            name = serializers.CharField()
            tenant = serializers.CharField(source="tenant.name")
            priority = serializers.IntegerField()
            gpus = GpusField(source="gpus_asked")
            submitted_at = serializers.DateTimeField()

        id = serializers.IntegerField()
        name = serializers.CharField()
        queue = serializers.CharField()
        status = serializers.ChoiceField(choices=Job.Status.choices)
        state = serializers.CharField(
            help_text='The one state the job page shows, e.g. "Waiting (preempted 2 times, '
            'last by bert-large at 2025-01-01 11:59 UTC)".'
        )
        pending_reason = serializers.CharField()
        pending_kind = serializers.ChoiceField(
            choices=[("", "not waiting"), *Job.PendingKind.choices],
            help_text='"never": it can never run as submitted (the reason says what to change); '
            '"waits": it waits for other jobs or the cluster; empty when it is not waiting.',
        )
        pending_reason_at = serializers.DateTimeField(allow_null=True)
        position = serializers.IntegerField(
            allow_null=True,
            help_text="Where the last scheduling cycle put the job in its queue's line, by the "
            "configured job order (the order its reason counts in): 1 = next in line; null "
            "when the job does not wait, can never run as submitted, or no cycle has seen it "
            "yet.",
        )
        jobs_ahead = AheadSerializer(many=True)
        hidden_jobs_ahead = serializers.IntegerField()

    @extend_schema(
        operation_id="jobs_why",
        tags=["jobs"],
        responses={200: OutputSerializer, **error_responses(401, 404)},
        examples=[
            OpenApiExample(
                "Third in line",
                response_only=True,
                value={
                    "id": 9,
                    "name": "resnet-sweep",
                    "queue": "nlp-train",
                    "status": "pending",
                    "state": "Waiting",
                    "pending_reason": "waiting behind 2 higher-priority jobs in queue nlp-train",
                    "pending_kind": "waits",
                    "pending_reason_at": "2025-01-01T12:00:05Z",
                    "position": 3,
                    "jobs_ahead": [
                        {
                            "id": 7,
                            "name": "bert-large",
                            "tenant": "nlp",
                            "priority": 10,
                            "gpus": 16,
                            "submitted_at": "2025-01-01T11:58:00Z",
                        }
                    ],
                    "hidden_jobs_ahead": 1,
                },
            )
        ],
    )
    def get(self, request: Request, job_id: int) -> Response:
        job = job_get(user=request.user, job_id=job_id)
        state = job_state(user=request.user, job=job)
        line = job_queue_position(user=request.user, job=job)
        data = {
            "id": job.pk,
            "name": job.name,
            "queue": job.queue.name,
            "status": job.status,
            "state": state.headline,
            "pending_reason": job.pending_reason,
            "pending_kind": job.pending_kind if state.waiting else "",
            "pending_reason_at": job.pending_reason_at,
            "position": line.position if line else None,
            "jobs_ahead": line.ahead if line else [],
            "hidden_jobs_ahead": line.hidden if line else 0,
        }
        return Response(self.OutputSerializer(data).data)

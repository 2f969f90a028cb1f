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

from jobspec import volcano
from jobspec.gpushare import gpus_decimal
from jobspec.limits import gpus_number_error
from jobspec.tenancy import TenantPolicy
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
from portal.api.parsers import YAML_PARSERS, LimitedJSONParser, YAMLDocuments
from portal.api.throttling import ApiScopedRateThrottle
from portal.cluster.selectors import placement_list_active, placement_list_ended
from portal.common import units
from portal.common.ids import parse_id
from portal.jobs.limits import task_count_check
from portal.jobs.policy import job_policy
from portal.queues.access import visible_queue_get
from portal.queues.selectors import QUEUE_NOT_FOUND, queue_default, queue_lookup
from portal.scheduling.facade import LogUnavailable, pod_log_read
from portal.tenants.access import visible_tenants

from .access import can_cancel_job
from .dry_run import job_render
from .models import TASK_DEFAULT_CPU_MILLIS, TASK_DEFAULT_MEMORY_BYTES, Job
from .presentation import estimate_data, job_detail_data, job_url, notice_data
from .selectors import (
    job_get,
    job_gpu_asks,
    job_pod_names,
    job_pod_notice,
    job_queue_position,
    job_search,
    job_state,
    queue_position_text,
)
from .services import job_cancel, job_quarantine_release, job_submit, job_submit_manifest

TENANT_NOT_FOUND = "no tenant {ref} that you can see"
NO_JOB_IN_DOCUMENTS = "none of the {count} documents is a Volcano Job ({skipped})"
SEVERAL_JOBS = (
    "documents {numbers} are {count} Volcano Jobs: the API takes one per request (the upload "
    "page takes a file of several)"
)
YAML_NEEDS_MANIFEST = f"a YAML body must be a Volcano Job manifest ({volcano.API_VERSION})"
MANIFEST_IGNORED_HEADER = "X-Manifest-Ignored-Fields"


@extend_schema_field(OpenApiTypes.NUMBER)
class GpusField(serializers.Field):
    """GPUs per pod: a whole number (2), or a fraction of one GPU (0.25) with at most three
    decimals. Shape and sign here; what a pod may ask for is `job_submit`'s to say."""

    default_error_messages = {
        "invalid": "A number of GPUs is required: whole (2) or a fraction of one GPU (0.25).",
    }

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool):
            self.fail("invalid")
        if isinstance(data, int):
            if data < 0:
                self._negative(data)
            return data
        if not isinstance(data, float | str) or (isinstance(data, str) and len(data) > 64):
            self.fail("invalid")
        number = gpus_decimal(data)
        if number is None:
            self.fail("invalid")
        if number < 0:
            self._negative(number)
        return number

    def _negative(self, number: Any) -> None:
        """The form's words for it (jobspec.limits), not DRF's "greater than or equal to 0"."""
        raise serializers.ValidationError(gpus_number_error(number), code="negative")

    def to_representation(self, value: Any) -> Any:
        return value


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
            source="gpu_ask.number",
            help_text="GPUs the job asks for in all (0.25: a quarter card), as the scheduler "
            "counts them before placement: GPU memory as its share of the smallest GPU",
        )
        gpu_memory_mib = serializers.IntegerField(
            source="gpu_ask.memory_mib", help_text="GPU memory its pods ask for in all, MiB"
        )
        gpu_request = serializers.CharField(
            source="gpu_ask.text",
            help_text='The two in words, as the pages show them: "4", or "0.25 (10 GiB GPU '
            'memory)"',
        )
        submitted_at = serializers.DateTimeField()
        pending_reason = serializers.CharField()
        url = serializers.SerializerMethodField()

        def get_url(self, job: Job) -> str:
            return job_url(job)

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
                            "gpu_memory_mib": 0,
                            "gpu_request": "32",
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
            queue = queue_lookup(user=request.user, ref=data["queue"])
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
        page = job_gpu_asks(paginator.paginate_queryset(jobs, request, view=self) or [])
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
            gpu_request = serializers.CharField(
                source="gpu_ask.text",
                help_text='Per pod, in words: "2", or "0.25 (10 GiB GPU memory)"',
            )
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
            notice_deadline = serializers.DateTimeField(
                allow_null=True,
                help_text="When the pod is deleted, if it was told (a preemption with notice "
                "or the run-time limit's end); null otherwise. The pod reads the same instant "
                "in /etc/podinfo/preemption-deadline.",
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
        estimated_start = serializers.SerializerMethodField(
            help_text="While the job waits: the likely start of the last plan ahead (null when "
            "only a range can be said, or none was made)."
        )
        estimated_start_range = serializers.SerializerMethodField(
            help_text='While the job waits: outlook "starts" (between earliest and latest; '
            'latest null: not bounded within the horizon), "later" (not before until) or '
            '"never"; the time it was computed and the text the job page shows. Null when '
            "the job does not wait or no plan has seen it yet."
        )
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

        @extend_schema_field(serializers.DateTimeField(allow_null=True))
        def get_estimated_start(self, job: Job) -> str | None:
            return estimate_data(job)["estimated_start"]

        @extend_schema_field(
            inline_serializer(
                name="JobEstimatedStartRange",
                fields={
                    "outlook": serializers.ChoiceField(choices=["starts", "later", "never"]),
                    "earliest": serializers.DateTimeField(allow_null=True),
                    "latest": serializers.DateTimeField(allow_null=True),
                    "until": serializers.DateTimeField(),
                    "computed_at": serializers.DateTimeField(),
                    "text": serializers.CharField(),
                },
                allow_null=True,
            )
        )
        def get_estimated_start_range(self, job: Job) -> dict[str, Any] | None:
            return estimate_data(job)["estimated_start_range"]

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
                "self": job_url(job),
                "cancel": job_url(job, "cancel"),
                "why": job_url(job, "why"),
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
    # against jobspec.limits, the same for the form, the upload page and the CLI.
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
            help_text="Lifecycle policies: {event|events|exitCode, action[, timeout]}; events "
            "PodFailed, PodEvicted, TaskCompleted, OutOfSync, *; actions RestartJob, "
            "RestartTask, RestartPod, AbortJob, CompleteJob, TerminateJob; timeout a Go "
            "duration (10m) that delays the action.",
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
            help_text="Volcano job plugins and their flags: svc, env, pytorch, tensorflow, ssh, "
            'mpi, ray (e.g. {"pytorch": ["--master=master", "--port=23456"]}).',
        )

    class OutputSerializer(JobDetailApi.OutputSerializer):
        warnings = serializers.ListField(
            child=serializers.CharField(),
            help_text="How a Volcano manifest was read: the default queue it went to, its "
            "generated name, fields read with a default or ignored, documents of other kinds "
            "skipped. Empty for a JSON job.",
        )

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
        data, warnings = _one_manifest(request.data)
        ignored: list[str] = []
        if volcano.is_volcano_manifest(data):
            try:
                submitted = job_submit_manifest(submitter=request.user, manifest=data)
            except DjangoValidationError as error:
                raise serializers.ValidationError(django_validation_errors(error)) from error
            job, ignored = submitted.job, submitted.ignored
            warnings += submitted.warnings
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
                    self._with_queue_error(request, ref, serializer.errors)
                )
            job = self._submit(request, dict(serializer.validated_data))
        # A job created in this very transaction has no placements yet.
        body = {**job_detail_data(job, user=request.user), "warnings": warnings}
        response = Response(
            body, status=status.HTTP_201_CREATED, headers={"Location": job_url(job)}
        )
        if ignored:
            response[MANIFEST_IGNORED_HEADER] = ", ".join(ignored)
        return response

    @staticmethod
    def _with_queue_error(request: Request, ref: Any, errors: dict[str, Any]) -> dict[str, Any]:
        """`errors` plus the queue's, so one answer names every field at fault (an unknown
        queue is otherwise only reported once the rest of the body is valid)."""
        errors = dict(errors)
        unknown = isinstance(ref, str) and queue_lookup(user=request.user, ref=ref) is None
        if unknown and "queue" not in errors:
            errors["queue"] = [QUEUE_NOT_FOUND.format(ref=ref)]
        return errors

    def _submit(self, request: Request, data: dict[str, Any]) -> Job:
        queue = queue_lookup(user=request.user, ref=data["queue"])
        if queue is None:
            raise serializers.ValidationError(
                {"queue": [QUEUE_NOT_FOUND.format(ref=data["queue"])]}
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
            raise serializers.ValidationError(django_validation_errors(error)) from error
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


def _one_manifest(data: Any) -> tuple[Any, list[str]]:
    """A body of several YAML documents holds one Volcano Job, taken with a sentence for each
    other document skipped (a PriorityClass beside the Job, say); one document is itself."""
    if not isinstance(data, YAMLDocuments):
        return data, []
    split = volcano.documents_split(data)
    if len(split.jobs) == 1:
        return split.jobs[0][1], list(split.skipped)
    if not split.jobs:
        message = NO_JOB_IN_DOCUMENTS.format(count=split.count, skipped="; ".join(split.skipped))
    else:
        numbers = ", ".join(str(number) for number, _ in split.jobs)
        message = SEVERAL_JOBS.format(numbers=numbers, count=len(split.jobs))
    raise serializers.ValidationError({"body": [message]})


def _queue_tenant(request: Request, queue: str) -> str | None:
    """The tenant of `queue` if the caller may see it: where its jobs' objects go."""
    found = visible_queue_get(request.user, name=queue)
    return found.tenant.name if found is not None else None


def _queue_policy(request: Request, queue: str) -> TenantPolicy | None:
    """What jobs of `queue` may do on the cluster, if the caller may see it."""
    found = visible_queue_get(request.user, name=queue)
    return job_policy(tenant=found.tenant, queue=found) if found is not None else None


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
        data, skipped = _one_manifest(request.data)
        if not volcano.is_volcano_manifest(data):
            raise serializers.ValidationError({"body": [RENDER_NEEDS_MANIFEST]})
        spec = data.get("spec")
        default = None
        if not (isinstance(spec, dict) and spec.get("queue")):
            default = queue_default(user=request.user)
        rendered = job_render(
            data,
            tenant_of=lambda name: _queue_tenant(request, name),
            policy_of=lambda name: _queue_policy(request, name),
            default_queue=default,
        )
        if rendered.errors:
            raise serializers.ValidationError(rendered.errors)
        return Response({"objects": rendered.objects, "warnings": [*skipped, *rendered.warnings]})


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
            gpus = GpusField(source="gpu_ask.number")
            gpu_request = serializers.CharField(source="gpu_ask.text")
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
        position_text = serializers.CharField(
            help_text='The position in words, as the job page says it: "position 3 in queue '
            'nlp-train: 2 jobs ahead" ("" with no position).'
        )
        jobs_ahead = AheadSerializer(many=True)
        hidden_jobs_ahead = serializers.IntegerField()
        estimated_start = serializers.DateTimeField(
            allow_null=True, help_text="As in the job's detail: the likely start, or null."
        )
        estimated_start_range = serializers.DictField(
            allow_null=True,
            help_text="As in the job's detail: outlook, earliest, latest, until, computed_at, "
            "text.",
        )
        notice = serializers.DictField(
            allow_null=True,
            help_text="Its live pods told they are deleted at a deadline: deadline, given_at, "
            'pods, cause ("preempted" or "runtime-limit") and text; null without one.',
        )

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
                    "position_text": "position 3 in queue nlp-train: 2 jobs ahead",
                    "jobs_ahead": [
                        {
                            "id": 7,
                            "name": "bert-large",
                            "tenant": "nlp",
                            "priority": 10,
                            "gpus": 16,
                            "gpu_request": "16",
                            "submitted_at": "2025-01-01T11:58:00Z",
                        }
                    ],
                    "hidden_jobs_ahead": 1,
                    "estimated_start": "2025-01-01T14:40:00Z",
                    "estimated_start_range": {
                        "outlook": "starts",
                        "earliest": "2025-01-01T14:10:00Z",
                        "latest": "2025-01-01T15:30:00Z",
                        "until": "2025-01-08T12:00:00Z",
                        "computed_at": "2025-01-01T12:00:00Z",
                        "text": "likely to start 14:10-15:30 UTC",
                    },
                    "notice": None,
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
            "position_text": (
                queue_position_text(position=line.position, queue=job.queue.name) if line else ""
            ),
            "jobs_ahead": line.ahead if line else [],
            "hidden_jobs_ahead": line.hidden if line else 0,
            **estimate_data(job),
            "notice": notice_data(job_pod_notice(job=job)),
        }
        return Response(self.OutputSerializer(data).data)

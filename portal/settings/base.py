"""Settings shared by every environment.

Everything that differs between machines is read from the environment (see README,
"Configuration"); the defaults give the embedded setup: SQLite, a filesystem Celery
broker and the simulated cluster, so a laptop needs no servers.
"""

from pathlib import Path

import environ

from portal.ops.logs import logging_config

env = environ.Env()

BASE_DIR = Path(__file__).resolve().parent.parent.parent
# SQLite file, filesystem broker and beat schedule of the embedded default.
VAR_DIR = Path(env.str("PORTAL_VAR_DIR", default=str(BASE_DIR / "var")))

# GENERAL
# ------------------------------------------------------------------------------
# https://docs.djangoproject.com/en/5.2/ref/settings/#debug
DEBUG = env.bool("DJANGO_DEBUG", default=False)
# https://docs.djangoproject.com/en/5.2/ref/settings/#secret-key
SECRET_KEY = env.str("SECRET_KEY", default="")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
TIME_ZONE = "UTC"
USE_TZ = True
LANGUAGE_CODE = "en-us"
USE_I18N = False
ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# DATABASES
# ------------------------------------------------------------------------------
# https://django-environ.readthedocs.io/en/latest/types.html#environ-env-db-url
DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'portal.sqlite3'}")
}
DATABASES["default"]["ATOMIC_REQUESTS"] = True
if DATABASES["default"]["ENGINE"].endswith("postgresql"):
    # JIT compilation cost ~430 ms on the dashboard's usage aggregation and never paid back
    # on these short queries (measured with portal.dashboards.bench).
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("options", "-c jit=off")
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # WAL lets the web process read while a worker writes; the timeout rides out
    # the short write locks of the scheduling cycle instead of failing a request.
    # Immediate transactions take the write lock when they begin, where that timeout
    # applies: a deferred one that read first and then writes (a login) is refused at once,
    # "database is locked", when a cycle wrote in between (Django 5.1+ transaction_mode).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL;",
            "transaction_mode": "IMMEDIATE",
        }
    )
    # "SQLite does not support indexes with non-key columns", printed by every command: the
    # usage samples' covering index is for PostgreSQL, and SQLite keeps its key columns.
    SILENCED_SYSTEM_CHECKS = ["models.W040"]

# APPS
# ------------------------------------------------------------------------------
DJANGO_APPS = [
    # Before staticfiles: its runserver (the development server without Nagle's delay) is
    # the one manage.py finds.
    "portal.devserver",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
]
THIRD_PARTY_APPS = [
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
]
LOCAL_APPS = [
    "portal.common",
    "portal.tenants",
    "portal.queues",
    "portal.jobs",
    "portal.cluster",
    "portal.scheduling",
    "portal.api",
    "portal.ops",
    "portal.accounting",
    # The scheduler's shell: its Celery tasks, and the calls the portal's facade makes of it.
    "scheduler",
]
INSTALLED_APPS = DJANGO_APPS + THIRD_PARTY_APPS + LOCAL_APPS

# AUTHENTICATION
# ------------------------------------------------------------------------------
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Failed logins per username and client address before the login page answers 429 for
# the rest of the window (portal/common/login_throttle.py; counts live in the cache).
LOGIN_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=5)
LOGIN_FAILURE_WINDOW_SECONDS = env.int("LOGIN_FAILURE_WINDOW_SECONDS", default=15 * 60)
# The trusted proxy, named one of two ways (portal/common/client_address.py): the META key
# of a header it sets to the client address (e.g. HTTP_X_REAL_IP), or how many proxies
# append to X-Forwarded-For. Neither: the socket's address. Every throttle counts by it.
LOGIN_CLIENT_ADDRESS_HEADER = env.str("LOGIN_CLIENT_ADDRESS_HEADER", default="")
NUM_PROXIES = env.int("NUM_PROXIES", default=None)

# MIDDLEWARE
# ------------------------------------------------------------------------------
MIDDLEWARE = [
    # /healthz, /readyz, /metrics: answered before host checks, redirects and sessions.
    "portal.ops.endpoints.OpsEndpointsMiddleware",
    "portal.ops.metrics.RequestMetricsMiddleware",
    "portal.ops.requestid.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Outside sessions and auth: it sees the signed-in user of every answer.
    "portal.common.middleware.SecurityHeadersMiddleware",
    "portal.api.errors.ApiJsonErrorsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "portal.api.middleware.ApiTokenUseMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

# Content-Security-Policy and Permissions-Policy headers (portal/settings/headers.py);
# empty sends none. production.py and local.py set the strict ones.
CONTENT_SECURITY_POLICY = ""
PERMISSIONS_POLICY = ""

# STATIC
# ------------------------------------------------------------------------------
STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    # vendor/plotly.min.js from the plotly package (portal/dashboards/staticfiles.py)
    "portal.dashboards.staticfiles.PlotlyFinder",
]
STATIC_ROOT = env.str("STATIC_ROOT", default=str(VAR_DIR / "staticfiles"))

# TEMPLATES
# ------------------------------------------------------------------------------
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.context_processors.roles",
            ],
        },
    }
]

# LOGGING
# ------------------------------------------------------------------------------
# One console handler; LOG_FORMAT=json writes one JSON object per line (portal/ops/logs.py).
LOGGING = logging_config(
    log_format=env.str("LOG_FORMAT", default="plain"), level=env.str("LOG_LEVEL", default="INFO")
)

# CLUSTER AND SCHEDULER
# ------------------------------------------------------------------------------
# simulated: nodes from SIMULATED_CLUSTER_FILE, pods "run" for their expected duration.
# kubernetes: the official client, from KUBECONFIG or the in-cluster service account.
CLUSTER_BACKEND = env.str("CLUSTER_BACKEND", default="simulated")
SIMULATED_CLUSTER_FILE = env.str(
    "SIMULATED_CLUSTER_FILE", default=str(BASE_DIR / "portal" / "cluster" / "demo_cluster.yaml")
)
# Extended resource names that count as GPUs; quotas count any of them.
GPU_RESOURCE_NAMES = env.list("GPU_RESOURCE_NAMES", default=["nvidia.com/gpu", "mars-tech.com/gpu"])
# The GPU sharing stack the cluster runs, which fractional GPU requests (0.25 GPU, 10 GiB of
# GPU memory) need: none (whole GPUs only: fractional jobs are refused at submit), volcano
# (Volcano's deviceshare vGPU: volcano.sh/vgpu-* resources and annotations) or hami (HAMi:
# nvidia.com/gpumem, gpucores; devices from its hami.io/node-nvidia-register annotation).
# The simulated cluster emulates devices, so the embedded default shares them.
GPU_SHARING = env.str(
    "GPU_SHARING", default="volcano" if CLUSTER_BACKEND == "simulated" else "none"
)
KUBERNETES_NAMESPACE = env.str("KUBERNETES_NAMESPACE", default="gpu-jobs")
# On: each tenant's jobs live in a namespace of its own, <prefix><tenant name> (a cluster admin
# creates it: portal/cluster/namespaces.py, deploy/README-kubernetes.md); off: all in
# KUBERNETES_NAMESPACE. Jobs already running stay where they started when this changes.
KUBERNETES_NAMESPACE_PER_TENANT = env.bool("KUBERNETES_NAMESPACE_PER_TENANT", default=False)
KUBERNETES_NAMESPACE_PREFIX = env.str("KUBERNETES_NAMESPACE_PREFIX", default="gpu-")
# Nodes and pods come from a list+watch cache kept by the cycle worker between cycles; off, every
# cycle lists them all again.
KUBERNETES_WATCH_CACHE = env.bool("KUBERNETES_WATCH_CACHE", default=True)
# The portal's pods carry this spec.schedulerName, so kube-scheduler leaves them alone; the
# portal binds them itself (pods/binding) once a gang's pods all exist.
KUBERNETES_SCHEDULER_NAME = env.str("KUBERNETES_SCHEDULER_NAME", default="gpuportal")
# The label gpuportal.io/instance on every object this portal creates: it deletes only objects
# of its own instance. Give each portal sharing a cluster its own.
KUBERNETES_INSTANCE = env.str("KUBERNETES_INSTANCE", default="gpuportal")
# A bound pod that has not started after this long (an image that never pulls, a node that
# never runs it) gives its placement back, and the job waits for its turn again.
# How many of a reconcile pass's writes (pod creates, binds, deletes) are in flight at once;
# 1 sends them one at a time. A job's own pods are always created in order.
KUBERNETES_WRITE_CONCURRENCY = env.int("KUBERNETES_WRITE_CONCURRENCY", default=8)
KUBERNETES_POD_START_TIMEOUT_SECONDS = env.int("KUBERNETES_POD_START_TIMEOUT_SECONDS", default=600)
# A job whose pods failed to start waits this long before it is placed again, doubling with
# each failure up to the maximum; a node whose kubelet refused its pod is avoided by the job as
# long (portal/jobs/backoff.py).
START_BACKOFF_BASE_SECONDS = env.float("START_BACKOFF_BASE_SECONDS", default=10.0)
START_BACKOFF_MAX_SECONDS = env.float("START_BACKOFF_MAX_SECONDS", default=300.0)
# How long a bound pod may wait on an image it cannot pull or a container it cannot create (a
# missing Secret) before its job gives the GPUs back and backs off; a registry's hiccup clears
# within it.
START_BLOCKED_GRACE_SECONDS = env.int("START_BLOCKED_GRACE_SECONDS", default=60)
SCHEDULER_CYCLE_SECONDS = env.float("SCHEDULER_CYCLE_SECONDS", default=5.0)
# Expiry of the cluster-wide cycle lock; the holder renews it every third of this, so a
# killed worker blocks scheduling for at most this long (scheduler/adapters/lock.py).
SCHEDULER_LOCK_TTL_SECONDS = env.float("SCHEDULER_LOCK_TTL_SECONDS", default=30.0)
# The cycle lock's name (Redis key gpuportal:<name>, or var/<name>.lock on the embedded
# default): portals that share one Redis need names of their own.
SCHEDULER_LOCK_NAME = env.str("SCHEDULER_LOCK_NAME", default="scheduler-cycle")
# Default for a job without expected_duration on the simulated cluster.
SIMULATED_DEFAULT_RUN_SECONDS = env.int("SIMULATED_DEFAULT_RUN_SECONDS", default=600)
EVICTION_GRACE_SECONDS = env.int("EVICTION_GRACE_SECONDS", default=30)
# How long a finished job pod stays on the cluster after it ended, so its log can still be read
# (the job page, GET /api/v1/jobs/{id}/logs/, `kubectl logs`); 0 deletes it at once.
FINISHED_POD_RETENTION_SECONDS = env.int("FINISHED_POD_RETENTION_SECONDS", default=3600)
# Plan ahead (scheduler/adapters/plan_ahead.py, docs/design/plan-ahead.md): every this many
# seconds a task on queue `plan` estimates each pending job's start by running the scheduler
# forward on a copy of the cycle's snapshot, up to the horizon; the instants bound its cost
# (the core runs at most 1 + 3 x that many times per plan).
PLAN_AHEAD_SECONDS = env.float("PLAN_AHEAD_SECONDS", default=60.0)
PLAN_AHEAD_HORIZON_SECONDS = env.float("PLAN_AHEAD_HORIZON_SECONDS", default=7 * 86400.0)
PLAN_AHEAD_MAX_INSTANTS = env.int("PLAN_AHEAD_MAX_INSTANTS", default=14)
# Dashboards read one usage sample per queue per this many seconds.
USAGE_SAMPLE_SECONDS = env.int("USAGE_SAMPLE_SECONDS", default=60)

# OPERATIONS (docs/operations.md)
# ------------------------------------------------------------------------------
# /metrics: with a token, only `Authorization: Bearer <token>`; without one, open where
# METRICS_OPEN is true (the embedded default) and absent (404) elsewhere.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
METRICS_OPEN = env.bool("METRICS_OPEN", default=False)
# /readyz?check=cycle fails when no scheduling cycle finished for this long.
CYCLE_MAX_AGE_SECONDS = env.float("CYCLE_MAX_AGE_SECONDS", default=120.0)
# A worker's own exporter (/metrics, /healthz) on this port; 0: none (portal/ops/worker.py).
WORKER_METRICS_PORT = env.int("WORKER_METRICS_PORT", default=0)
WORKER_METRICS_ADDRESS = env.str("WORKER_METRICS_ADDRESS", default="0.0.0.0")  # noqa: S104 - the pod network; the setting narrows it
# The cycle worker's /healthz fails after this long without finishing a cycle task; 0: off.
WORKER_HEALTH_CYCLE_SECONDS = env.float("WORKER_HEALTH_CYCLE_SECONDS", default=0.0)
# Retention (portal/ops/retention.py): per-minute usage samples older than this many days are
# rolled up (hour and day rollups, kept) and deleted, by whole UTC days; preemption events and
# cycle records after their own ages. 0 keeps that table forever.
USAGE_SAMPLE_RETENTION_DAYS = env.int("USAGE_SAMPLE_RETENTION_DAYS", default=35)
PREEMPTION_EVENT_RETENTION_DAYS = env.int("PREEMPTION_EVENT_RETENTION_DAYS", default=400)
CYCLE_RUN_RETENTION_DAYS = env.int("CYCLE_RUN_RETENTION_DAYS", default=14)
RETENTION_INTERVAL_SECONDS = env.float("RETENTION_INTERVAL_SECONDS", default=3600.0)

# CELERY
# ------------------------------------------------------------------------------
# https://docs.celeryq.dev/en/stable/userguide/configuration.html
# With no Redis configured, a filesystem broker needs no server (embedded default).
REDIS_URL = env.str("REDIS_URL", default="")
# "localhost" names no server (the transport reads folders); without it kombu warns "No
# hostname was supplied" on every connection.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL or "filesystem://localhost/")
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {
        "data_folder_in": str(VAR_DIR / "broker"),
        "data_folder_out": str(VAR_DIR / "broker"),
        "processed_folder": str(VAR_DIR / "broker-processed"),
        "control_folder": str(VAR_DIR / "broker-control"),
        "store_processed": False,
    }
    if CELERY_BROKER_URL.startswith("filesystem")
    else {}
)
if CELERY_BROKER_URL.startswith("filesystem"):
    for _folder in CELERY_BROKER_TRANSPORT_OPTIONS.values():
        if isinstance(_folder, str):
            Path(_folder).mkdir(parents=True, exist_ok=True)
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_TASK_TIME_LIMIT = 5 * 60
CELERY_TASK_SOFT_TIME_LIMIT = 4 * 60
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_TASK_ALWAYS_EAGER = False
# Workers log through Django's LOGGING (the same format, JSON included), not Celery's own.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# The cycle runs on its own queue, consumed by one single-process worker (--pool solo -Q cycle,
# or -Q celery,cycle when one worker does everything): that process keeps the cluster's watch
# cache between cycles, which prefork children would each hold and each refill.
# Plan ahead runs on queue `plan`, in a worker of its own, so a plan never delays a cycle.
CELERY_TASK_ROUTES = {
    "scheduler.tasks.scheduling_cycle_run": {"queue": "cycle"},
    "scheduler.tasks.plan_ahead_run": {"queue": "plan"},
}
CELERY_BEAT_SCHEDULE = {
    "scheduling-cycle": {
        "task": "scheduler.tasks.scheduling_cycle_run",
        "schedule": SCHEDULER_CYCLE_SECONDS,
        # A cycle that could not start in time is superseded by the next one.
        "options": {"expires": SCHEDULER_CYCLE_SECONDS},
    },
    "retention": {
        "task": "portal.ops.tasks.retention_run",
        "schedule": RETENTION_INTERVAL_SECONDS,
        "options": {"expires": RETENTION_INTERVAL_SECONDS},
    },
    "plan-ahead": {
        "task": "scheduler.tasks.plan_ahead_run",
        "schedule": PLAN_AHEAD_SECONDS,
        # A plan that could not start in time is superseded by the next one.
        "options": {"expires": PLAN_AHEAD_SECONDS},
    },
}

# REST FRAMEWORK
# ------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "portal.api.authentication.ApiTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    # Only DRF's own get_ident() reads it; the portal's throttles call client_address().
    "NUM_PROXIES": NUM_PROXIES,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU quota portal API",
    "VERSION": "1",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Integrations (each file holds only its own additions).
from .api import *  # noqa: E402,F403
from .limits import *  # noqa: E402,F403

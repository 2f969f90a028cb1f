"""Test settings: fast hashing, Celery tasks run inline unless a test starts a worker."""

import os

from .base import *  # noqa: F403
from .base import DATABASES, SCHEDULER_LOCK_NAME, VAR_DIR, env

SECRET_KEY = "test-only-not-a-secret"  # noqa: S105 - the test settings' own key
DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=True)
CELERY_TASK_EAGER_PROPAGATES = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Serve static files from the finders, so tests need no collectstatic run.
WHITENOISE_AUTOREFRESH = True
WHITENOISE_USE_FINDERS = True
# /metrics without a token (production needs METRICS_TOKEN, see docs/operations.md).
METRICS_OPEN = env.bool("METRICS_OPEN", default=True)

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file, not memory: end-to-end tests start a real Celery worker that must see the data.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-portal.sqlite3")}

# Each xdist worker has databases of its own, so its cycles get a lock of their own too:
# otherwise one worker's cycle makes the other's skip (the workers share var/ and Redis).
if _worker := os.environ.get("PYTEST_XDIST_WORKER"):
    SCHEDULER_LOCK_NAME = f"{SCHEDULER_LOCK_NAME}-{_worker}"

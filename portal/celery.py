"""Celery application: the scheduling cycle runs here, on beat and after each submit/cancel."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.local")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(lambda: ["scheduler"], related_name="tasks")
app.autodiscover_tasks()

# Worker metrics exporter and probe, task metrics, request ids in task logs (signal handlers).
import portal.ops.worker  # noqa: E402,F401

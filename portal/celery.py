"""Celery application: the scheduling cycle runs here, on beat and after each submit/cancel."""

import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.local")

# filesystem:// (the embedded default's broker) means kombu's filesystem transport with each
# message written whole before a worker can see it (portal.ops.broker). Named by the URL's
# scheme, not by broker_transport, so whatever sets the broker's URL also sets its transport.
TRANSPORT_ALIASES["filesystem"] = "portal.ops.broker:FilesystemTransport"

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Worker metrics exporter and probe, task metrics, request ids in task logs (signal handlers).
import portal.ops.worker  # noqa: E402,F401

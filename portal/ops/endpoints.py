"""/healthz, /readyz and /metrics, answered by the first middleware in the chain.

Kubelet probes and Prometheus scrape a pod by its IP over plain HTTP. Further down the chain
the Host header (an IP, not in ALLOWED_HOSTS) would be refused, production's HTTPS redirect
would answer 301, and sessions, CSRF and throttles have nothing to say about a probe. So these
three paths are answered here, before any of that runs, and never touch a session.
"""

from __future__ import annotations

import hmac
import json

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from . import health
from .metrics import CONTENT_TYPE, web_exposition

HEALTHZ = "/healthz"
READYZ = "/readyz"
METRICS = "/metrics"
NO_STORE = "no-store"


class OpsEndpointsMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response
        self.routes = {HEALTHZ: healthz, READYZ: readyz, METRICS: metrics}

    def __call__(self, request: HttpRequest) -> HttpResponse:
        view = self.routes.get(request.path_info)
        if view is None:
            return self.get_response(request)
        if request.method not in ("GET", "HEAD"):
            response = HttpResponse(status=405)
            response["Allow"] = "GET, HEAD"
        else:
            response = view(request)
        response["Cache-Control"] = NO_STORE
        return response


def _json(payload: dict, status: int) -> HttpResponse:
    return HttpResponse(json.dumps(payload), status=status, content_type="application/json")


def healthz(request: HttpRequest) -> HttpResponse:
    """The process answers: nothing else is asked, so a database outage never gets the web
    pods restarted (liveness), it only takes them out of the load balancer (readiness)."""
    return _json({"status": "ok"}, 200)


def readyz(request: HttpRequest) -> HttpResponse:
    checks = {"database": health.database_check(), "broker": health.broker_check()}
    if "cycle" in request.GET.getlist("check"):
        checks["cycle"] = health.cycle_check(now=timezone.now())
    failed = {name: reason for name, reason in checks.items() if reason is not None}
    payload: dict = {
        "status": "unavailable" if failed else "ok",
        "checks": {name: reason or "ok" for name, reason in checks.items()},
    }
    if "config" in request.GET.getlist("check"):
        # Warnings: the web serves its pages all the same.
        payload["warnings"] = {"config": health.config_warnings()}
    return _json(payload, 503 if failed else 200)


def metrics(request: HttpRequest) -> HttpResponse:
    denied = _metrics_denied(request)
    if denied is not None:
        return denied
    return HttpResponse(web_exposition(), content_type=CONTENT_TYPE)


def _metrics_denied(request: HttpRequest) -> HttpResponse | None:
    """METRICS_TOKEN set: a matching bearer token is required. Unset: the endpoint is open only
    where METRICS_OPEN says so (the embedded default), and absent elsewhere."""
    token = settings.METRICS_TOKEN
    if not token:
        return None if settings.METRICS_OPEN else HttpResponse(status=404)
    scheme, _, given = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
        return None
    response = HttpResponse("metrics need a bearer token\n", status=401, content_type="text/plain")
    response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response

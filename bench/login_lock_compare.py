"""Compare the portal's login lock with django-axes on the same attacks, and what each costs.

    .venv/bin/python -m bench.login_lock_compare --impl portal
    pip install --target /tmp/axes-try django-axes   # axes is not a dependency of the portal
    PYTHONPATH=/tmp/axes-try .venv/bin/python -m bench.login_lock_compare --impl axes
    PYTHONPATH=/tmp/axes-try .venv/bin/python -m bench.login_lock_compare --impl axes-defaults

Both run on the test settings (SQLite in a temporary folder, local-memory cache), limit 5
failures per (username, address) in 15 minutes, the same username normalisation and client
address function (portal.common.login_throttle.username_key, client_address). `portal` is the
code as shipped: its login page and token endpoint. `axes` is Django's plain LoginView and a
token endpoint that only calls authenticate(), with axes' backend, middleware and database
handler; `axes-defaults` the same with axes' own username and address (django-ipware).
Prints one JSON object: the outcome of each attack (status of the right password
after the lock) and queries / milliseconds per attempt.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import types
from datetime import timedelta
from pathlib import Path

LIMIT = 5
PASSWORD = "correct-horse-battery-staple"


def axes_username(request, credentials):
    from portal.common.login_throttle import username_key

    return username_key((credentials or {}).get("username", "") or "")


def configure(impl: str, folder: str) -> None:
    import importlib

    from django.conf import settings

    os.environ["PORTAL_VAR_DIR"] = folder
    base = importlib.import_module("portal.settings.test")
    values = {name: getattr(base, name) for name in dir(base) if name.isupper()}
    values["DATABASES"]["default"]["NAME"] = str(Path(folder) / "compare.sqlite3")
    values["LOGIN_FAILURE_LIMIT"] = LIMIT
    values["LOGIN_FAILURE_WINDOW_SECONDS"] = 15 * 60
    values["API_THROTTLE_RATES"] = {"token_create": None, "job_create": None}
    values["ALLOWED_HOSTS"] = ["testserver"]
    if impl.startswith("axes"):
        values["INSTALLED_APPS"] = [*values["INSTALLED_APPS"], "axes"]
        values["MIDDLEWARE"] = [*values["MIDDLEWARE"], "axes.middleware.AxesMiddleware"]
        values["AUTHENTICATION_BACKENDS"] = [
            "axes.backends.AxesStandaloneBackend",
            "django.contrib.auth.backends.ModelBackend",
        ]
        values |= {
            "AXES_FAILURE_LIMIT": LIMIT,
            "AXES_COOLOFF_TIME": timedelta(minutes=15),
            "AXES_LOCKOUT_PARAMETERS": [["username", "ip_address"]],
            "AXES_RESET_ON_SUCCESS": True,
            "AXES_USERNAME_CALLABLE": f"{__name__}.axes_username",
            "AXES_CLIENT_IP_CALLABLE": "portal.common.client_address.client_address",
            "ROOT_URLCONF": "compare_axes_urls",
        }
    if impl == "axes-defaults":  # axes' own username and client address (django-ipware)
        del values["AXES_USERNAME_CALLABLE"], values["AXES_CLIENT_IP_CALLABLE"]
    settings.configure(**values)


def axes_urls() -> None:
    """Django's own LoginView and a token endpoint with no lock of its own."""
    from django.contrib.auth import authenticate
    from django.contrib.auth.views import LoginView
    from django.urls import include, path
    from rest_framework.permissions import AllowAny
    from rest_framework.response import Response
    from rest_framework.views import APIView

    class PlainTokenApi(APIView):
        authentication_classes: list = []
        permission_classes = [AllowAny]

        def post(self, request):
            user = authenticate(
                request=request._request,
                username=request.data.get("username"),
                password=request.data.get("password"),
            )
            if user is None:
                return Response({"detail": "bad credentials"}, status=400)
            return Response({"username": user.get_username()})

    module = types.ModuleType("compare_axes_urls")
    module.urlpatterns = [
        path("accounts/login/", LoginView.as_view(template_name="registration/login.html")),
        path("api/v1/auth/token/", PlainTokenApi.as_view()),
        path("", include("portal.urls")),
    ]
    sys.modules["compare_axes_urls"] = module


class Attempts:
    def __init__(self) -> None:
        from django.test import Client

        self.client_class = Client

    def page(self, username: str, password: str, address: str = "10.0.0.1", **extra) -> int:
        client = self.client_class()
        data = {"username": username, "password": password}
        return client.post("/accounts/login/", data, REMOTE_ADDR=address, **extra).status_code

    def token(self, username: str, password: str, address: str = "10.0.0.1", **extra) -> int:
        client = self.client_class()
        body = json.dumps({"username": username, "password": password})
        return client.post(
            "/api/v1/auth/token/",
            body,
            content_type="application/json",
            REMOTE_ADDR=address,
            **extra,
        ).status_code


def reset() -> None:
    from django.core.cache import cache

    cache.clear()
    try:
        from axes.models import AccessAttempt, AccessFailureLog, AccessLog
    except (ImportError, RuntimeError):
        return
    for model in (AccessAttempt, AccessFailureLog, AccessLog):
        model.objects.all().delete()


def attacks(tries: Attempts) -> dict[str, int]:
    """Status of the right password after LIMIT failures, per attack (429: locked)."""
    outcomes = {}
    reset()
    for _ in range(LIMIT):
        tries.page("downg", "wrong")
    outcomes["look-alike 𝐝𝐨𝐰𝐧𝐠 after 5 failures of downg"] = tries.page("𝐝𝐨𝐰𝐧𝐠", PASSWORD)
    reset()
    for _ in range(LIMIT):
        tries.page("downg", "wrong")
    outcomes["token endpoint after 5 login-page failures"] = tries.token("downg", PASSWORD)
    reset()
    for _ in range(LIMIT):
        tries.token("downg", "wrong")
    outcomes["login page after 5 token-endpoint failures"] = tries.page("downg", PASSWORD)
    reset()
    for alike in ("ｄowng", "𝐝𝐨𝐰𝐧𝐠", "DOWNG", "Downg", "ＤＯＷＮＧ"):
        tries.token(alike, "wrong")
    outcomes["token endpoint after 5 look-alike failures"] = tries.token("downg", PASSWORD)
    reset()
    # Public addresses: django-ipware skips private and reserved ones in the header.
    for index in range(LIMIT):
        tries.token("downg", "wrong", HTTP_X_FORWARDED_FOR=f"81.2.69.{index}")
    outcomes["token endpoint, rotating X-Forwarded-For"] = tries.token(
        "downg", PASSWORD, HTTP_X_FORWARDED_FOR="81.2.69.99"
    )
    reset()
    return outcomes


def costs(tries: Attempts, rounds: int) -> dict[str, dict[str, float]]:
    """Queries and milliseconds per attempt: a failure, a refusal while locked, a success."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def measure(kind: str, call) -> dict[str, float]:
        queries, millis = [], []
        for index in range(rounds):
            with CaptureQueriesContext(connection) as captured:
                start = time.perf_counter()
                call(index)
                millis.append((time.perf_counter() - start) * 1000)
            queries.append(len(captured))
        return {"queries": statistics.median(queries), "ms": round(statistics.median(millis), 2)}

    reset()
    result = {"failure (page)": measure("fail", lambda i: tries.page(f"user-{i}", "wrong"))}
    for index in range(rounds):
        for _ in range(LIMIT):
            tries.page(f"locked-{index}", "wrong")
    result["refused while locked (page)"] = measure(
        "locked", lambda i: tries.page(f"locked-{i}", "wrong")
    )
    result["success (page)"] = measure("ok", lambda i: tries.page("downg", PASSWORD))
    result["failure (token endpoint)"] = measure("fail", lambda i: tries.token(f"api-{i}", "wrong"))
    result["success (token endpoint)"] = measure("ok", lambda i: tries.token("downg", PASSWORD))
    reset()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["portal", "axes", "axes-defaults"], required=True)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        configure(args.impl, folder)
        import django

        django.setup()
        if args.impl.startswith("axes"):
            axes_urls()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        get_user_model().objects.create_user("downg", password=PASSWORD)
        tries = Attempts()
        report = {"impl": args.impl, "attacks": attacks(tries), "costs": costs(tries, args.rounds)}
        if args.impl.startswith("axes"):
            from axes.models import AccessAttempt, AccessLog

            tries.page("downg", "wrong")
            report["rows written"] = {
                "AccessAttempt": AccessAttempt.objects.count(),
                "AccessLog": AccessLog.objects.count(),
            }
        print(json.dumps(report, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()

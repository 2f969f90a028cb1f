"""Web hardening: deploy checks, CSRF on every form, password rules, hostile YAML uploads,
and no secrets in the repository."""

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from http import HTTPStatus
from pathlib import Path

import pytest
from django.contrib.auth.forms import AdminUserCreationForm
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from portal.jobs.forms import UPLOAD_LIMIT_BYTES
from portal.jobs.models import Job
from portal.settings.headers import STRICT_CONTENT_SECURITY_POLICY, STRICT_PERMISSIONS_POLICY
from tests.portal.common.pages import (
    BODIES,
    PAGES,
    build_world,
    db_fingerprint,
)

BASE_DIR = Path(__file__).resolve().parents[3]

# --- production settings --------------------------------------------------------------------

SETTINGS_PROBE = """
import json
import django
django.setup()
from django.conf import settings
from django.core import checks
issues = [
    f"{m.id}: {m.msg}"
    for m in checks.run_checks(include_deployment_checks=True)
    if m.level >= checks.WARNING
]
names = %r
print(json.dumps({"issues": issues, "settings": {n: getattr(settings, n) for n in names}}))
"""
EXPECTED_PRODUCTION = {
    "DEBUG": False,
    "SESSION_COOKIE_SECURE": True,
    "SESSION_COOKIE_HTTPONLY": True,
    "CSRF_COOKIE_SECURE": True,
    "CSRF_COOKIE_HTTPONLY": True,
    "SECURE_SSL_REDIRECT": True,
    "SECURE_CONTENT_TYPE_NOSNIFF": True,
    "SECURE_REFERRER_POLICY": "same-origin",
    "X_FRAME_OPTIONS": "DENY",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
    "CONTENT_SECURITY_POLICY": STRICT_CONTENT_SECURITY_POLICY,
    "PERMISSIONS_POLICY": STRICT_PERMISSIONS_POLICY,
}


def _production_probe(tmp_path, **env_changes) -> dict:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "SECURE_", "REDIS_", "CACHE_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="portal.settings.production",
        SECRET_KEY=secrets.token_urlsafe(50),
        PORTAL_VAR_DIR=str(tmp_path),
        **env_changes,
    )
    names = [*EXPECTED_PRODUCTION, "SECURE_HSTS_SECONDS", "AUTH_PASSWORD_VALIDATORS"]
    completed = subprocess.run(  # noqa: S603 (our own interpreter and script)
        [sys.executable, "-c", SETTINGS_PROBE % (names,)],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_production_settings_pass_check_deploy(tmp_path):
    probe = _production_probe(tmp_path)
    assert probe["issues"] == []
    for name, value in EXPECTED_PRODUCTION.items():
        assert probe["settings"][name] == value, name
    assert probe["settings"]["SECURE_HSTS_SECONDS"] >= 60 * 60 * 24 * 30
    assert len(probe["settings"]["AUTH_PASSWORD_VALIDATORS"]) == 4


def test_check_deploy_would_notice_a_weakened_setting(tmp_path):
    """The probe above can fail: turning HSTS off is reported."""
    probe = _production_probe(tmp_path, SECURE_HSTS_SECONDS="0")
    assert any(issue.startswith("security.W004") for issue in probe["issues"])


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env.update(DJANGO_SETTINGS_MODULE="portal.settings.production", PORTAL_VAR_DIR=str(tmp_path))
    completed = subprocess.run(  # noqa: S603
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode != 0
    assert "SECRET_KEY" in completed.stderr


# --- CSRF -----------------------------------------------------------------------------------


def _allowed_role(page) -> str:
    for role in ("staff", "a_lead", "a_researcher", "anonymous"):
        if not page.post[role].denied:
            return role
    raise AssertionError(f"nobody may POST to {page.id}")


CSRF_CASES = [
    pytest.param(page, _allowed_role(page), id=page.id) for page in PAGES if page.post is not None
]


def _csrf_client(world, role: str) -> Client:
    client = Client(enforce_csrf_checks=True)
    if role != "anonymous":
        client.force_login(world[role])
    # Any page with a form sets the cookie; the login page is open to everyone.
    assert client.get(reverse("login")).status_code == HTTPStatus.OK
    return client


def _url(world, page) -> str:
    kwargs = {key: world[value].pk for key, value in page.kwargs.items()}
    return reverse(page.name, kwargs=kwargs)


@pytest.mark.django_db
@pytest.mark.parametrize(("page", "role"), CSRF_CASES)
def test_form_posts_without_a_csrf_token_are_refused(page, role):
    world = build_world()
    client = _csrf_client(world, role)
    before = db_fingerprint()
    response = client.post(_url(world, page), BODIES[page.post_body](world))
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert b"CSRF" in response.content
    assert db_fingerprint() == before


@pytest.mark.django_db
@pytest.mark.parametrize(("page", "role"), CSRF_CASES)
def test_form_posts_with_the_csrf_token_succeed(page, role):
    world = build_world()
    client = _csrf_client(world, role)
    body = BODIES[page.post_body](world) | {
        "csrfmiddlewaretoken": client.cookies["csrftoken"].value
    }
    response = client.post(_url(world, page), body)
    assert response.status_code == page.post[role].status


# --- passwords ------------------------------------------------------------------------------

WEAK_PASSWORDS = [
    pytest.param("short1!", id="too-short"),
    pytest.param("password123", id="common"),
    pytest.param("58203948571", id="all-digits"),
    pytest.param("carol.example", id="like-the-username"),
]


@pytest.mark.django_db
@pytest.mark.parametrize("weak", WEAK_PASSWORDS)
def test_weak_passwords_are_refused_where_passwords_are_set(weak):
    from django.contrib.auth import get_user_model

    user = get_user_model()(username="carol.example", email="carol@example.com")
    with pytest.raises(ValidationError):
        validate_password(weak, user=user)
    form = AdminUserCreationForm(
        data={
            "username": "carol.example",
            "password1": weak,
            "password2": weak,
            "usable_password": "true",
        }
    )
    assert not form.is_valid()
    assert "password2" in form.errors


@pytest.mark.django_db
def test_strong_and_generated_passwords_pass():
    validate_password("correct horse battery staple")
    validate_password(secrets.token_urlsafe(12))  # what seed_demo generates


# --- hostile YAML uploads -------------------------------------------------------------------

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefg", "bcdefgh")
)
MANIFEST_HEAD = "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: hostile}\n"
HOSTILE_UPLOADS = [
    ("too large", b"a: " + b"x" * (UPLOAD_LIMIT_BYTES + 1), "larger than 256 KiB"),
    (
        "python object tag",
        (MANIFEST_HEAD + "spec: !!python/object:os.system {queue: alpha-queue}\n").encode(),
        "!!python/object:os.system is not allowed",
    ),
    (
        "python apply tag",
        b"!!python/object/apply:os.system ['touch /tmp/pwned']\n",
        "!!python/object/apply:os.system is not allowed",
    ),
    ("local tag", b"spec: !include /etc/passwd\n", "!include is not allowed"),
    ("alias bomb", ALIAS_BOMB.encode(), "anchors and aliases"),
    ("deep nesting, flow", b"a: " + b"[" * 100 + b"]" * 100, "nested"),
    ("deep nesting, block", "".join("  " * i + "k:\n" for i in range(100)).encode(), "nested"),
    ("deep nesting, unclosed", b"a: " + b"[" * 200_000, "nest"),
    ("huge integer", b"a: " + b"9" * 5000, "cannot be read"),
    ("a list", b"- apiVersion: batch.volcano.sh/v1alpha1\n", "is not a mapping"),
    ("a scalar", b"just text\n", "is not a mapping"),
    ("nothing but a comment", b"# empty\n", "holds no YAML document"),
    ("not UTF-8", b"a: \xff\xfe\x00", "not UTF-8"),
    ("control character", b"a: \x00", "not valid YAML"),
    ("syntax error", b"a: [unclosed", "did not find expected ',' or ']'"),
    ("unhashable key", b"? [a, b]\n: c\n", "unhashable"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("content", "message"),
    [pytest.param(content, message, id=name) for name, content, message in HOSTILE_UPLOADS],
)
def test_hostile_uploads_get_a_clear_field_error_and_write_nothing(content, message):
    world = build_world()
    client = Client()
    client.force_login(world["a_researcher"])
    before = db_fingerprint()
    upload = SimpleUploadedFile("job.yaml", content, content_type="application/yaml")
    response = client.post(reverse("jobs:job_upload"), {"manifest": upload})
    assert response.status_code == HTTPStatus.OK
    errors = response.context["form"].errors["manifest"]
    assert any(message in error for error in errors), errors
    assert db_fingerprint() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    "content",
    [pytest.param(c, id=n) for n, c, _ in HOSTILE_UPLOADS if n not in ("too large",)],
)
def test_hostile_yaml_bodies_get_a_4xx_naming_the_body(content):
    from rest_framework.test import APIClient

    world = build_world()
    client = APIClient()
    client.force_authenticate(world["a_researcher"])
    before = Job.objects.count()
    response = client.post("/api/v1/jobs/", content, content_type="application/yaml")
    assert HTTPStatus.BAD_REQUEST <= response.status_code < 500, response.content
    payload = response.json()
    assert payload["errors"], payload
    assert Job.objects.count() == before


NUL_MANIFEST = (
    MANIFEST_HEAD
    + """spec:
  queue: alpha-queue
  tasks:
  - name: worker
    template:
      spec:
        containers:
        - name: main
          image: "trainer\\0:1"
          command: ["python", "a\\0b"]
          env:
          - {name: "LR", value: "3e-4\\0"}
"""
)
NUL_PATHS = [
    "spec.tasks[0].template.spec.containers[0].image",
    "spec.tasks[0].template.spec.containers[0].command[1]",
    "spec.tasks[0].template.spec.containers[0].env[0].value",
]


@pytest.mark.django_db
def test_nul_characters_in_a_manifest_are_refused_by_path():
    """PostgreSQL cannot store U+0000 in text or jsonb: without this, a 500 at INSERT."""
    world = build_world()
    client = Client()
    client.force_login(world["a_researcher"])
    before = db_fingerprint()
    upload = SimpleUploadedFile("job.yaml", NUL_MANIFEST.encode())
    response = client.post(reverse("jobs:job_upload"), {"manifest": upload})
    assert response.status_code == HTTPStatus.OK
    lines = response.context["errors"]
    for path in NUL_PATHS:
        assert f"{path}: must not contain NUL characters (\\0)" in lines, lines
    assert db_fingerprint() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("task", "field"),
    [
        ({"env": {"A\x00": "1"}}, "tasks[0].env"),
        ({"env": {"A": "1\x00"}}, "tasks[0].env"),
        ({"command": ["a\x00b"]}, "tasks[0].command"),
    ],
)
def test_nul_characters_in_api_json_are_refused_by_field(task, field):
    from rest_framework.test import APIClient

    world = build_world()
    client = APIClient()
    client.force_authenticate(world["a_researcher"])
    body = {
        "queue": "alpha-queue",
        "name": "nul-job",
        "tasks": [{"name": "worker", "replicas": 1, "image": "busybox", "gpus": 1, **task}],
    }
    before = db_fingerprint()
    response = client.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    assert any(key.startswith(field) for key in response.json()["errors"])
    assert db_fingerprint() == before


@pytest.mark.django_db
def test_a_clean_manifest_still_uploads():
    world = build_world()
    client = Client()
    client.force_login(world["a_researcher"])
    response = client.post(reverse("jobs:job_upload"), BODIES["job_manifest"](world))
    assert response.status_code == HTTPStatus.FOUND
    assert Job.objects.filter(name="matrix-upload", queue=world["a_queue"]).exists()


# --- secrets --------------------------------------------------------------------------------

SECRET_PATTERNS = {
    "private key": re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----"),
    "AWS access key id": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "GitHub token": re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})"),
    "Slack token": re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    "Google API key": re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b"),
    "Stripe live key": re.compile(r"\b[sr]k_live_[0-9A-Za-z]{16,}"),
    "JSON web token": re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+"),
    "Django insecure key": re.compile(r"django-insecure-[^\s'\"]{10,}"),
    "SECRET_KEY literal": re.compile(r"\bSECRET_KEY\s*[:=]\s*['\"]([^'\"]+)['\"]"),
    # An unquoted literal (shell, .env, YAML); not a reference, a call or a "..." placeholder.
    "SECRET_KEY shell value": re.compile(
        r"\bSECRET_KEY(?:=|:[ \t]+)([A-Za-z0-9_\-+/=]{6,})(?![\w.(])"
    ),
    "password in a URL": re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@'\"]*:([^/\s@'\"]+)@"),
    # A value, not a `${POSTGRES_PASSWORD:?...}` reference or a `...` placeholder.
    "database password": re.compile(
        r"(?<!\{)\b(?:POSTGRES|MYSQL|REDIS)_PASSWORD\s*[:=]\s*['\"]?(?!\.\.\.)([^\s'\"$]+)"
    ),
}
# (pattern, path, matched value) that are deliberate and harmless, with the reason.
ALLOWED_SECRETS = {
    ("SECRET_KEY literal", "portal/settings/test.py", "test-only-not-a-secret"),  # tests only
    ("SECRET_KEY shell value", "Dockerfile", "build-only"),  # collectstatic in the image build
    ("password in a URL", "README.md", "pw"),  # a documentation placeholder
}


def _repo_files() -> list[str]:
    if shutil.which("git") is None or not (BASE_DIR / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(  # noqa: S603, S607
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=BASE_DIR,
        capture_output=True,
        check=True,
    )
    return [name for name in listed.stdout.decode().split("\0") if name]


def test_no_secrets_in_the_repository():
    found = []
    for name in _repo_files():
        path = BASE_DIR / name
        if not path.is_file():
            continue  # listed but deleted in the working tree
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary
        for label, pattern in SECRET_PATTERNS.items():
            for match in pattern.finditer(text):
                value = match.group(match.lastindex or 0)
                if (label, name, value) in ALLOWED_SECRETS:
                    continue
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{name}:{line}: {label}")
    assert found == []


@pytest.mark.parametrize(
    ("label", "sample"),
    [
        # Samples are split so that this file does not hold what it scans for.
        ("private key", "-----BEGIN RSA PRIVATE" + " KEY-----"),
        ("private key", "-----BEGIN OPENSSH PRIVATE" + " KEY-----"),
        ("AWS access key id", "id = AKIA" + "ABCDEFGHIJKLMNOP"),
        ("GitHub token", "ghp_" + "a1" * 18),
        ("SECRET_KEY literal", 'SECRET_KEY = "' + "s3cr3t-value" + '"'),
        ("SECRET_KEY shell value", "ENV SECRET_KEY" + "=abcd1234"),
        ("password in a URL", "redis://:" + "hunter2@cache:6379/0"),
        ("password in a URL", "postgres://app:" + "hunter2@db/app"),
        ("database password", "POSTGRES_PASSWORD: " + "hunter2"),
    ],
)
def test_the_secret_patterns_catch_what_they_claim(label, sample):
    assert SECRET_PATTERNS[label].search(sample)


@pytest.mark.parametrize(
    "sample",
    [
        'SECRET_KEY = env.str("SECRET_KEY")',
        "SECRET_KEY: ${SECRET_KEY:?set SECRET_KEY in .env}",
        "DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal",
        "POSTGRES_PASSWORD: ${POSTGRES_PASSWORD}",
        "Put `SECRET_KEY=...` in a `.env` file first.",
        "env.update(SECRET_KEY=secrets.token_urlsafe(50))",
    ],
)
def test_the_secret_patterns_leave_references_alone(sample):
    assert not any(pattern.search(sample) for pattern in SECRET_PATTERNS.values())

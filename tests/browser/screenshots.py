"""Screenshots of the portal's pages, from a fresh demo, into docs/screenshots/:

    ./dev screenshots                    # what the README shows, desktop and phone
    ./dev screenshots --all --out /tmp/shots   # every page as every role that may open it

Without --base-url it makes its own demo: SQLite in a scratch folder, `migrate`, `seed_demo`
(with its six hours of history), three scheduling cycles so the demo's jobs are placed, then
`runserver` on a free port; all of it is stopped and removed at the end. With --base-url it
photographs a running portal whose demo users' password is in DEMO_PASSWORD.

Not a test (pytest collects only test_*.py). Uses Debian's /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS, PHONE, log_in  # noqa: E402
from tests.browser.pages import PAGES, BrowserPage  # noqa: E402

DESKTOP = {"width": 1440, "height": 900}
DEMO_USERS = {"researcher": "researcher", "lead": "lead", "admin": "admin"}
# (file, page, role, phone?) for docs/screenshots; the README shows some of them.
SHOTS = (
    ("01-home-researcher.png", "home", "researcher", False),
    ("02-job-submit.png", "job-submit", "researcher", False),
    ("03-job-list.png", "job-list", "researcher", False),
    ("04-job-detail.png", "job-detail", "researcher", False),
    ("05-job-upload.png", "job-upload", "researcher", False),
    ("06-queue-list.png", "queue-list", "lead", False),
    ("07-queue-edit-preview.png", "queue-edit", "lead", False),
    ("08-dashboard.png", "dashboard", "admin", False),
    ("09-preemptions.png", "preemptions", "admin", False),
    ("10-scheduler-config.png", "scheduler-config", "admin", False),
    ("11-nodes.png", "nodes", "admin", False),
    ("12-forbidden.png", "forbidden", "researcher", False),
    ("13-dashboard-researcher.png", "dashboard", "researcher", False),
    ("13-tenant-edit-preview.png", "tenant-edit", "admin", False),
    ("14-admin-for-staff-only.png", "admin-for-staff-only", "researcher", False),
    ("14-tenants.png", "tenant-list", "admin", False),
    ("20-phone-home.png", "home", "researcher", True),
    ("21-phone-dashboard.png", "dashboard", "admin", True),
    ("22-phone-preemptions.png", "preemptions", "admin", True),
    ("23-phone-nodes.png", "nodes", "admin", True),
    ("24-phone-job-list.png", "job-list", "researcher", True),
    ("25-phone-job-detail.png", "job-detail", "researcher", True),
    ("26-phone-queue-list.png", "queue-list", "lead", True),
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _manage(env: dict[str, str], *args: str) -> None:
    subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )


@contextlib.contextmanager
def fresh_demo() -> Iterator[tuple[str, str]]:
    """(base URL, password) of a demo seeded from scratch and served until the block ends."""
    password = secrets.token_urlsafe(12)
    with tempfile.TemporaryDirectory(prefix="portal-screenshots-") as scratch:
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")
        }
        env.update(
            DJANGO_SETTINGS_MODULE="portal.settings.local",
            PORTAL_VAR_DIR=scratch,
            DEMO_PASSWORD=password,
        )
        _manage(env, "migrate", "--noinput")
        _manage(env, "seed_demo")
        cycles = "from scheduler.tasks import scheduling_cycle_run as run\nfor _ in range(3): run()"
        _manage(env, "shell", "-c", cycles)
        port = _free_port()
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base_url = f"http://127.0.0.1:{port}"
        try:
            _wait_for(f"{base_url}/accounts/login/")
            yield base_url, password
        finally:
            server.terminate()
            server.wait(timeout=20)


def _wait_for(url: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):  # noqa: S310 (our own loopback server)
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def login(context, base_url: str, role: str, password: str) -> None:
    if role == "anonymous":
        return
    page = context.new_page()
    log_in(page, base_url, DEMO_USERS[role], password)
    page.close()


def shoot(context, base_url: str, spec: BrowserPage, path: Path, ids: dict[str, str]) -> None:
    page = context.new_page()
    page.goto(base_url + spec.path.format(**ids))
    page.wait_for_selector(spec.ready, timeout=20000)
    if spec.name == "queue-edit":
        # A change the demo's shares feel: nlp-train capped below what it deserves now.
        page.fill("#id_capability_gpus", "8")
        page.wait_for_selector("#preview .preview-cell-down", timeout=10000)
    page.screenshot(path=str(path), full_page=True)
    page.close()
    print("saved", path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="a running portal (password in DEMO_PASSWORD)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    parser.add_argument("--all", action="store_true", help="every page as every role")
    parser.add_argument("--job-id", default="1", help="a job of tenant nlp (demo: 1)")
    parser.add_argument("--queue-id", default="1", help="the nlp-train queue (demo: 1)")
    parser.add_argument("--tenant-id", default="1", help="the nlp tenant (demo: 1)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ids = {"job": args.job_id, "queue": args.queue_id, "tenant": args.tenant_id}
    pages = {spec.name: spec for spec in PAGES}
    if args.all:
        shots = [
            (f"{spec.name}-{role}{'-phone' if phone else ''}.png", spec.name, role, phone)
            for spec in PAGES
            for role in spec.roles
            for phone in ((False, True) if spec.phone else (False,))
        ]
    else:
        shots = list(SHOTS)
    with contextlib.ExitStack() as stack:
        if args.base_url:
            base_url, password = args.base_url, os.environ["DEMO_PASSWORD"]
        else:
            base_url, password = stack.enter_context(fresh_demo())
        from playwright.sync_api import sync_playwright

        playwright = stack.enter_context(sync_playwright())
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        contexts = {}
        for name, page_name, role, phone in shots:
            key = (role, phone)
            if key not in contexts:
                contexts[key] = browser.new_context(
                    viewport=PHONE if phone else DESKTOP, device_scale_factor=1
                )
                login(contexts[key], base_url, role, password)
            shoot(contexts[key], base_url, pages[page_name], out / name, ids)
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

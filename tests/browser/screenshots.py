"""Save screenshots of the main pages of a running portal (a seeded demo) to docs/screenshots.

    DATABASE_URL=sqlite:////tmp/demo.sqlite3 DEMO_PASSWORD=... python manage.py seed_demo
    python -m portal.dashboards.bench --demo-history          # optional: a week of history
    python manage.py runserver 127.0.0.1:8765 &
    DEMO_PASSWORD=... .venv/bin/python tests/browser/screenshots.py --base-url http://127.0.0.1:8765

Not a test (pytest collects only test_*.py). Uses Debian's /usr/bin/chromium.
"""

import argparse
import os
from pathlib import Path

from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
# (user, file name, path, wait-for selector)
PAGES = [
    ("researcher", "01-home-researcher.png", "/", "#my-jobs"),
    ("researcher", "02-job-submit.png", "/jobs/new/", "#job-submit"),
    ("researcher", "03-job-list.png", "/jobs/", "#jobs"),
    ("researcher", "04-job-detail.png", "/jobs/1/", "#placements"),
    ("researcher", "05-job-upload.png", "/jobs/upload/", "#job-upload"),
    ("lead", "06-queue-list.png", "/queues/", "table"),
    ("lead", "07-queue-edit-preview.png", "/queues/{nlp_train}/edit/", "#preview"),
    ("admin", "08-dashboard.png", "/dashboards/?range=week", "#dashboard[data-loaded='1']"),
    ("admin", "09-preemptions.png", "/admin-area/preemptions/", "#preemptions"),
    ("admin", "10-scheduler-config.png", "/admin-area/config/", "#config-form"),
    ("admin", "11-nodes.png", "/cluster/nodes/", "#nodes"),
    ("researcher", "12-forbidden.png", "/admin-area/preemptions/", "h1"),
]


def login(page, base_url: str, username: str, password: str) -> None:
    page.goto(f"{base_url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", default="http://127.0.0.1:8765")
    parser.add_argument(
        "--out", default=str(Path(__file__).resolve().parents[2] / "docs/screenshots")
    )
    parser.add_argument("--nlp-train-id", default="1", help="id of the demo's nlp-train queue")
    args = parser.parse_args()
    password = os.environ["DEMO_PASSWORD"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        contexts = {}
        for user, name, path, selector in PAGES:
            if user not in contexts:
                context = browser.new_context(viewport={"width": 1440, "height": 900})
                login(context.new_page(), args.base_url, user, password)
                contexts[user] = context
            page = contexts[user].new_page()
            page.goto(args.base_url + path.format(nlp_train=args.nlp_train_id))
            page.wait_for_selector(selector, timeout=15000)
            if name.startswith("07"):
                page.fill("#id_weight", "8")
                page.wait_for_selector("#preview .preview-cell-up", timeout=10000)
            page.screenshot(path=str(out / name), full_page=True)
            page.close()
            print("saved", out / name)
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

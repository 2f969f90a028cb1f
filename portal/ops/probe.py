"""Container health checks for the compose file: `python -m portal.ops.probe web|worker`.

Exit 0 when the process answers 200 on its own port: the web's /readyz (port from
GUNICORN_BIND), a worker's exporter /healthz (WORKER_METRICS_PORT). Plain urllib and no Django,
so a check costs a few milliseconds and the slim image needs no curl. Kubernetes probes the
same URLs with httpGet (deploy/portal/).
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

TIMEOUT_SECONDS = 5


def probe_url(kind: str, environ: dict[str, str]) -> str:
    if kind == "web":
        port = environ.get("GUNICORN_BIND", "0.0.0.0:8000").rsplit(":", 1)[-1]
        return f"http://127.0.0.1:{port}/readyz"
    if kind == "worker":
        port = environ.get("WORKER_METRICS_PORT", "")
        if not port.isdigit() or port == "0":
            raise ValueError("WORKER_METRICS_PORT must name the worker's exporter port")
        return f"http://127.0.0.1:{port}/healthz"
    raise ValueError(f"probe web or worker, not {kind!r}")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m portal.ops.probe web|worker", file=sys.stderr)
        return 2
    try:
        url = probe_url(argv[0], dict(os.environ))
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as answer:  # noqa: S310 - an http(s) URL built from our own settings
            print(f"{url}: {answer.status}")
            return 0
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    except urllib.error.HTTPError as error:
        print(f"{url}: {error.code} {error.read().decode(errors='replace')[:500]}", file=sys.stderr)
    except (urllib.error.URLError, OSError) as error:
        print(f"{url}: {error}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

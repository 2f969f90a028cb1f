"""A tiny HTTP client for the portal API (urllib; JSON in and out)."""

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

USER_AGENT = "gpuq-cli/1"


class ApiError(Exception):
    """The API answered with an error status; `body` is its JSON (or text) answer."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body


class ConnectionFailed(Exception):
    pass


@dataclass
class ApiClient:
    url: str
    token: str | None
    timeout: float = 30.0

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        json_body: Any = None,
        raw_body: bytes | None = None,
        content_type: str | None = None,
    ) -> Any:
        url = self.url.rstrip("/") + path
        if query:
            clean = {k: v for k, v in query.items() if v is not None and v != ""}
            if clean:
                url += "?" + urllib.parse.urlencode(clean)
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        data = raw_body
        if json_body is not None:
            data = json.dumps(json_body).encode("utf-8")
            content_type = "application/json"
        if content_type:
            headers["Content-Type"] = content_type
        request = urllib.request.Request(url, data=data, method=method, headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                payload = response.read()
        except urllib.error.HTTPError as error:
            raise ApiError(error.code, _decode(error.read())) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise ConnectionFailed(f"cannot reach {self.url}: {reason}") from None
        return _decode(payload)

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, json_body=body if body is not None else {})

    def get_all(self, path: str, *, limit: int | None = None, **query: Any) -> list[Any]:
        """Follow `?offset=` pages until `limit` rows (or all of them)."""
        rows: list[Any] = []
        offset = 0
        page = min(limit, 500) if limit else 500
        while True:
            body = self.get(path, limit=page, offset=offset, **query)
            rows.extend(body["results"])
            offset += len(body["results"])
            if not body.get("next") or not body["results"] or (limit and len(rows) >= limit):
                return rows[:limit] if limit else rows


def _decode(payload: bytes) -> Any:
    if not payload:
        return None
    text = payload.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text

from typing import Any

from django.conf import settings
from rest_framework.throttling import ScopedRateThrottle

# Overridden (per scope) by settings.API_THROTTLE_RATES; `None` disables a scope.
DEFAULT_THROTTLE_RATES: dict[str, str | None] = {
    "job_create": "120/min",
    "token_create": "20/min",
}


class ApiScopedRateThrottle(ScopedRateThrottle):
    """ScopedRateThrottle whose rates come from API_THROTTLE_RATES with built-in defaults."""

    def get_rate(self) -> Any:
        rates = {**DEFAULT_THROTTLE_RATES, **getattr(settings, "API_THROTTLE_RATES", {})}
        return rates.get(self.scope)

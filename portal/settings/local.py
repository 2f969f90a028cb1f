"""The embedded default: a laptop, SQLite, filesystem broker, simulated cluster."""

from .base import *  # noqa: F403
from .base import VAR_DIR, env
from .headers import STRICT_CONTENT_SECURITY_POLICY, STRICT_PERMISSIONS_POLICY

# Off, as in production: a demo user must never see Django's debug pages (a 404 listed every
# URL pattern, a 500 the settings). DJANGO_DEBUG=1 brings them back for a developer.
DEBUG = env.bool("DJANGO_DEBUG", default=False)
# Only for the embedded demo; production.py refuses to start without a real key.
SECRET_KEY = env.str("SECRET_KEY", default="local-dev-only-not-a-secret")
WHITENOISE_AUTOREFRESH = True
# The production policies, so a page that breaks under them breaks here first.
CONTENT_SECURITY_POLICY = STRICT_CONTENT_SECURITY_POLICY
PERMISSIONS_POLICY = STRICT_PERMISSIONS_POLICY
WHITENOISE_USE_FINDERS = True
# /metrics without a token (production needs METRICS_TOKEN, see docs/operations.md).
METRICS_OPEN = env.bool("METRICS_OPEN", default=True)
VAR_DIR.mkdir(parents=True, exist_ok=True)  # the SQLite file and the broker folder live here

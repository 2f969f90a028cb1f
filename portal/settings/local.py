"""The embedded default: a laptop, SQLite, filesystem broker, simulated cluster."""

from .base import *  # noqa: F403
from .base import env

DEBUG = env.bool("DJANGO_DEBUG", default=True)
# Only for the embedded demo; production.py refuses to start without a real key.
SECRET_KEY = env.str("SECRET_KEY", default="local-dev-only-not-a-secret")

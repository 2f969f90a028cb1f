"""Production: PostgreSQL, Redis, gunicorn behind a TLS-terminating proxy."""

from .base import *  # noqa: F403
from .base import env
from .headers import STRICT_CONTENT_SECURITY_POLICY, STRICT_PERMISSIONS_POLICY

DEBUG = False
SECRET_KEY = env.str("SECRET_KEY")  # no default: refuse to start without one

# SECURITY
# ------------------------------------------------------------------------------
# https://docs.djangoproject.com/en/5.2/howto/deployment/checklist/
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=60 * 60 * 24 * 30)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=True)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
CSRF_COOKIE_HTTPONLY = True
CONTENT_SECURITY_POLICY = env.str("CONTENT_SECURITY_POLICY", default=STRICT_CONTENT_SECURITY_POLICY)
PERMISSIONS_POLICY = env.str("PERMISSIONS_POLICY", default=STRICT_PERMISSIONS_POLICY)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# DATABASES
# ------------------------------------------------------------------------------
# https://docs.djangoproject.com/en/5.2/ref/databases/#persistent-connections
# A new PostgreSQL connection per request cost the API two thirds of its throughput
# (docs/load.md): keep each for 60 s unless DATABASE_URL sets ?conn_max_age= itself.
DATABASES["default"].setdefault("CONN_MAX_AGE", 60)  # noqa: F405

# CACHES
# ------------------------------------------------------------------------------
# One cache for all gunicorn workers, so the login lock and the API rate limits count per
# user and address, not per process (Django's default, local memory, is per process: three
# workers let three times the limit through). Redis when configured; else files in VAR_DIR,
# shared by the workers of one machine (several web machines need Redis).
if REDIS_URL:  # noqa: F405
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": env.str("CACHE_URL", default=REDIS_URL),  # noqa: F405
        }
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache"),  # noqa: F405
            # Each write lists the folder once it is full; 300 (the default) would let a
            # burst of usernames cull the counts of others.
            "OPTIONS": {"MAX_ENTRIES": 10_000},
        }
    }

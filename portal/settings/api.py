"""REST API settings (imported at the end of base.py).

The API views already use these defaults when the settings are absent; set them here to
tune them per environment.
"""

import os

# Requests per user per period for the throttled API scopes ("<n>/<sec|min|hour|day>").
API_THROTTLE_RATES = {
    "job_create": os.environ.get("API_JOB_CREATE_RATE", "120/min"),
    "token_create": os.environ.get("API_TOKEN_CREATE_RATE", "20/min"),
}
# Largest JSON/YAML request body the API parses (bytes); larger bodies get 413.
API_MAX_BODY_BYTES = int(os.environ.get("API_MAX_BODY_BYTES", str(256 * 1024)))
# API tokens (portal/api/services.py): lifetime given at creation (default and most), and
# how many unexpired, unrevoked tokens one user may hold.
API_TOKEN_DEFAULT_DAYS = int(os.environ.get("API_TOKEN_DEFAULT_DAYS", "90"))
API_TOKEN_MAX_DAYS = int(os.environ.get("API_TOKEN_MAX_DAYS", "365"))
API_TOKEN_MAX_PER_USER = int(os.environ.get("API_TOKEN_MAX_PER_USER", "50"))

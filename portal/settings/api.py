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

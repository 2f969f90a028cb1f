"""Policies sent by portal.common.middleware.SecurityHeadersMiddleware (production.py and
local.py switch them on; the test settings leave them off unless a test sets them).

Scripts come only from the portal's own static files: no inline script, no eval. The pages
load their data as JSON; plotly.js is served as /static/vendor/ (the plotly package's copy), Swagger UI from
drf-spectacular-sidecar through the split view (its init script is a separate request).
Inline styles stay allowed: plotly.js and Swagger UI set style attributes, and a style cannot
run code.
"""

STRICT_CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)

# Browser features no page of the portal uses, denied to it and to anything it embeds.
STRICT_PERMISSIONS_POLICY = ", ".join(
    f"{feature}=()"
    for feature in (
        "accelerometer",
        "camera",
        "display-capture",
        "geolocation",
        "gyroscope",
        "magnetometer",
        "microphone",
        "payment",
        "usb",
    )
)

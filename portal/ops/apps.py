from django.apps import AppConfig


class OpsConfig(AppConfig):
    """Running the portal: health, metrics, logs, retention, backup."""

    name = "portal.ops"
    label = "ops"

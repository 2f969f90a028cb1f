from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "portal.api"
    label = "api"
    verbose_name = "API"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import signals  # noqa: F401  (revokes tokens when a password or activity changes)

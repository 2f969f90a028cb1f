from django.apps import AppConfig


class CommonConfig(AppConfig):
    name = "portal.common"
    label = "common"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import client_address  # noqa: F401  (registers its system check)

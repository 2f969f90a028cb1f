from django.apps import AppConfig


class ClusterConfig(AppConfig):
    name = "portal.cluster"
    label = "cluster"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core import checks

        from .namespaces import namespace_settings_check

        # At start (migrate, runserver, `manage.py check`), not as a 500 on the first page
        # that names a tenant's namespace.
        checks.register(namespace_settings_check)

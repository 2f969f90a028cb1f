from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "portal.tenants"
    label = "tenants"
    default_auto_field = "django.db.models.BigAutoField"

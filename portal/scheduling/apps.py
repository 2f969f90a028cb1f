from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "portal.scheduling"
    label = "scheduling"
    default_auto_field = "django.db.models.BigAutoField"

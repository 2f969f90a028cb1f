from django.apps import AppConfig


class QueuesConfig(AppConfig):
    name = "portal.queues"
    label = "queues"
    default_auto_field = "django.db.models.BigAutoField"

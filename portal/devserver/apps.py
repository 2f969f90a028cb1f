from django.apps import AppConfig


class DevserverConfig(AppConfig):
    name = "portal.devserver"
    verbose_name = "Development server"

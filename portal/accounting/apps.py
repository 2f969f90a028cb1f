from django.apps import AppConfig


class AccountingConfig(AppConfig):
    name = "portal.accounting"
    label = "accounting"
    default_auto_field = "django.db.models.BigAutoField"

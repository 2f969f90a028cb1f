"""Shared model bases."""

from django.db import models
from django.utils import timezone


class BaseModel(models.Model):
    """Adds creation and last-update timestamps to every concrete model."""

    created_at = models.DateTimeField(default=timezone.now, db_index=True, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True

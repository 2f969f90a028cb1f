from django.conf import settings
from django.db import models

from portal.common.models import BaseModel
from portal.common.validators import validate_dns_label


class Tenant(BaseModel):
    """A team that owns queues. Members are researchers or leads."""

    name = models.CharField(max_length=63, unique=True, validators=[validate_dns_label])
    display_name = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.display_name or self.name


class Membership(BaseModel):
    class Role(models.TextChoices):
        RESEARCHER = "researcher", "Researcher"
        LEAD = "lead", "Lead"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.RESEARCHER)

    class Meta:
        ordering = ["tenant__name", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["user", "tenant"], name="uniq_membership_user_tenant")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant.name} ({self.role})"

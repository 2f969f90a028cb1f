from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from portal.common.access import visible_tenants

from .models import Membership, Tenant


def tenant_list(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Tenant]:
    return visible_tenants(user).order_by("name")


def membership_list(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Membership]:
    if not user.is_authenticated:
        return Membership.objects.none()
    return Membership.objects.filter(user=user).select_related("tenant").order_by("tenant__name")

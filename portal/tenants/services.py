from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction

from portal.common.services import model_update

from .models import Membership, Tenant


@transaction.atomic
def tenant_create(*, name: str, display_name: str = "") -> Tenant:
    tenant = Tenant(name=name, display_name=display_name)
    tenant.full_clean()
    tenant.save()
    return tenant


@transaction.atomic
def tenant_get_or_create(*, name: str, display_name: str = "") -> tuple[Tenant, bool]:
    tenant = Tenant.objects.filter(name=name).first()
    if tenant is not None:
        return tenant, False
    return tenant_create(name=name, display_name=display_name), True


@transaction.atomic
def membership_set(*, user: AbstractBaseUser, tenant: Tenant, role: str) -> Membership:
    """Make `user` a member of `tenant` with `role`, creating or updating the membership."""
    membership = Membership.objects.filter(user=user, tenant=tenant).first()
    if membership is None:
        membership = Membership(user=user, tenant=tenant, role=role)
        membership.full_clean()
        membership.save()
        return membership
    membership, _ = model_update(instance=membership, fields=["role"], data={"role": role})
    return membership


@transaction.atomic
def membership_delete(*, user: AbstractBaseUser, tenant: Tenant) -> None:
    Membership.objects.filter(user=user, tenant=tenant).delete()


@transaction.atomic
def user_create(
    *,
    username: str,
    password: str | None,
    email: str = "",
    is_staff: bool = False,
    is_superuser: bool = False,
) -> AbstractBaseUser:
    """Create a login. `password=None` creates a user that cannot log in with a password."""
    user_model = get_user_model()
    user = user_model(username=username, email=email, is_staff=is_staff, is_superuser=is_superuser)
    if password is None:
        user.set_unusable_password()
    else:
        _password_check(password, user)
        user.set_password(password)
    user.full_clean()
    user.save()
    return user


@transaction.atomic
def user_password_set(*, user: AbstractBaseUser, password: str) -> AbstractBaseUser:
    _password_check(password, user)
    user.set_password(password)
    user.save(update_fields=["password"])
    return user


def _password_check(password: str, user: AbstractBaseUser) -> None:
    """AUTH_PASSWORD_VALIDATORS, as the admin's and Django's own password forms apply them."""
    try:
        validate_password(password, user)
    except ValidationError as error:
        raise ValidationError({"password": error.messages}) from error

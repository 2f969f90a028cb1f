"""Who may do what with API tokens (see portal.common.access)."""

from portal.common.access import AnyUser, is_site_admin

from .models import ApiToken


def can_revoke_token(user: AnyUser, token: ApiToken) -> bool:
    """Its owner (the token page, the token endpoint's DELETE) or a site admin (the admin)."""
    if not user.is_authenticated:
        return False
    if token.user_id == user.pk:
        return True
    return is_site_admin(user)

"""What of the scheduler's history a user may read (see portal.common.access)."""

from portal.common.access import AnyUser, is_site_admin


def can_see_evictions(user: AnyUser) -> bool:
    """Who evicted whom, over the whole cluster, is admin information."""
    return is_site_admin(user)

"""Who may read the scheduler's history and read or change its configuration (see
portal.common.access)."""

from portal.common.access import AnyUser, is_site_admin


def can_see_evictions(user: AnyUser) -> bool:
    """Who evicted whom, over the whole cluster, is admin information."""
    return is_site_admin(user)


def can_see_scheduler_config(user: AnyUser) -> bool:
    """The conf's versions, their authors and comments: the site's admins."""
    return is_site_admin(user)


def can_change_scheduler_config(user: AnyUser) -> bool:
    """Store or activate a conf version: it decides every tenant's share, so site admins only."""
    return is_site_admin(user)

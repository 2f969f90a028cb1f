"""Admin pieces shared by the apps' ModelAdmins.

Django's AutocompleteSelect re-renders a refused form by looking up the posted value with
``filter(pk__in=[value])``: a value that is not an id ("abc", or beyond 64 bits on SQLite)
then raises inside the template and the page becomes a 500. The form itself already says the
choice is invalid, so the widget only has to leave such values out of its lookup.
"""

from __future__ import annotations

from django.contrib.admin.widgets import AutocompleteSelect
from django.core.exceptions import ValidationError

_BIGINT = 2**63


class SafeAutocompleteSelect(AutocompleteSelect):
    def optgroups(self, name, value, attr=None):
        return super().optgroups(name, [v for v in value if self._lookupable(v)], attr)

    def _lookupable(self, raw) -> bool:
        remote = self.field.remote_field
        target = remote.model._meta.get_field(getattr(remote, "field_name", None) or "pk")
        try:
            python = target.to_python(raw)
        except (ValidationError, TypeError, ValueError):
            return False
        return not isinstance(python, int) or -_BIGINT <= python < _BIGINT


class SafeAutocompleteMixin:
    """For a ModelAdmin or inline with ``autocomplete_fields``."""

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if "widget" not in kwargs and db_field.name in self.get_autocomplete_fields(request):
            kwargs["widget"] = SafeAutocompleteSelect(
                db_field, self.admin_site, using=kwargs.get("using")
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class ReadOnlyAdminMixin:
    """Audit records (evictions, cycles, placements, queue changes): shown in the admin, never
    added, edited or deleted there, superusers included. The scheduler and the services write
    them; an edit by hand would make the history lie."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

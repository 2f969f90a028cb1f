"""Template filters shared by the pages: resource units, relative times, queue colours.

{% load portal_ui %}
{{ node.cpu_millis|cores }}  {{ node.memory_bytes|gib }}  {{ node.last_seen_at|ago }}
<span class="swatch" style="background: {{ queue.pk|queue_colour }}"></span>
"""

from django import template
from django.utils import timezone

from portal.common import units
from portal.common.palette import queue_colour as palette_colour

register = template.Library()


@register.filter
def cores(millis):
    return units.cores(millis)


@register.filter
def gib(size):
    return units.gib(size)


@register.filter
def gpus(amount):
    return units.gpus(amount)


@register.filter
def quota_value(value, field):
    """A quota audit row's value in the page's units: "8 cores", "64 GiB"; empty: unlimited."""
    if value in (None, ""):
        return "unlimited"
    for suffix, show in (("_cpu_millis", units.cores), ("_memory_bytes", units.gib)):
        if str(field).endswith(suffix) and str(value).isdigit():
            return show(int(value))
    return value


@register.filter
def duration(seconds):
    return units.duration(seconds)


@register.filter
def ago(moment):
    return units.ago(moment, timezone.now())


@register.filter
def queue_colour(queue_id):
    """The queue's colour on every chart (portal.common.palette)."""
    if queue_id in (None, ""):
        return ""
    return palette_colour(queue_id)

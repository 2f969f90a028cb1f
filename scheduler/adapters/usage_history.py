"""Past GPU use per queue for the fairshare plugin, read from the usage rollups.

Only when the active conf names ``fairshare``: each queue's hourly (half-life up to two days)
or daily rollups over eight half-lives (what is older counts under 0.4%), as UsageRecords of
GPU-seconds at the middle of each bucket, on the snapshot's clock (seconds since 1970). A
bucket's GPU-seconds are its average allocation times its samples times the sample interval:
the minutes the portal sampled, so a gap in sampling is no use rather than made-up use.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

from scheduler.adapters.portal_port import QueueUsageRollup
from scheduler.core.config import SchedulerConf
from scheduler.core.plugins import fairshare
from scheduler.core.resources import Resources
from scheduler.core.types import UsageRecord

HALF_LIVES = 8
HOURLY_UP_TO_HOURS = 48
_BUCKET = {
    QueueUsageRollup.Resolution.HOUR: timedelta(hours=1),
    QueueUsageRollup.Resolution.DAY: timedelta(days=1),
}


def queue_usage_history(
    *, conf: SchedulerConf, queue_ids: list[int], now: datetime
) -> dict[int, tuple[UsageRecord, ...]]:
    option = conf.plugin(fairshare.PLUGIN_NAME)
    if option is None or not queue_ids:
        return {}
    half_life = fairshare.build(option.arguments).half_life  # the conf was validated
    resolution = (
        QueueUsageRollup.Resolution.HOUR
        if half_life <= HOURLY_UP_TO_HOURS * 3600
        else QueueUsageRollup.Resolution.DAY
    )
    since = now - timedelta(seconds=HALF_LIVES * half_life)
    middle = _BUCKET[resolution] / 2
    rows = (
        QueueUsageRollup.objects.filter(
            resolution=resolution, queue_id__in=queue_ids, bucket__gte=since
        )
        .order_by("queue_id", "bucket")
        .values_list("queue_id", "bucket", "gpus_allocated_avg", "samples")
    )
    history: dict[int, list[UsageRecord]] = {}
    for queue_id, bucket, gpus, samples in rows:
        used = gpus * samples * settings.USAGE_SAMPLE_SECONDS
        history.setdefault(queue_id, []).append(
            UsageRecord((bucket + middle).timestamp(), Resources({"gpu": used}))
        )
    return {queue_id: tuple(records) for queue_id, records in history.items()}

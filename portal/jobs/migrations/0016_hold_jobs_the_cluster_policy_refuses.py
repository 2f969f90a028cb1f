"""Jobs stored before tenants had a cluster policy (a pod security level, taints and priority
classes by an admin's list, references inside the tenant, reserved annotations) that the policy
refuses are quarantined, as portal.jobs.services.jobs_policy_hold does when an admin narrows a
policy: never deleted, their reason says what to change, a site admin may release them once the
tenant's policy allows them. The decision is the services' (job_policy_problems, which reads
only the rows' fields); the status change is the lifecycle's QUARANTINE, written here on the
historical rows: status and reason, and the pods of a placed job released."""

from django.db import migrations
from django.utils import timezone


def hold(apps, schema_editor):
    from portal.jobs.lifecycle import SCHEDULED, Status
    from portal.jobs.services import JOB_POLICY_HELD, job_policy_problems

    job_model = apps.get_model("jobs", "Job")
    placement_model = apps.get_model("cluster", "Placement")
    tenant_model = apps.get_model("tenants", "Tenant")
    names = list(tenant_model.objects.values_list("name", flat=True))
    now = timezone.now()
    jobs = (
        job_model.objects.filter(status__in=sorted(SCHEDULED))
        .select_related("tenant", "queue")
        .prefetch_related("tasks")
        .order_by("id")
    )
    for job in jobs.iterator(chunk_size=500):
        problems = job_policy_problems(job, tenant_names=names)
        if not problems:
            continue
        job.status = Status.QUARANTINED
        job.pending_reason = JOB_POLICY_HELD.format(tenant=job.tenant.name, problems=problems)
        job.pending_reason_at = now
        job.save(update_fields=["status", "pending_reason", "pending_reason_at", "updated_at"])
        placement_model.objects.filter(job_id=job.pk, state__in=["bound", "running"]).update(
            state="releasing", updated_at=now
        )


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0015_jobtask_kubernetes_rules"),
        ("tenants", "0006_tenant_cluster_policy"),
        ("queues", "0003_queue_cluster_allowances"),
        ("cluster", "0007_placement_namespace"),
    ]

    operations = [migrations.RunPython(hold, migrations.RunPython.noop)]

"""The scheduler's shell as a Django app: Celery finds its tasks (scheduler.tasks) as an
installed app's, and it hands the portal's facade (portal.scheduling.facade) the calls the
portal makes of it, so the portal never imports the shell."""

from django.apps import AppConfig


class SchedulerShellConfig(AppConfig):
    name = "scheduler"
    label = "scheduler"
    verbose_name = "Scheduler"

    def ready(self) -> None:
        # The shell's modules import the portal's models: they load once every app has.
        from scheduler.adapters.namespaces import namespace_labels_read
        from scheduler.adapters.pod_logs import pod_log_read
        from scheduler.adapters.portal_port import SchedulerShell, facade_connect
        from scheduler.tasks import scheduling_cycle_kick

        facade_connect(
            SchedulerShell(
                cycle_kick=scheduling_cycle_kick,
                pod_log_read=pod_log_read,
                namespace_labels_read=namespace_labels_read,
            )
        )

"""The portal's facade onto the scheduler's shell: connected by the scheduler app when Django
starts, and a clear error, not an AttributeError, in a process where it is not."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.scheduling import facade
from scheduler.adapters.pod_logs import pod_log_read
from scheduler.tasks import scheduling_cycle_kick


def test_the_scheduler_app_connects_its_calls_at_startup():
    shell = facade._connected()
    assert shell.cycle_kick is scheduling_cycle_kick
    assert shell.pod_log_read is pod_log_read


def test_a_process_without_the_scheduler_app_is_told_so(monkeypatch):
    monkeypatch.setattr(facade, "_shell", None)
    with pytest.raises(ImproperlyConfigured, match="add the `scheduler` app to INSTALLED_APPS"):
        facade.cycle_kick()
    with pytest.raises(ImproperlyConfigured, match="not connected"):
        facade.pod_log_read(pod_name="gp-1-worker-0", tail=10)

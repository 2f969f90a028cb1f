import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from portal.scheduling import services
from portal.scheduling.models import SchedulerConfig
from portal.scheduling.services import (
    _validate_conf,
    _validate_conf_shallow,
    scheduler_config_activate,
    scheduler_config_create,
)
from portal.tenants.management.commands.seed_demo import DEMO_SCHEDULER_CONF
from tests.factories import VALID_CONF_TEXT, SchedulerConfigFactory

pytestmark = pytest.mark.django_db


class TestSchedulerConfigCreate:
    def test_versions_increase_and_only_the_newest_is_active(self, staff):
        first = scheduler_config_create(text=VALID_CONF_TEXT, actor=staff)
        second = scheduler_config_create(text=DEMO_SCHEDULER_CONF, actor=staff, comment="demo")
        first.refresh_from_db()
        assert (first.version, second.version) == (1, 2)
        assert first.active is False
        assert second.active is True
        assert second.created_by == staff
        assert SchedulerConfig.objects.filter(active=True).count() == 1

    def test_inactive_draft(self, staff):
        active = scheduler_config_create(text=VALID_CONF_TEXT, actor=staff)
        draft = scheduler_config_create(text=VALID_CONF_TEXT, actor=staff, activate=False)
        active.refresh_from_db()
        assert (active.active, draft.active, draft.version) == (True, False, 2)

    @pytest.mark.parametrize(
        "text",
        [
            "actions: [unclosed",
            "- a list",
            "tiers: []",
            'actions: "allocate"\ntiers: "not a list"',
        ],
    )
    def test_invalid_text_refused(self, staff, text):
        with pytest.raises(ValidationError) as info:
            scheduler_config_create(text=text, actor=staff)
        assert list(info.value.message_dict) == ["text"]
        assert not SchedulerConfig.objects.exists()

    def test_researcher_refused(self, researcher):
        with pytest.raises(PermissionDenied, match=services.CONFIG_EDIT_FORBIDDEN):
            scheduler_config_create(text=VALID_CONF_TEXT, actor=researcher)

    def test_system_actor(self):
        assert scheduler_config_create(text=VALID_CONF_TEXT, actor=None).created_by is None


class TestSchedulerConfigActivate:
    def test_switches_the_active_version(self, staff):
        first = scheduler_config_create(text=VALID_CONF_TEXT, actor=staff)
        second = scheduler_config_create(text=VALID_CONF_TEXT, actor=staff)
        first = scheduler_config_activate(config=first, actor=staff)
        second.refresh_from_db()
        assert (first.active, second.active) == (True, False)

    def test_activating_the_active_one_keeps_it(self, staff):
        config = scheduler_config_create(text=VALID_CONF_TEXT, actor=staff)
        assert scheduler_config_activate(config=config, actor=staff).active is True

    def test_database_allows_one_active_row_only(self):
        SchedulerConfigFactory(active=True)
        with pytest.raises(IntegrityError), transaction.atomic():
            SchedulerConfigFactory(active=True)

    def test_researcher_refused(self, researcher):
        config = SchedulerConfigFactory()
        with pytest.raises(PermissionDenied):
            scheduler_config_activate(config=config, actor=researcher)


class TestValidateConf:
    def test_demo_conf_is_valid(self):
        _validate_conf(DEMO_SCHEDULER_CONF)

    def test_falls_back_to_shallow_check_without_core(self, monkeypatch):
        monkeypatch.setattr(services, "CORE_CONFIG_MODULE", "scheduler.core.does_not_exist")
        _validate_conf(VALID_CONF_TEXT)
        with pytest.raises(ValidationError) as info:
            _validate_conf("actions: 3\ntiers: []")
        assert info.value.message_dict == {"text": [services.CONF_ACTIONS_NOT_A_STRING]}

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("- a", services.CONF_NOT_A_MAPPING),
            ("actions: [a]\ntiers: []", services.CONF_ACTIONS_NOT_A_STRING),
            ('actions: "allocate"', services.CONF_TIERS_NOT_A_LIST),
        ],
    )
    def test_shallow_messages(self, text, message):
        with pytest.raises(ValidationError) as info:
            _validate_conf_shallow(text)
        assert info.value.message_dict == {"text": [message]}

    def test_shallow_rejects_bad_yaml(self):
        with pytest.raises(ValidationError) as info:
            _validate_conf_shallow("a: [")
        assert info.value.message_dict["text"][0].startswith("not valid YAML")

import importlib
from typing import Any

import yaml
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Max

from .access import can_change_scheduler_config
from .models import SchedulerConfig

CONF_NOT_YAML = "not valid YAML: {error}"
CONF_NOT_A_MAPPING = "the configuration must be a YAML mapping"
CONF_ACTIONS_NOT_A_STRING = 'actions must be a string such as "enqueue, allocate, backfill"'
CONF_TIERS_NOT_A_LIST = "tiers must be a list of tiers, each with a list of plugins"
CONFIG_EDIT_FORBIDDEN = "Only a site admin may change the scheduler configuration."
CONF_HARD_FEASIBILITY = (
    "Whatever the conf says, the scheduler applies the node checks the kubelet enforces: "
    "resources, pod count, node selector and required node affinity, NoSchedule and NoExecute "
    "taints. A conf without an enabled predicates plugin gets one added."
)
CONF_ADDS_PREDICATES = (
    "tiers: no enabled predicates plugin; the scheduler adds one, so node selectors, required "
    "node affinity and NoSchedule/NoExecute taints still apply (as the kubelet would enforce)"
)
PREDICATES_PLUGIN = "predicates"

# The real parser lives in the pure scheduler core; it is imported lazily so the portal
# works (with a shallow check) while the core is being written.
CORE_CONFIG_MODULE = "scheduler.core.config"


def _validate_conf(text: str) -> None:
    """Raise ValidationError({"text": ...}) if `text` is not a usable scheduler conf."""
    try:
        core_config = importlib.import_module(CORE_CONFIG_MODULE)
    except ImportError:
        core_config = None
    parse = getattr(core_config, "parse_conf_text", None)
    if parse is not None:
        from .conf_problems import conf_problems

        # Every problem at once, each with its line and the core's field path.
        problems = conf_problems(text)
        if problems:
            raise ValidationError({"text": problems})
        return
    _validate_conf_shallow(text)


def conf_lacks_predicates(conf: Any) -> bool:
    """Whether a parsed conf (scheduler.core.config.SchedulerConf) leaves out the predicates
    the kubelet would enforce: the cycle then adds them (scheduler/adapters/feasibility.py)."""
    option = conf.plugin(PREDICATES_PLUGIN)
    return option is None or not option.enabled("enablePredicate")


def scheduler_config_notes(*, text: str) -> list[str]:
    """What an admin should know about a valid conf that the scheduler will not run as written."""
    from scheduler.core.config import parse_conf_text

    return [CONF_ADDS_PREDICATES] if conf_lacks_predicates(parse_conf_text(text)) else []


def _validate_conf_shallow(text: str) -> None:
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValidationError({"text": CONF_NOT_YAML.format(error=error)}) from error
    if not isinstance(data, dict):
        raise ValidationError({"text": CONF_NOT_A_MAPPING})
    if not isinstance(data.get("actions"), str):
        raise ValidationError({"text": CONF_ACTIONS_NOT_A_STRING})
    if not isinstance(data.get("tiers"), list):
        raise ValidationError({"text": CONF_TIERS_NOT_A_LIST})


def _check_actor(actor: AbstractBaseUser | None) -> None:
    # None: the system itself (migrations, seed commands), not a user.
    if actor is not None and not can_change_scheduler_config(actor):
        raise PermissionDenied(CONFIG_EDIT_FORBIDDEN)


@transaction.atomic
def scheduler_config_create(
    *,
    text: str,
    actor: AbstractBaseUser | None,
    activate: bool = True,
    comment: str = "",
) -> SchedulerConfig:
    """Store a new version of the scheduler conf (validated) and make it active if asked."""
    _check_actor(actor)
    _validate_conf(text)
    # Lock the existing versions so two concurrent saves cannot take the same number.
    list(SchedulerConfig.objects.select_for_update().order_by("pk").values_list("pk"))
    latest = SchedulerConfig.objects.aggregate(latest=Max("version"))["latest"] or 0
    config = SchedulerConfig(
        version=latest + 1,
        text=text,
        active=False,
        comment=comment,
        created_by=actor if actor is not None and actor.is_authenticated else None,
    )
    config.full_clean()
    config.save()
    if activate:
        config = scheduler_config_activate(config=config, actor=actor)
    return config


@transaction.atomic
def scheduler_config_activate(
    *, config: SchedulerConfig, actor: AbstractBaseUser | None
) -> SchedulerConfig:
    """Make `config` the only active version."""
    _check_actor(actor)
    list(SchedulerConfig.objects.select_for_update().filter(active=True).values_list("pk"))
    SchedulerConfig.objects.filter(active=True).exclude(pk=config.pk).update(active=False)
    SchedulerConfig.objects.filter(pk=config.pk).update(active=True)
    config.refresh_from_db()
    return config

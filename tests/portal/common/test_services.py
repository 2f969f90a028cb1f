import pytest
from django.core.exceptions import ValidationError

from portal.common.services import model_update
from tests.factories import TenantFactory

pytestmark = pytest.mark.django_db


def test_model_update_saves_only_changed_fields():
    tenant = TenantFactory(name="nlp", display_name="NLP")
    before = tenant.updated_at
    tenant, changed = model_update(
        instance=tenant, fields=["display_name"], data={"display_name": "Language"}
    )
    tenant.refresh_from_db()
    assert changed is True
    assert tenant.display_name == "Language"
    assert tenant.updated_at >= before


def test_model_update_without_change_is_a_no_op():
    tenant = TenantFactory(name="nlp", display_name="NLP")
    _, changed = model_update(
        instance=tenant, fields=["display_name"], data={"display_name": "NLP"}
    )
    assert changed is False


def test_model_update_validates():
    tenant = TenantFactory(name="nlp")
    with pytest.raises(ValidationError) as info:
        model_update(instance=tenant, fields=["name"], data={"name": "Not A Label"})
    assert "name" in info.value.message_dict

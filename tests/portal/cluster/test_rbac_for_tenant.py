"""deploy/tenant-namespace.yaml and `python -m portal.cluster.rbac_for_tenant`: a tenant's
namespace gets the grants the shared jobs namespace has, under the name the portal uses."""

import io
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from django.test import override_settings

from jobspec.podsecurity import ENFORCE_LABEL
from portal.cluster.rbac_for_tenant import TEMPLATE, main, tenant_manifests
from tests.factories import TenantFactory

RBAC = Path(__file__).resolve().parents[3] / "deploy" / "rbac.yaml"
PER_TENANT = {"KUBERNETES_NAMESPACE_PER_TENANT": True, "KUBERNETES_NAMESPACE_PREFIX": "gpu-"}


def by_kind_and_name(documents):
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in documents}


def test_a_tenant_namespace_grants_what_the_shared_jobs_namespace_grants():
    shared = by_kind_and_name(
        doc
        for doc in yaml.safe_load_all(RBAC.read_text())
        if doc and doc["metadata"].get("namespace") == "gpu-jobs"
    )
    tenant = by_kind_and_name(
        doc for doc in tenant_manifests("gpu-jobs") if doc["kind"] != "Namespace"
    )
    assert (
        set(tenant)
        == set(shared)
        == {
            ("Role", "gpu-portal-scheduler"),
            ("RoleBinding", "gpu-portal-scheduler"),
            ("Role", "gpu-portal-log-reader"),
            ("RoleBinding", "gpu-portal-log-reader"),
        }
    )
    for key, doc in tenant.items():
        for field in ("roleRef", "subjects"):
            assert doc.get(field) == shared[key].get(field), (key, field)
        assert doc.get("rules", []) == shared[key].get("rules", []), key


def test_the_template_names_its_namespace_only_by_the_placeholder():
    text = TEMPLATE.read_text()
    documents = [doc for doc in yaml.safe_load_all(text) if doc]
    assert {
        doc["metadata"].get("namespace", doc["metadata"]["name"])
        for doc in documents
        if doc["kind"] != "Namespace"
    } == {"NAMESPACE"}
    assert "gpu-jobs" not in text
    (namespace,) = [doc for doc in documents if doc["kind"] == "Namespace"]
    assert namespace["metadata"]["labels"][ENFORCE_LABEL] == "LEVEL"


@pytest.mark.django_db
def test_it_prints_the_namespace_and_grants_of_each_tenant_named():
    TenantFactory(name="vision", security_level="restricted")
    TenantFactory(name="nlp")
    out = io.StringIO()
    with override_settings(**PER_TENANT):
        assert main(["vision"], out=out) == 0
    documents = list(yaml.safe_load_all(out.getvalue()))
    assert [(doc["kind"], doc["metadata"].get("namespace")) for doc in documents] == [
        ("Namespace", None),
        ("Role", "gpu-vision"),
        ("RoleBinding", "gpu-vision"),
        ("Role", "gpu-vision"),
        ("RoleBinding", "gpu-vision"),
    ]
    assert documents[0]["metadata"]["name"] == "gpu-vision"
    assert documents[0]["metadata"]["labels"][ENFORCE_LABEL] == "restricted"
    for document in documents:
        kubernetes_validate.validate(document, "1.31.0", strict=True)

    out = io.StringIO()
    with override_settings(**PER_TENANT):
        assert main(["--all"], out=out) == 0
    namespaces = [
        (doc["metadata"]["name"], doc["metadata"]["labels"][ENFORCE_LABEL])
        for doc in yaml.safe_load_all(out.getvalue())
        if doc["kind"] == "Namespace"
    ]
    assert namespaces == [("gpu-nlp", "baseline"), ("gpu-vision", "restricted")]


@pytest.mark.django_db
def test_an_unknown_tenant_is_an_error_naming_it_and_prints_nothing():
    TenantFactory(name="vision")
    out, err = io.StringIO(), io.StringIO()
    assert main(["vision", "speech"], out=out, err=err) == 1
    assert "no tenant named speech" in err.getvalue()
    assert out.getvalue() == ""


@pytest.mark.django_db
def test_with_one_shared_namespace_it_says_so_at_the_least_restrictive_level_of_all():
    TenantFactory(name="vision", security_level="restricted")
    TenantFactory(name="hpc", security_level="privileged")
    out, err = io.StringIO(), io.StringIO()
    assert main(["vision"], out=out, err=err) == 0
    assert "KUBERNETES_NAMESPACE_PER_TENANT is off" in err.getvalue()
    documents = list(yaml.safe_load_all(out.getvalue()))
    assert {doc["metadata"].get("namespace") for doc in documents} == {None, "gpu-jobs"}
    assert documents[0]["metadata"]["labels"][ENFORCE_LABEL] == "privileged"

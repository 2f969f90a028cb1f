"""Shared fixtures: two tenants, one user per role, a 4 x 8-GPU cluster."""

import pytest
from django.test import Client
from django.test.testcases import LiveServerThread

from portal.devserver.server import NoDelayThreadedWSGIServer
from portal.tenants.models import Membership
from tests.factories import (
    DEFAULT_PASSWORD,
    MembershipFactory,
    NodeFactory,
    QueueFactory,
    StaffFactory,
    TenantFactory,
    UserFactory,
)

# The live server (browser tests, Schemathesis) answers without Nagle's 40 ms stalls, as
# ./dev run's server does (portal/devserver/server.py).
LiveServerThread.server_class = NoDelayThreadedWSGIServer


@pytest.fixture
def password() -> str:
    return DEFAULT_PASSWORD


@pytest.fixture
def user(db):
    return UserFactory()


@pytest.fixture
def nlp(db):
    return TenantFactory(name="nlp")


@pytest.fixture
def vision(db):
    return TenantFactory(name="vision")


@pytest.fixture
def nlp_queue(nlp):
    return QueueFactory(tenant=nlp, name="nlp-train", weight=2)


@pytest.fixture
def vision_queue(vision):
    return QueueFactory(tenant=vision, name="vision-train", weight=1)


@pytest.fixture
def researcher(nlp):
    """A researcher in nlp only."""
    user = UserFactory(username="researcher")
    MembershipFactory(user=user, tenant=nlp, role=Membership.Role.RESEARCHER)
    return user


@pytest.fixture
def lead(nlp, vision):
    """Lead of nlp and a researcher in vision."""
    user = UserFactory(username="lead")
    MembershipFactory(user=user, tenant=nlp, role=Membership.Role.LEAD)
    MembershipFactory(user=user, tenant=vision, role=Membership.Role.RESEARCHER)
    return user


@pytest.fixture
def outsider(vision):
    """A researcher in vision only."""
    user = UserFactory(username="outsider")
    MembershipFactory(user=user, tenant=vision, role=Membership.Role.RESEARCHER)
    return user


@pytest.fixture
def staff(db):
    return StaffFactory(username="siteadmin")


@pytest.fixture
def cluster(db):
    """Four schedulable nodes of 8 GPUs: 32 GPUs, 384000 millicores."""
    return [NodeFactory(name=f"gpu-worker-{i}") for i in range(1, 5)]


def _client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def researcher_client(researcher):
    return _client_for(researcher)


@pytest.fixture
def lead_client(lead):
    return _client_for(lead)


@pytest.fixture
def staff_client(staff):
    return _client_for(staff)

"""One formatter for cores, GiB and relative times on every page."""

from datetime import UTC, datetime, timedelta

import pytest
from django.template import Context, Template

from portal.common import units
from portal.common.palette import queue_colour

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("millis", "text"),
    [(96000, "96 cores"), (500, "0.5 cores"), (1000, "1 core"), (0, "0 cores"), (1, "0.001 cores")],
)
def test_cores(millis, text):
    assert units.cores(millis) == text


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (64 * units.GiB, "64 GiB"),
        (512 * 1024**2, "0.5 GiB"),
        (1024**4, "1024 GiB"),
        (0, "0 GiB"),
        (int(1.25 * units.GiB), "1.25 GiB"),
    ],
)
def test_gib(size, text):
    assert units.gib(size) == text


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(seconds=5), "just now"),
        (timedelta(minutes=5, seconds=30), "5 min ago"),
        (timedelta(hours=3), "3 h ago"),
        (timedelta(days=3), "3 days ago"),
        (timedelta(seconds=-10), "just now"),
    ],
)
def test_ago(delta, text):
    assert units.ago(NOW - delta, NOW) == text


def test_missing_values():
    assert units.cores(None) == units.gib(None) == "–"
    assert units.ago(None, NOW) == "never"


def test_template_filters():
    template = Template(
        "{% load portal_ui %}{{ cpu|cores }}/{{ memory|gib }}/{{ seen|ago }}/{{ queue|queue_colour }}"
    )
    text = template.render(
        Context({"cpu": 8000, "memory": 64 * units.GiB, "seen": None, "queue": 3})
    )
    assert text == f"8 cores/64 GiB/never/{queue_colour(3)}"


@pytest.mark.parametrize(
    ("millis", "text"),
    [(8000, "8"), (500, "0.5"), (1234, "1.234"), (0, "0"), (80, "0.08"), (10**30 + 1, None)],
)
def test_cpu_text_is_what_the_cpu_field_reads_back_exactly(millis, text):
    from portal.common.fields import parse_cpu

    if text is not None:
        assert units.cpu_text(millis) == text
    assert parse_cpu(units.cpu_text(millis)) == millis


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (64 * units.GiB, "64Gi"),
        (512 * 1024**2, "512Mi"),
        (3 * 1024, "3Ki"),
        (1000, "1000b"),
        (0, "0"),
    ],
)
def test_memory_text_is_what_the_memory_field_reads_back_exactly(size, text):
    from portal.common.fields import parse_memory

    assert units.memory_text(size) == text
    assert parse_memory(text) == size


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(45, "45 s"), (2400, "40 min"), (5400, "1 h 30 min"), (90, "1 min 30 s"), (7200, "2 h")],
)
def test_duration(seconds, text):
    assert units.duration(seconds) == text


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (32, "32 GPUs"),
        (1, "1 GPU"),
        (1.0, "1 GPU"),
        (0.25, "0.25 GPUs"),
        (14.5, "14.5 GPUs"),
        (0, "0 GPUs"),
    ],
)
def test_gpus(amount, text):
    assert units.gpus(amount) == text

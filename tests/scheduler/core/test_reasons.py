"""The words the pending reasons are made of: counts agree with their nouns."""

import pytest

from scheduler.core.reasons import capability_text, describe, free_text
from scheduler.core.resources import CPU, GPU


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [
        (GPU, 1, "1 free GPU"),
        (GPU, 8, "8 free GPUs"),
        (GPU, 0.5, "0.5 free GPUs"),
        (CPU, 4000, "4 free cpu"),
    ],
)
def test_free_blocks_are_counted_in_the_right_number(name, value, text):
    assert free_text(name, value) == text


def test_one_gpu_is_one_gpu():
    assert describe(GPU, 1) == "1 GPU"
    assert describe(GPU, 2) == "2 GPUs"


@pytest.mark.parametrize(
    ("allocated", "text"),
    [
        (8, "at capability 8/8 GPUs"),
        # The share reached the capability; the allocation has not: not "at capability 5/8".
        (5, "capped at 8 GPUs with 5 allocated"),
        (1, "capped at 8 GPUs with 1 allocated"),
    ],
)
def test_a_queue_is_at_its_capability_only_when_it_has_it_all(allocated, text):
    assert capability_text(GPU, allocated, 8) == text

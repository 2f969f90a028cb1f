"""The words the pending reasons are made of: counts agree with their nouns."""

import pytest

from scheduler.core.reasons import describe, free_text
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

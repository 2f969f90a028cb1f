"""What a job asks of GPUs, in the words every page, the API and the CLI show: a GPU-memory
request says what it asked and what it counts as."""

from types import SimpleNamespace

import pytest

from jobspec.gpushare import GpuAsk, gpu_ask, pod_gpu_ask

CARD_40G = 40 * 1024


def task(replicas=1, gpus=0, gpu_milli=0, gpu_memory_mib=0):
    return SimpleNamespace(
        replicas=replicas, gpus=gpus, gpu_milli=gpu_milli, gpu_memory_mib=gpu_memory_mib
    )


@pytest.mark.parametrize(
    ("tasks", "text", "number"),
    [
        ([task(replicas=2, gpus=4)], "8", 8),
        ([task(replicas=2, gpu_milli=250)], "0.5", 0.5),
        # 10 GiB of a 40 GiB card: a quarter, as the cycle counts it before placement
        ([task(gpu_memory_mib=10240)], "0.25 (10 GiB GPU memory)", 0.25),
        ([task(replicas=4, gpu_memory_mib=10240)], "1 (40 GiB GPU memory)", 1),
        # a share of compute and of memory holds the larger
        ([task(gpu_milli=500, gpu_memory_mib=10240)], "0.5 (10 GiB GPU memory)", 0.5),
        ([task(gpus=1), task(replicas=2, gpu_memory_mib=5120)], "1.25 (10 GiB GPU memory)", 1.25),
        ([], "0", 0),
    ],
)
def test_a_jobs_gpus_say_what_was_asked(tasks, text, number):
    ask = gpu_ask(tasks, CARD_40G)
    assert ask.text == str(ask) == text
    assert ask.number == number


def test_gpu_memory_says_how_it_is_counted():
    assert gpu_ask([task(gpus=2)], CARD_40G).note == ""
    note = gpu_ask([task(gpu_memory_mib=10240)], CARD_40G).note
    assert note.startswith("GPU memory counts as its share of a 40 GiB GPU, the smallest")
    unknown = gpu_ask([task(gpu_memory_mib=10240)], 0)
    assert unknown.text == "1 (10 GiB GPU memory)"  # the most it could cost
    assert "no GPU in the cluster reports its memory" in unknown.note


def test_one_pod_of_a_role():
    role = task(replicas=3, gpu_memory_mib=10240)
    assert pod_gpu_ask(role, CARD_40G) == GpuAsk(milli=250, memory_mib=10240, device_mib=CARD_40G)
    assert pod_gpu_ask(task(replicas=3, gpus=2), CARD_40G).text == "2"

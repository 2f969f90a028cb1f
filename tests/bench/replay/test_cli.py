import json

import pytest

from bench.cli.replay_openb import parse_weights
from scheduler.__main__ import main


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("cpu=1,memory=1", "missing gpu"),
        ("cpu=1,memory=1,gpu=x", "gpu must be an integer"),
        ("cpu=1,memory=-1,gpu=1", "memory must be >= 0"),
        ("cpu=1,disk=1,gpu=1", "expected cpu=N,memory=N,gpu=N"),
        ("cpu=0,memory=0,gpu=0", "at least one weight"),
    ],
)
def test_bad_binpack_weights_are_named(text, error):
    weights, message = parse_weights(text)
    assert weights is None
    assert error in message


def test_binpack_weights_parse():
    assert parse_weights("gpu=20, cpu=2,memory=0") == ({"cpu": 2, "memory": 0, "gpu": 20}, None)


def test_replay_openb_rejects_bad_input_before_running(capsys, tmp_path):
    assert main(["replay-openb", "--policy", "bestfit,nope"]) == 2
    assert "unknown policy 'nope'" in capsys.readouterr().err
    assert main(["replay-openb", "--pods", str(tmp_path / "missing.csv")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["replay-openb", "--seeds", "0"]) == 2
    assert "--seeds" in capsys.readouterr().err
    assert main(["replay-openb", "--binpack-weights", "cpu=1"]) == 2
    assert "--binpack-weights: missing" in capsys.readouterr().err


def test_replay_openb_on_a_tiny_list(capsys, tmp_path):
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,8,T4\nn1,32000,65536,2,T4\n"
    )
    pods = tmp_path / "pods.csv"
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
        "p0,4000,1024,1,1000,\np1,2000,1024,1,500,\np2,8000,4096,0,0,\np3,4000,1024,2,1000,T4\n"
    )
    argv = ["replay-openb", "--nodes", str(nodes), "--pods", str(pods), "--seeds", "2"]
    assert main([*argv, "--policy", "fgd-pack,binpack", "--published", str(tmp_path / "no")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["seeds"] == [42, 43]
    assert set(out["policies"]) == {"fgd-pack", "binpack"}
    assert len(out["arrived_percent"]) == 131
    assert out["policies"]["fgd-pack"]["alloc_at_end"] <= 100


@pytest.mark.parametrize(
    ("option", "value", "error"),
    [
        ("--modes", "fifo,lifo", "--modes: unknown mode 'lifo'"),
        ("--guarantee-fraction", "1.5", "--guarantee-fraction must be in (0, 1]"),
        ("--step", "0", "--step must be > 0"),
        ("--vc-scale", "0", "--vc-scale must be in (0, 1]"),
        ("--limit", "-1", "--limit must be >= 0"),
        ("--itp-gpus", "12", "--itp-gpus must be a positive multiple of 8"),
        ("--window", "2017-10-13", "--window must be FROM:TO"),
        ("--window", "2017-10-14:2017-10-13", "--window must be FROM:TO"),
        ("--window", "2017-13-01:2017-10-13", "--window must be FROM:TO"),
        ("--tenants", "-1", "--tenants must be >= 0"),
        ("--modes", "shared,tree", "--modes tree needs --tenants N"),
        ("--estimate-every", "0", "--estimate-every must be >= 1"),
        ("--plan-max-instants", "0", "--plan-max-instants must be >= 1"),
        ("--plan-growth", "-0.5", "--plan-growth must be >= 0"),
    ],
)
def test_replay_queues_names_the_bad_option(capsys, option, value, error):
    assert main(["replay-queues", option, value]) == 2
    captured = capsys.readouterr()
    assert error in captured.err
    assert captured.out == ""


def test_replay_queues_estimates_only_in_the_shared_mode(capsys):
    assert main(["replay-queues", "--modes", "fifo,sjf", "--estimate"]) == 2
    assert "--estimate needs the shared mode in --modes" in capsys.readouterr().err

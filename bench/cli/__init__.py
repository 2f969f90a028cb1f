"""The benchmark and replay commands of ``python -m scheduler`` (bench, soak, replay-openb,
replay-queues); one module per command, registered by scheduler/__main__.py."""

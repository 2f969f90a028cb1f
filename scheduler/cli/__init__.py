"""Command-line entry points of ``python -m scheduler`` that belong to the scheduler itself
(scenario); the benchmark and replay commands are in bench/cli."""

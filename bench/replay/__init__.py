"""Trace-replay benchmarks for the scheduler.

``openb``: the FGD methodology (Weng et al., ATC '23) on the Alibaba cluster-trace-gpu-v2023
with a per-device ledger of its own (fractional GPUs are not in the core yet).
``queues``: Philly / ITP job traces replayed through isolated FIFO/SJF partitions and through
the real core (``run_cycle``) as one shared cluster with one queue per virtual cluster.
"""

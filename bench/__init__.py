"""Benchmarks, load tests and research simulators: everything that measures the portal and the
scheduler rather than runs them. Run from the repository root as ``python -m bench.<module>``
(docs/performance.md, docs/load.md, docs/replay). Runtime code never imports this package
(an import-linter contract); the documented command names ``python -m scheduler
bench|replay-openb|replay-queues|soak``, ``python -m scheduler.adapters.bench_cycle`` and
``python -m portal.dashboards.bench`` are kept by entry points that hand over to it.
"""

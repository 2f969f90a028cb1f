"""``python -m scheduler.adapters.bench_cycle``: the documented name of the whole-cycle
benchmark, whose code is bench/cycle.py (see there). Nothing imports this module."""

import sys

if __name__ == "__main__":
    from bench.cycle import main

    sys.exit(main())

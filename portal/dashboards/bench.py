"""``python -m portal.dashboards.bench``: the documented name of the page benchmark, whose
code is bench/pages.py (see there). Nothing imports this module."""

import sys

if __name__ == "__main__":
    from bench.pages import main

    sys.exit(main())

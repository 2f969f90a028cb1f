import sys

from portal.cli.main import main

sys.exit(main())

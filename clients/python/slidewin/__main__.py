"""`python -m slidewin health ...`: see `slidewin.health`."""

import sys

from .health import main

if __name__ == "__main__":
    sys.exit(main())

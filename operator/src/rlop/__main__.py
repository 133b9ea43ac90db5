"""`python -m rlop` is `rlop`."""

import sys

from rlop.cli import main

sys.exit(main())

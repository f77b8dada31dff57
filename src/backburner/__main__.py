"""`python -m backburner`: the same entry point as the installed command."""

import sys

from .entry import main

sys.exit(main())

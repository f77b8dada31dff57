"""`python -m backburner`: the same entry point as the installed command."""

import sys

try:
    from .entry import main
except KeyboardInterrupt:  # ^C while the program itself loads: nothing was done yet
    print("backburner: interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())

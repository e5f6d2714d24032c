"""`python -m ablations.cli ...`: the `bioablate` command."""

import sys

from ablations.cli import main

sys.exit(main())

"""``python -m parsim.cli``: the ``parsim`` command."""

import sys

from parsim.cli import main

sys.exit(main())

"""``python -m engine.cli``: the ``isorag`` command."""

import sys

from engine.cli import main

sys.exit(main())

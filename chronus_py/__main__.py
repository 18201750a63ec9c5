"""``python -m chronus_py`` is the ``chronus`` command."""

import sys

from chronus_py.cli import main

sys.exit(main())

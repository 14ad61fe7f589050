"""``python -m torchtrt_plugins`` is the ``torchtrt-plugins`` command."""

import sys

from .cli import main

sys.exit(main())

"""Imports the out-of-tree example package (examples/myops) the way its own tests see it: from its folder."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "myops"


def import_myops():
    if not EXAMPLE.is_dir():  # tests copied away from the checkout, e.g. to run against an installed wheel
        import pytest

        pytest.skip(f"the example package is not here ({EXAMPLE})", allow_module_level=True)
    if str(EXAMPLE) not in sys.path:
        sys.path.insert(0, str(EXAMPLE))
    return importlib.import_module("myops")

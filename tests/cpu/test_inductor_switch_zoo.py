"""The Inductor switch's benchmark on its zoo model (``benchmarks.inductor_switch``, GroundingDino with our ATen
fallback converters off): ``aten.isin``, ``aten.cummax`` and ``aten.cummin`` each become one generated op, and both
graphs equal the model on CPU."""

from __future__ import annotations

import sys

import pytest
from torchvision_site import require_torchvision

require_torchvision()  # before torchtrt_plugins.vision, which stands in for its ops where they do not load
if "torchtrt_plugins.vision" in sys.modules and "torchvision" not in sys.modules:
    pytest.skip("needs torchvision on the path before torchtrt_plugins.vision is imported", allow_module_level=True)

from test_inductor_switch import check_conversion  # noqa: E402


def test_grounding_dino_gets_one_generated_op_per_op_without_a_converter():
    check_conversion("GroundingDinoModel", None, generated=3)

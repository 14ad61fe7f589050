"""``torchtrt-plugins zoo --time`` (``benchmarks.zoo_timing``) on CPU: a zoo model's rows, eager and converted, in the
record format; outputs that differ are a mismatch, not a time. On the GPU: tests/gpu/test_zoo_gpu.py and the run the
lead makes."""

from __future__ import annotations

import sys

import pytest
import torch
from torchvision_site import require_torchvision

require_torchvision()  # before torchtrt_plugins.vision, which stands in for its ops where they do not load
if "torchtrt_plugins.vision" in sys.modules and "torchvision" not in sys.modules:
    pytest.skip("needs torchvision on the path before torchtrt_plugins.vision is imported", allow_module_level=True)

from torchtrt_plugins import cli  # noqa: E402
from torchtrt_plugins.benchmarks import results, zoo_timing  # noqa: E402


def test_rows_of_a_model_eager_and_converted(tmp_path):
    csv = tmp_path / "zoo.csv"
    assert cli.main(["zoo", "--time", "--quick", "--models", "deform_conv2d", "--csv", str(csv)]) == 0
    rows = results.read_results(csv)
    assert [(r["op"], r["provider"], r["shape"], r["timer"]) for r in rows] == [
        ("zoo/deform_conv2d", provider, "1x3x16x16", "do_bench") for provider in zoo_timing.PROVIDERS
    ]
    assert all(float(r["median_ms"]) > 0 for r in rows)


def test_outputs_that_differ_are_a_mismatch():
    same = (torch.ones(3), torch.zeros(2, 2))
    assert zoo_timing.mismatch(same, tuple(t.clone() for t in same)) is None
    assert "output 1" in zoo_timing.mismatch(same, (torch.ones(3), torch.ones(2, 2)))
    assert "1 outputs, eager has 2" in zoo_timing.mismatch(same[:1], same)


def test_unknown_models_are_named():
    with pytest.raises(ValueError, match="unknown models \\['yolo'\\]"):
        zoo_timing.run(["yolo"], device="cpu")

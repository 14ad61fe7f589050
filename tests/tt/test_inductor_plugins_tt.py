"""Inductor plugins inside Torch-TensorRT's own pipeline: a model whose unsupported ops (cummax, bucketize,
special.erfcx; ``tests/inductor_cases.py``) have no converter partitions into several engines without the switch and
into one with it (the segment becomes one generated op, converted to a plugin layer); the plan builds."""

from __future__ import annotations

import torch
from inductor_cases import LongTail
from tt_helpers import dryrun, require_plugin_library, serialized_engine

from torchtrt_plugins import inductor_plugins, zoo


def _partition(on: bool) -> tuple[zoo.Partition, torch.Tensor, torch.Tensor]:
    model, x = LongTail().eval(), torch.randn(4, 16)
    with inductor_plugins.switched(on):
        partitioned = dryrun(torch.export.export(model, (x,)), [x])
    return zoo.count(partitioned), partitioned(x), model(x)


def test_without_the_switch_the_unsupported_ops_cut_the_engine():
    counted, _, _ = _partition(False)
    assert counted.engines > 1, counted
    assert {"aten.cummax.default", "aten.bucketize.Tensor"} <= set(counted.fallback), counted.fallback


def test_with_the_switch_the_model_is_one_engine():
    require_plugin_library()
    counted, partitioned_out, eager_out = _partition(True)
    assert counted.engines == 1 and not counted.fallback, counted.fallback_text()
    torch.testing.assert_close(partitioned_out, eager_out)


def test_with_the_switch_the_plan_builds():
    require_plugin_library()
    model, x = LongTail().eval(), torch.randn(4, 16)
    with inductor_plugins.switched(True):
        plan = serialized_engine(torch.export.export(model, (x,)), [x])
    assert len(plan) > 0 and b"ttp_inductor" in bytes(plan)

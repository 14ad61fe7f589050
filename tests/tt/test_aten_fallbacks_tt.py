"""Our converters of ATen nodes Torch-TensorRT 2.13 rejects (``torchtrt_plugins.converters.aten_fallbacks``), inside
Torch-TensorRT's pipeline: ``avg_pool2d(ceil_mode=True)`` joins the engine where its windows are the floor mode's, stays
in PyTorch where they are not, and the plan builds; Torch-TensorRT's own converter keeps the floor-mode pools."""

from __future__ import annotations

import pytest
import torch
import tt_helpers as tt

AVG_POOL = "aten.avg_pool2d.default"


class Pool(torch.nn.Module):
    def __init__(self, ceil_mode: bool):
        super().__init__()
        self.pool = torch.nn.AvgPool2d(2, 2, 0, ceil_mode=ceil_mode)

    def forward(self, x):
        return self.pool(x.relu()) * 2


def _pools_by_place(partitioned: torch.fx.GraphModule) -> dict[str, int]:
    where = {"trt": 0, "torch": 0}
    for name, targets in tt.targets_by_submodule(partitioned).items():
        where["trt" if "_run_on_acc" in name else "torch"] += targets.count(AVG_POOL)
    return where


@pytest.mark.parametrize(
    "ceil_mode, size, where",
    [(True, 16, {"trt": 1, "torch": 0}), (True, 15, {"trt": 0, "torch": 1}), (False, 15, {"trt": 1, "torch": 0})],
    ids=["ceil_is_floor", "ceil_adds_a_window", "floor_mode"],
)
def test_ceil_mode_avg_pool_joins_the_engine_where_it_is_the_floor_mode(ceil_mode, size, where):
    model, x = Pool(ceil_mode).eval(), torch.randn(1, 4, size, size)
    partitioned = tt.dryrun(torch.export.export(model, (x,)), [x])
    assert _pools_by_place(partitioned) == where
    torch.testing.assert_close(partitioned(x), model(x))


def test_without_us_ceil_mode_stays_in_pytorch():
    from torchtrt_plugins.converters import aten_fallbacks

    model, x = Pool(True).eval(), torch.randn(1, 4, 16, 16)
    with aten_fallbacks.disabled():
        partitioned = tt.dryrun(torch.export.export(model, (x,)), [x])
    assert _pools_by_place(partitioned) == {"trt": 0, "torch": 1}


def test_ceil_mode_avg_pool_plan_builds():
    model, x = Pool(True).eval(), torch.randn(1, 4, 16, 16)
    plan = tt.serialized_engine(torch.export.export(model, (x,)), [x])
    assert len(plan) > 0

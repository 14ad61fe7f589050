"""Inductor plugins inside Torch-TensorRT's own pipeline: a model whose unsupported ops (special.erfcx, logcumsumexp,
bucketize; ``tests/inductor_cases.py``) have no converter partitions into several engines without the switch and
into one with it (the segment becomes one generated op, converted to a plugin layer), with a static shape and with a
dynamic batch (Torch-TensorRT's ``Input(min_shape, opt_shape, max_shape)``: one generated op for the whole range,
equal to eager at several batch sizes); the plans build."""

from __future__ import annotations

import torch
from inductor_cases import BATCH_MAX, BATCH_MIN, BATCH_OPT, LongTail, batch_dim
from tt_helpers import dryrun, require_plugin_library, serialized_engine, targets_by_submodule, torch_tensorrt

from torchtrt_plugins import inductor_plugins, zoo


def _partition(on: bool) -> tuple[zoo.Partition, torch.Tensor, torch.Tensor]:
    model, x = LongTail().eval(), torch.randn(4, 16)
    with inductor_plugins.switched(on):
        partitioned = dryrun(torch.export.export(model, (x,)), [x])
    return zoo.count(partitioned), partitioned(x), model(x)


def test_without_the_switch_the_unsupported_ops_cut_the_engine():
    counted, _, _ = _partition(False)
    assert counted.engines > 1, counted
    assert {"aten.logcumsumexp.default", "aten.bucketize.Tensor"} <= set(counted.fallback), counted.fallback


def test_the_benchmarks_no_converter_targets_are_what_falls_back_without_the_switch():
    # benchmarks.inductor_switch stands in for Torch-TensorRT's registry with this list where the GPU is
    from torchtrt_plugins.benchmarks import inductor_switch

    model = inductor_switch.MODELS["LongTail"]
    for size in model.sizes:
        program, _, inputs = model.export(size)
        with inductor_plugins.switched(False):
            counted = zoo.count(dryrun(program, list(inputs)))
        assert set(counted.fallback) == model.no_converter, (size, counted.fallback_text())


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


def _dynamic_batch() -> tuple[torch.export.ExportedProgram, list]:
    x = torch.randn(BATCH_OPT, 16)
    program = torch.export.export(LongTail().eval(), (x,), dynamic_shapes=({0: batch_dim()},))
    spec = torch_tensorrt().Input(min_shape=(BATCH_MIN, 16), opt_shape=(BATCH_OPT, 16), max_shape=(BATCH_MAX, 16))
    return program, [spec]


def test_with_the_switch_a_dynamic_batch_is_one_engine_equal_to_eager():
    require_plugin_library()
    program, inputs = _dynamic_batch()
    with inductor_plugins.switched(True):
        partitioned = dryrun(program, inputs)
    counted = zoo.count(partitioned)
    assert counted.engines == 1 and not counted.fallback, counted.fallback_text()
    in_engine = [t for name, ts in targets_by_submodule(partitioned).items() if "_run_on_acc" in name for t in ts]
    assert sum(t.startswith("ttp_inductor.segment_") for t in in_engine) == 1, in_engine
    model = LongTail().eval()
    for batch in (BATCH_MIN, 5, BATCH_MAX):
        x = torch.randn(batch, 16)
        torch.testing.assert_close(partitioned(x), model(x))


def test_with_the_switch_a_dynamic_batch_plan_builds():
    require_plugin_library()
    program, inputs = _dynamic_batch()
    with inductor_plugins.switched(True):
        plan = serialized_engine(program, inputs)
    assert len(plan) > 0 and b"ttp_inductor" in bytes(plan)

"""NVIDIA's builder (TensorRT-RTX) builds a plan holding each of our plugins, on CPU, with dynamic profiles.

TensorRT-RTX's builder does no tactic timing, so it builds without a GPU and calls every build-phase
method of the plugin (clone, output types and shapes, formats, attachToContext, configurePlugin,
workspace, tactics, serialization). The plugin layer is added through the test-only addPluginV3 adapter
(``tests/_nvidia/add_plugin_v3.py``): RTX's Python network has no plugin methods. A failed build names the
plugin and the errors TensorRT logged (which name the method). Running the plan needs a GPU (trt tier).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from _nvidia import add_plugin_v3

from torchtrt_plugins import converters
from torchtrt_plugins import registry as op_registry

Profile = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True)
class NetworkInput:
    name: str
    dtype: torch.dtype
    profile: Profile  # min, opt, max; the network input's dims are -1 where they differ


@dataclass(frozen=True)
class BuilderCase:
    id: str
    op: str
    #: the op's tensor inputs first, in order; then any input only used for its shape
    inputs: tuple[NetworkInput, ...]
    #: the op's arguments after its tensors (positional), given the network's tensors by input name
    args: Callable[[dict[str, Any]], tuple] = lambda tensors: ()
    #: outputs of the plugin layer marked as network outputs
    outputs: tuple[int, ...] = (0,)
    tags: tuple[str, ...] = field(default=())
    #: the op's tensor arguments after the network's, given as constants: the plugin takes them as weight fields
    weights: tuple[torch.Tensor, ...] = ()
    #: a quantized output: the op's last tensor argument (its scale) is this constant, and output 0 goes through an
    #: IDequantizeLayer by the same constant to FLOAT (an explicitly quantized network's consumer of it)
    dequantize_scale: float | None = None


def _dims(network: Any, tensor: Any, index: int, name: str) -> Any:
    """Dimension ``index`` of ``tensor`` as a 1-D INT64 shape tensor (a shape input)."""
    shape = network.add_shape(tensor)
    shape.name = f"{name}_shape"
    piece = network.add_slice(shape.get_output(0), (index,), (1,), (1,))
    piece.name = f"{name}_dim{index}"
    return piece.get_output(0)


CASES = (
    BuilderCase(
        "rms_norm-dynamic_rows-fp16",
        "rms_norm",
        (
            NetworkInput("x", torch.float16, ((1, 1, 256), (4, 7, 256), (16, 64, 256))),
            NetworkInput("w", torch.float16, ((256,),) * 3),
        ),
        args=lambda t: (1e-6,),
    ),
    BuilderCase(
        "rms_norm-dynamic_batch-bf16",
        "rms_norm",
        (
            NetworkInput("x", torch.bfloat16, ((1, 128), (8, 128), (64, 128))),
            NetworkInput("w", torch.bfloat16, ((128,),) * 3),
        ),
        args=lambda t: (1e-5,),
    ),
    BuilderCase(
        "rms_norm-weight_field-bf16",
        "rms_norm",
        (NetworkInput("x", torch.bfloat16, ((1, 96), (8, 96), (64, 96))),),
        args=lambda t: (1e-5,),
        weights=(torch.linspace(-2.0, 2.0, 96, dtype=torch.bfloat16),),
    ),
    BuilderCase(
        "pad_to-fields",
        "pad_to",
        (NetworkInput("x", torch.float32, ((1, 3, 1, 1), (2, 3, 13, 21), (4, 3, 64, 64))),),
        args=lambda t: (16, 17, 2.5),
    ),
    BuilderCase(
        "pad_to-shape_inputs",
        "pad_to",
        (
            NetworkInput("x", torch.float16, ((1, 3, 1, 1), (2, 3, 13, 21), (4, 3, 64, 64))),
            NetworkInput("like", torch.float16, ((1, 1, 1, 1), (1, 1, 16, 16), (1, 1, 128, 128))),
        ),
        args=lambda t: ("like:2", "like:3"),
        tags=("shape_inputs",),
    ),
    BuilderCase(
        "add_rms_norm-aliased-bf16",
        "add_rms_norm",
        (
            NetworkInput("x", torch.bfloat16, ((1, 1, 512), (4, 7, 512), (16, 64, 512))),
            NetworkInput("residual", torch.bfloat16, ((1, 1, 512), (4, 7, 512), (16, 64, 512))),
            NetworkInput("w", torch.bfloat16, ((512,),) * 3),
        ),
        args=lambda t: (1e-6,),
        outputs=(0, 1),
        tags=("aliased",),
    ),
    BuilderCase(
        "rms_norm_fp8-dynamic_rows-bf16",
        "rms_norm_fp8",
        (
            NetworkInput("x", torch.bfloat16, ((1, 1, 256), (4, 7, 256), (16, 64, 256))),
            NetworkInput("w", torch.bfloat16, ((256,),) * 3),
            NetworkInput("scale", torch.float32, ((),) * 3),
        ),
        args=lambda t: (1e-6,),
    ),
    BuilderCase(
        "rms_norm_fp8-dequantized-fp16",
        "rms_norm_fp8",
        (
            NetworkInput("x", torch.float16, ((1, 128), (8, 128), (64, 128))),
            NetworkInput("w", torch.float16, ((128,),) * 3),
        ),
        args=lambda t: (1e-5,),
        dequantize_scale=0.02,
    ),
    BuilderCase(
        "rms_norm_int8-dequantized-fp32",
        "rms_norm_int8",
        (
            NetworkInput("x", torch.float32, ((1, 3, 96), (2, 5, 96), (8, 32, 96))),
            NetworkInput("w", torch.float32, ((96,),) * 3),
        ),
        args=lambda t: (1e-5,),
        dequantize_scale=0.05,
    ),
    BuilderCase(
        "rms_norm_int8-scale_input-bf16",
        "rms_norm_int8",
        (
            NetworkInput("x", torch.bfloat16, ((1, 64), (8, 64), (64, 64))),
            NetworkInput("w", torch.bfloat16, ((64,),) * 3),
            NetworkInput("scale", torch.float32, ((1,),) * 3),
        ),
        args=lambda t: (1e-6,),
    ),
    BuilderCase(
        "rotary_embedding-dynamic_tokens-fp16",
        "rotary_embedding",
        (
            NetworkInput("q", torch.float16, ((1, 8, 128), (16, 8, 128), (512, 8, 128))),
            NetworkInput("positions", torch.int64, ((1,), (16,), (512,))),
        ),
        args=lambda t: (64, 4096, 500000.0, False),
    ),
    BuilderCase(
        "efficient_nms-dynamic_batch_and_boxes-fp32",
        "efficient_nms",
        (
            NetworkInput("boxes", torch.float32, ((1, 1, 4), (2, 1000, 4), (8, 20000, 4))),
            NetworkInput("scores", torch.float32, ((1, 1, 80), (2, 1000, 80), (8, 20000, 80))),
        ),
        args=lambda t: (0.25, 0.45, 100, -1, True, False, 1),
        outputs=(0, 1, 2, 3),
    ),
    BuilderCase(
        "efficient_nms-box_per_class-fp16",
        "efficient_nms",
        (
            NetworkInput("boxes", torch.float16, ((1, 1, 5, 4), (4, 300, 5, 4), (8, 1000, 5, 4))),
            NetworkInput("scores", torch.float16, ((1, 1, 5), (4, 300, 5), (8, 1000, 5))),
        ),
        args=lambda t: (0.05, 0.5, 300, 0, False, True, 0),
        outputs=(0, 1, 2, 3),
    ),
    BuilderCase(
        "multi_scale_deformable_attention-dynamic_queries-fp16",
        "multi_scale_deformable_attention",
        (
            NetworkInput("value", torch.float16, ((1, 21, 8, 32), (2, 21, 8, 32), (8, 21, 8, 32))),
            NetworkInput("spatial_shapes", torch.int64, ((2, 2),) * 3),
            NetworkInput("level_start_index", torch.int64, ((2,),) * 3),
            NetworkInput("locations", torch.float16, ((1, 1, 8, 2, 4, 2), (2, 300, 8, 2, 4, 2), (8, 900, 8, 2, 4, 2))),
            NetworkInput("weights", torch.float16, ((1, 1, 8, 2, 4), (2, 300, 8, 2, 4), (8, 900, 8, 2, 4))),
        ),
    ),
    BuilderCase(
        "multi_scale_deformable_attention-int32_indices-bf16",
        "multi_scale_deformable_attention",
        (
            NetworkInput("value", torch.bfloat16, ((1, 1, 4, 16), (2, 500, 4, 16), (4, 20000, 4, 16))),
            NetworkInput("spatial_shapes", torch.int32, ((4, 2),) * 3),
            NetworkInput("level_start_index", torch.int32, ((4,),) * 3),
            NetworkInput(
                "locations", torch.bfloat16, ((1, 1, 4, 4, 3, 2), (2, 500, 4, 4, 3, 2), (4, 20000, 4, 4, 3, 2))
            ),
            NetworkInput("weights", torch.bfloat16, ((1, 1, 4, 4, 3), (2, 500, 4, 4, 3), (4, 20000, 4, 4, 3))),
        ),
    ),
    BuilderCase(
        "masked_rows-dds",
        "masked_rows",
        (
            NetworkInput("x", torch.float32, ((1, 8), (100, 8), (1000, 8))),
            NetworkInput("mask", torch.bool, ((1,), (100,), (1000,))),
        ),
    ),
)


def test_every_op_has_a_builder_case():
    assert {entry.spec.name for entry in op_registry.all_ops()} <= {case.op for case in CASES}


def _trt_dtype(trt: Any, dtype: torch.dtype) -> Any:
    return trt.fp8 if dtype == torch.float8_e4m3fn else getattr(trt, str(dtype).removeprefix("torch."))


def _build(
    trt: Any, trt_log: Any, registry: Any, case: BuilderCase, aliased_io: bool = True
) -> tuple[bytes | None, Any]:
    """Build a plan for ``case``; ``(plan bytes or None, network)``."""
    spec = op_registry.get(case.op).spec
    builder = trt.Builder(trt_log.logger)
    network = builder.create_network(0)
    profile = builder.create_optimization_profile()
    tensors = {}
    for net_input in case.inputs:
        low, opt, high = net_input.profile
        dims = tuple(-1 if a != b or b != c else a for a, b, c in zip(low, opt, high))
        tensors[net_input.name] = network.add_input(net_input.name, _trt_dtype(trt, net_input.dtype), dims)
        profile.set_shape(net_input.name, low, opt, high)
    shape_inputs_by_ref = {}
    args = []
    for value in case.args(tensors):
        if isinstance(value, str):  # "input:dim": a symbolic size, given to the plugin as a shape input
            name, dim = value.split(":")
            shape_inputs_by_ref[value] = _dims(network, tensors[name], int(dim), value.replace(":", "_"))
            args.append(shape_inputs_by_ref[value])
        else:
            args.append(value)
    tensor_args = [tensors[net_input.name] for net_input in case.inputs[: len(spec.inputs) - len(case.weights)]]
    scale = None
    if case.dequantize_scale is not None:
        import numpy as np

        constant = network.add_constant((), trt.Weights(np.array(case.dequantize_scale, dtype=np.float32)))
        constant.name = "scale"
        scale = constant.get_output(0)
        tensor_args.append(scale)
    call = converters.plan(
        spec,
        (*tensor_args, *case.weights, *args),
        {},
        is_symbolic=lambda v: any(v is s for s in shape_inputs_by_ref.values()),
        weights_as_fields=bool(case.weights),
    )
    inputs = []
    for i, (tensor, cast) in enumerate(zip(call.tensor_inputs, call.input_casts)):
        if cast is not None:  # what the converter does: e.g. the bool mask as INT32
            layer = network.add_cast(tensor, _trt_dtype(trt, cast))
            layer.name = f"input{i}_as_{cast}"
            tensor = layer.get_output(0)
        inputs.append(tensor)
    plugin = converters.create_plugin(call, trt.TensorRTPhase.BUILD, trt, registry)
    assert plugin is not None, f"{spec.plugin_name}: create_plugin failed; TensorRT log: {trt_log.records[-5:]}"
    layer = add_plugin_v3.add_plugin_v3(network, inputs, call.shape_inputs, plugin)
    layer.name = spec.plugin_name
    for index in case.outputs:
        output = layer.get_output(index)
        if scale is not None and index == 0:
            dequantize = network.add_dequantize(output, scale, trt.float32)
            dequantize.name = f"{spec.plugin_name}_dequantize"
            output = dequantize.get_output(0)
        network.mark_output(output)
    config = builder.create_builder_config()
    if "aliased" in case.tags and aliased_io:  # the builder asks getAliasedInput only then
        config.set_preview_feature(trt.PreviewFeature.ALIASED_PLUGIN_IO_10_03, True)
    config.add_optimization_profile(profile)
    return builder.build_serialized_network(network, config), network


@pytest.fixture(scope="module")
def adapter(trt):
    reason = add_plugin_v3.unavailable_reason(trt)
    if reason:
        pytest.skip(f"rtx tier: {reason}")


def test_aliased_output_needs_the_preview_feature(trt, trt_log, registry, adapter):
    """NVIDIA's builder refuses a plugin that reports an aliased output (getAliasedInput) unless the network is built
    with PreviewFeature.ALIASED_PLUGIN_IO_10_03: whoever builds a mutating op's engine must turn it on."""
    (case,) = [c for c in CASES if "aliased" in c.tags]
    with trt_log.capture() as records:
        plan, _ = _build(trt, trt_log, registry, case, aliased_io=False)
    errors = " ".join(r.message for r in trt_log.errors(records))
    assert plan is None and "ALIASED_PLUGIN_IO_10_03 not enabled" in errors, errors


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_nvidia_builder_builds_a_plan(trt, trt_log, registry, adapter, case):
    spec = op_registry.get(case.op).spec
    with trt_log.capture() as records:
        plan, network = _build(trt, trt_log, registry, case)
    errors = [f"{r.severity}: {r.message}" for r in trt_log.errors(records)]
    assert plan is not None and plan.nbytes > 0, (
        f"{spec.plugin_namespace}::{spec.plugin_name}: NVIDIA's builder built no plan; TensorRT logged: {errors}"
    )
    assert not errors, f"{spec.plugin_name}: the build logged errors: {errors}"
    data = bytes(plan)
    assert spec.plugin_name.encode() in data and spec.plugin_namespace.encode() in data
    (layer,) = [
        network.get_layer(i) for i in range(network.num_layers) if network.get_layer(i).name == spec.plugin_name
    ]
    assert layer.type == trt.LayerType.PLUGIN_V3 and layer.num_inputs == len(spec.inputs) - len(case.weights) + (
        2 if "shape_inputs" in case.tags else 0
    )
    quantized = {"rms_norm_fp8": torch.float8_e4m3fn, "rms_norm_int8": torch.int8}.get(case.op)
    if quantized is not None:  # the plugin's own output type (getOutputDataTypes): FP8 or INT8, no cast after it
        assert layer.get_output(0).dtype == _trt_dtype(trt, quantized)
    for weight in case.weights:  # serialized with the plan (getFieldsToSerialize)
        assert weight.view(torch.int16).numpy().tobytes() in data


def test_masked_rows_output_is_data_dependent(trt, trt_log, registry, adapter):
    (case,) = [c for c in CASES if c.op == "masked_rows"]
    _, network = _build(trt, trt_log, registry, case)
    output = network.get_output(0)
    assert output.shape[0] == -1 and tuple(output.shape[1:]) == (8,)


def test_adapter_names_what_it_was_checked_with(trt):
    assert trt.__version__ in add_plugin_v3.CHECKED_VERSIONS or add_plugin_v3.unavailable_reason(trt)

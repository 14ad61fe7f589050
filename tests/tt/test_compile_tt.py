"""Our ops through Torch-TensorRT's own pipeline: export, decompositions, partitioning with our validator,
our converters and (through the test-only addPluginV3 adapter) a plan built by TensorRT-RTX's builder.

``convert_exported_program_to_serialized_trt_engine`` runs all of it and returns the plan; running a plan
needs a GPU (trt tier), so ``torch_tensorrt.dynamo.compile`` and ``torch.compile(backend="tensorrt")`` are
checked up to partitioning (``dryrun``), where our ops must land in the TensorRT partition.
"""

from __future__ import annotations

import pytest
import torch
from models import make_rms_norm
from tt_helpers import (
    converter_calls,
    dryrun,
    placement,
    require_plugin_library,
    serialized_engine,
    torch_compile_dryrun,
    torch_tensorrt,
)

from torchtrt_plugins import converters

RMS_NORM, PAD_TO, MASKED_ROWS = "torchtrt.rms_norm.default", "torchtrt.pad_to.default", "torchtrt.masked_rows.default"


class Norm(torch.nn.Module):
    """Our op between two layers Torch-TensorRT converts itself."""

    def __init__(self, hidden=64):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.rand(hidden) + 0.5)

    def forward(self, x):
        return torch.ops.torchtrt.rms_norm(x.relu(), self.scale, 1e-6) * 2


class PadConst(torch.nn.Module):
    def forward(self, x):
        return torch.ops.torchtrt.pad_to(x, 16, 24, 1.5) * 2


class PadLike(torch.nn.Module):
    def forward(self, x, like):
        return torch.ops.torchtrt.pad_to(x, *like.shape[-2:]) + 1


class Select(torch.nn.Module):
    def forward(self, x, mask):
        return torch.ops.torchtrt.masked_rows(x * 2, mask)


def _input(low, opt, high, dtype=torch.float32):
    return torch_tensorrt().Input(min_shape=low, opt_shape=opt, max_shape=high, dtype=dtype)


def _norm_case(dynamic: bool):
    model, x = Norm().eval(), torch.randn(4, 7, 64)
    if not dynamic:
        return model, torch.export.export(model, (x,)), [x]
    program = torch.export.export(model, (x,), dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=16)},))
    return model, program, [_input((1, 7, 64), (4, 7, 64), (16, 7, 64))]


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic_batch"])
def test_rms_norm_partitioned_into_tensorrt(dynamic):
    model, program, inputs = _norm_case(dynamic)
    partitioned = dryrun(program, inputs)
    assert placement(partitioned) == {"trt": [RMS_NORM], "torch": []}
    x = torch.randn(4, 7, 64)
    torch.testing.assert_close(partitioned(x), model(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic_batch"])
def test_rms_norm_plan_builds(dynamic):
    require_plugin_library()
    _, program, inputs = _norm_case(dynamic)
    with converter_calls() as calls:
        plan = serialized_engine(program, inputs)
    assert [(c.plugin_name, c.field_value("eps")) for c in calls] == [("RMSNorm", pytest.approx(1e-6))]
    assert b"RMSNorm" in plan and b"torchtrt" in plan


def test_rms_norm_weight_is_a_field_when_asked():
    """The module's Parameter reaches our converter as a get_attr constant: within weights_as_fields() the plugin takes
    it as a field (the layer has one input) and the plan holds its bytes; without, it stays a network input."""
    require_plugin_library()
    model, program, inputs = _norm_case(False)
    with converters.weights_as_fields(), converter_calls() as calls:
        plan = serialized_engine(program, inputs)
    (call,) = calls
    assert len(call.tensor_inputs) == 1 and call.field_value("weight_shape") == [64]
    assert model.scale.detach().numpy().tobytes() in plan
    with converter_calls() as calls:
        serialized_engine(program, inputs)
    assert [len(c.tensor_inputs) for c in calls] == [2]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gemma_norm_reaches_the_plugin_with_its_weight_offset(dtype):
    """Gemma's ``x * (1 + w)``: Torch-TensorRT folds constants only after our pass, so the op still sees ``w`` and
    takes ``weight_offset=1`` (issue 25); the output is eager's bit for bit, and the plugin gets the field."""
    require_plugin_library()
    dtype = getattr(torch, dtype)
    model = make_rms_norm("gemma", 64).to(dtype).eval()
    x = torch.randn(2, 5, 64).to(dtype)
    program = torch.export.export(model, (x,))
    partitioned = dryrun(program, [x])
    (node,) = [n for sub in partitioned.children() for n in sub.graph.nodes if str(n.target) == RMS_NORM]
    assert node.args[3] == 1.0 and node.args[1].meta["val"].dtype == dtype
    torch.testing.assert_close(partitioned(x), model(x), atol=0, rtol=0)
    with converter_calls() as calls:
        serialized_engine(program, [x])
    assert [(c.plugin_version, c.field_value("weight_offset")) for c in calls] == [("3", 1.0)]


ROPE = "torchtrt.rotary_embedding.default"


class Rope(torch.nn.Module):
    """Queries and keys of one attention layer: two rotary_embedding nodes whose plugins share one cos/sin cache."""

    def forward(self, q, k, positions):
        rope = torch.ops.torchtrt.rotary_embedding
        return rope(q * 2, positions, 64, 4096, 500000.0) + rope(k, positions, 64, 4096, 500000.0)


def test_rotary_embedding_layers_share_their_cache_fields():
    require_plugin_library()
    q, k, positions = torch.randn(6, 4, 64), torch.randn(6, 4, 64), torch.arange(6)
    tokens = torch.export.Dim("tokens", min=1, max=512)
    program = torch.export.export(Rope(), (q, k, positions), dynamic_shapes=({0: tokens}, {0: tokens}, {0: tokens}))
    inputs = [_input((1, 4, 64), (6, 4, 64), (512, 4, 64)), _input((1, 4, 64), (6, 4, 64), (512, 4, 64))]
    inputs.append(_input((1,), (6,), (512,), torch.int64))
    assert placement(dryrun(program, inputs)) == {"trt": [ROPE, ROPE], "torch": []}
    with converter_calls() as calls:
        plan = serialized_engine(program, inputs)
    assert len(calls) == 2 and b"CachedRotaryEmbedding" in plan
    assert calls[0].fields == calls[1].fields  # one cache key: one table for both layers at run time
    assert [(f.name, f.value) for f in calls[0].fields][:3] == [
        ("rotary_dim", 64),
        ("max_position", 4096),
        ("base", 500000.0),
    ]


def test_pad_to_with_fields():
    require_plugin_library()
    x = torch.randn(2, 3, 13, 21)
    program = torch.export.export(PadConst(), (x,))
    assert placement(dryrun(program, [x])) == {"trt": [PAD_TO], "torch": []}
    with converter_calls() as calls:
        plan = serialized_engine(program, [x])
    (call,) = calls
    assert [(f.name, f.value) for f in call.fields] == [("height", 16), ("width", 24), ("value", 1.5)]
    assert call.shape_inputs == [] and b"PadTo" in plan


def test_pad_to_with_shape_inputs():
    require_plugin_library()
    x, like = torch.randn(2, 3, 13, 21), torch.randn(1, 1, 16, 24)
    dims = (
        {0: torch.export.Dim("batch", min=1, max=8)},
        {2: torch.export.Dim("h", min=2, max=64), 3: torch.export.Dim("w", min=2, max=64)},
    )
    program = torch.export.export(PadLike(), (x, like), dynamic_shapes=dims)
    inputs = [
        _input((1, 3, 13, 21), (2, 3, 13, 21), (8, 3, 13, 21)),
        _input((1, 1, 2, 2), (1, 1, 16, 24), (1, 1, 64, 64)),
    ]
    assert placement(dryrun(program, inputs)) == {"trt": [PAD_TO], "torch": []}
    with converter_calls() as calls:
        plan = serialized_engine(program, inputs)
    (call,) = calls
    assert call.field_value("height") == call.field_value("width") == -(2**31)  # the shape-input marker
    assert len(call.shape_inputs) == 2 and b"PadTo" in plan


def test_masked_rows_with_output_allocator():
    require_plugin_library()
    x, mask = torch.randn(10, 4), torch.arange(10) % 3 == 0
    program = torch.export.export(
        Select(),
        (x, mask),
        dynamic_shapes=({0: torch.export.Dim("n", min=2, max=1000)}, {0: torch.export.Dim("n", min=2, max=1000)}),
    )
    inputs = [_input((2, 4), (10, 4), (1000, 4)), _input((2,), (10,), (1000,), torch.bool)]
    assert placement(dryrun(program, inputs)) == {"trt": [MASKED_ROWS], "torch": []}
    from torch_tensorrt.dynamo.conversion._TRTInterpreter import TRTInterpreter

    flags, construct = [], TRTInterpreter._construct_trt_network_def

    def recording(interpreter):
        construct(interpreter)
        flags.append(interpreter.ctx.requires_output_allocator)

    TRTInterpreter._construct_trt_network_def = recording
    try:
        with converter_calls() as calls:
            plan = serialized_engine(program, inputs)
    finally:
        TRTInterpreter._construct_trt_network_def = construct
    (call,) = calls
    assert call.requires_output_allocator and call.input_casts == [None, torch.int32]
    assert flags == [True] and b"MaskedRows" in plan


def test_what_our_validator_rejects_falls_back_to_pytorch():
    """A pad_to node our validator refuses (its input recorded as float64, which the plugin cannot take) goes
    to a PyTorch partition in Torch-TensorRT's own partitioning; the rms_norm next to it stays in TensorRT."""
    from torch_tensorrt.dynamo import CompilationSettings
    from torch_tensorrt.dynamo._compiler import compile_module

    class Both(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(21))

        def forward(self, x):
            return torch.ops.torchtrt.pad_to(torch.ops.torchtrt.rms_norm(x, self.weight, 1e-6), 16, 24)

    x = torch.randn(2, 3, 13, 21)
    gm = torch.export.export(Both(), (x,)).module()
    (pad,) = [n for n in gm.graph.nodes if str(n.target) == PAD_TO]
    pad.args[0].meta["val"] = pad.args[0].meta["val"].to(torch.float64)
    settings = CompilationSettings(min_block_size=1, dryrun=True, offload_module_to_cpu=True)
    partitioned = compile_module(gm, [x], {}, settings)  # PyTorch partitions stay on the CPU (worker.py, shim 5)
    assert placement(partitioned) == {"trt": [RMS_NORM], "torch": [PAD_TO]}


def test_torch_compile_backend_partitions_our_ops_into_tensorrt():
    model, x = Norm().eval(), torch.randn(4, 7, 64)
    y, placements = torch_compile_dryrun(model, x)
    assert placements == [{"trt": [RMS_NORM], "torch": []}]
    torch.testing.assert_close(y, model(x), atol=1e-5, rtol=1e-5)

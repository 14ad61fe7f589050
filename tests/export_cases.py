"""Example models calling each op, for the ONNX export tests (structure on cpu, NVIDIA's parser and builder on rtx).

Every registered op must have at least one case here (``cases`` raises for one that has none), with its dynamic
dims named the same way for both exporters; the rtx tier builds optimization profiles over those dims.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from torchtrt_plugins import registry


@dataclass
class ExportCase:
    op: str
    variant: str
    module: nn.Module
    args: tuple[torch.Tensor, ...]
    #: Graph input name (the forward argument) -> {dim index: dim name}.
    dynamic: dict[str, dict[int, str]] = field(default_factory=dict)
    #: Op arguments the model passes as symbolic sizes (they become shape inputs).
    symbolic_args: tuple[str, ...] = ()
    #: The TorchScript tracer records sizes read from tensors as constants, so cases with symbolic sizes
    #: are for the dynamo exporter only.
    torchscript: bool = True

    def __post_init__(self) -> None:
        self.module.eval()  # what one exports; the exporters warn about training mode

    @property
    def id(self) -> str:
        return f"{self.op}-{self.variant}"

    @property
    def input_names(self) -> list[str]:
        import inspect

        return list(inspect.signature(self.module.forward).parameters)

    def dynamic_shapes(self) -> dict[str, dict[int, torch.export.Dim]] | None:
        """The ``dynamic_shapes`` argument of ``torch.onnx.export(..., dynamo=True)``."""
        if not self.dynamic:
            return None
        dims: dict[str, torch.export.Dim] = {}
        return {
            name: {i: dims.setdefault(d, torch.export.Dim(d)) for i, d in self.dynamic.get(name, {}).items()}
            for name in self.input_names
        }

    def export(self, exporter: str):
        """The ``onnx.ModelProto`` of plain ``torch.onnx.export`` ("dynamo" or "torchscript"), with the one call
        each exporter needs (``translation_table()``; ``register_torchscript_symbolics()``)."""
        import io
        import warnings

        import onnx

        from torchtrt_plugins import onnx as tonnx

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporters' deprecation and training-mode chatter
            if exporter == "dynamo":
                program = torch.onnx.export(
                    self.module,
                    self.args,
                    dynamo=True,
                    custom_translation_table=tonnx.translation_table(),
                    dynamic_shapes=self.dynamic_shapes(),
                )
                return program.model_proto
            if exporter != "torchscript" or not self.torchscript:
                raise ValueError(f"export case {self.id}: no {exporter!r} export")
            tonnx.register_torchscript_symbolics()
            buffer = io.BytesIO()
            torch.onnx.export(
                self.module, self.args, buffer, dynamo=False, input_names=self.input_names, dynamic_axes=self.dynamic
            )
            return onnx.load_from_string(buffer.getvalue())

    def profile(self) -> dict[str, list[list[int]]]:
        """min/opt/max per graph input: each dynamic dim from 1 to twice its example size."""
        shapes = {}
        for name, arg in zip(self.input_names, self.args):
            dims = self.dynamic.get(name, {})
            opt = list(arg.shape)
            shapes[name] = [
                [1 if i in dims else s for i, s in enumerate(opt)],
                opt,
                [2 * s if i in dims else s for i, s in enumerate(opt)],
            ]
        return shapes


class RmsNormCall(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x):
        return torch.ops.torchtrt.rms_norm(x * 2, self.weight, self.eps) + 1


class RmsNormQuantCall(nn.Module):
    """rms_norm quantized by a scale buffer; an INT8 result dequantized by it as ``q.float() * scale``. An FP8 result is
    the model's output: in a TensorRT network an FP8 tensor may feed only a dequantize, shape or identity layer
    (the builder's validateQuantizedTypesProducersConsumers), so the Cast that ``.float()`` exports to does not build;
    the hand-written graphs of the rtx tier dequantize it with DequantizeLinear."""

    def __init__(self, op: str, hidden: int, eps: float, scale: float):
        super().__init__()
        self.op = getattr(torch.ops.torchtrt, op)
        self.dequantize = op == "rms_norm_int8"
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(hidden))
        self.register_buffer("scale", torch.tensor(scale))
        self.eps = eps

    def forward(self, x):
        q = self.op(x, self.weight, self.scale, self.eps)
        return q.float() * self.scale if self.dequantize else q


class MaskedRowsCall(nn.Module):
    def forward(self, x, mask):
        return torch.ops.torchtrt.masked_rows(x, mask) * 2


class PadToCall(nn.Module):
    def __init__(self, height: int, width: int, value: float):
        super().__init__()
        self.height, self.width, self.value = height, width, value

    def forward(self, x):
        return torch.ops.torchtrt.pad_to(x + 1, self.height, self.width, self.value)


class PadToLike(nn.Module):
    """pad_to with the size of another input: symbolic sizes, shape inputs of the plugin."""

    def forward(self, x, like):
        return torch.ops.torchtrt.pad_to(x, like.shape[-2], like.shape[-1])


class RotaryCall(nn.Module):
    def forward(self, q, positions):
        return torch.ops.torchtrt.rotary_embedding(q * 2, positions, 16, 64, 10000.0, True) + 1


class EfficientNmsCall(nn.Module):
    def __init__(self, box_coding: int):
        super().__init__()
        self.box_coding = box_coding

    def forward(self, boxes, scores):
        num, det_boxes, det_scores, det_classes = torch.ops.torchtrt.efficient_nms(
            boxes, scores, 0.25, 0.5, 16, -1, False, False, self.box_coding
        )
        return num, det_boxes * 2, det_scores, det_classes


class DeformableAttentionCall(nn.Module):
    def forward(self, value, spatial_shapes, level_start_index, locations, weights):
        return torch.ops.torchtrt.multi_scale_deformable_attention(
            value, spatial_shapes, level_start_index, locations.sigmoid(), weights
        )


def _rms_norm() -> list[ExportCase]:
    return [
        ExportCase("rms_norm", "static", RmsNormCall(8, 1e-5), (torch.randn(3, 8),)),
        ExportCase(
            "rms_norm", "dynamic", RmsNormCall(16, 1e-6), (torch.randn(2, 5, 16),), {"x": {0: "batch", 1: "seq"}}
        ),
    ]


def _rms_norm_quant(op: str) -> Callable[[], list[ExportCase]]:
    def cases() -> list[ExportCase]:
        return [
            ExportCase(op, "static", RmsNormQuantCall(op, 8, 1e-5, 0.02), (torch.randn(3, 8),)),
            ExportCase(
                op,
                "dynamic",
                RmsNormQuantCall(op, 16, 1e-6, 0.05),
                (torch.randn(2, 5, 16),),
                {"x": {0: "batch", 1: "seq"}},
            ),
        ]

    return cases


def _masked_rows() -> list[ExportCase]:
    mask = torch.tensor([True, False, True, True, False, True])
    return [
        ExportCase(
            "masked_rows",
            "dynamic",
            MaskedRowsCall(),
            (torch.randn(6, 4), mask),
            {"x": {0: "rows"}, "mask": {0: "rows"}},
        ),
        ExportCase("masked_rows", "int32", MaskedRowsCall(), (torch.arange(18, dtype=torch.int32).reshape(6, 3), mask)),
    ]


def _pad_to() -> list[ExportCase]:
    return [
        ExportCase("pad_to", "pad", PadToCall(7, 9, 1.5), (torch.randn(2, 3, 5, 6),), {"x": {0: "batch"}}),
        ExportCase("pad_to", "crop", PadToCall(3, 4, 0.0), (torch.randn(2, 3, 5, 6),)),
        ExportCase(
            "pad_to",
            "shape_inputs",
            PadToLike(),
            (torch.randn(2, 3, 5, 6), torch.randn(1, 1, 7, 9)),
            {"x": {0: "batch"}, "like": {2: "height", 3: "width"}},
            symbolic_args=("height", "width"),
            torchscript=False,
        ),
    ]


def _rotary_embedding() -> list[ExportCase]:
    positions = torch.tensor([0, 5, 63, 2])
    return [
        ExportCase(
            "rotary_embedding",
            "dynamic",
            RotaryCall(),
            (torch.randn(4, 2, 32), positions),
            {"q": {0: "tokens"}, "positions": {0: "tokens"}},
        )
    ]


def _efficient_nms() -> list[ExportCase]:
    xy = torch.rand(2, 40, 2) * 50
    wh = torch.rand(2, 40, 2) * 20 + 1
    return [
        ExportCase(
            "efficient_nms",
            "dynamic",
            EfficientNmsCall(0),
            (torch.cat([xy, xy + wh], dim=-1), torch.rand(2, 40, 3)),
            {"boxes": {0: "batch", 1: "anchors"}, "scores": {0: "batch", 1: "anchors"}},
        ),
        ExportCase(
            "efficient_nms",
            "center_size_per_class_boxes",
            EfficientNmsCall(1),
            (torch.cat([xy, wh], dim=-1)[:, :, None, :].expand(2, 40, 3, 4).contiguous(), torch.rand(2, 40, 3)),
        ),
    ]


def _multi_scale_deformable_attention() -> list[ExportCase]:
    from torchtrt_plugins.ops import multi_scale_deformable_attention as msda

    _, shapes, starts, locations, weights = msda.example_inputs()  # two levels of 16 rows in all
    value = torch.randn(2, 16, 2, 4)
    locations = torch.randn(2, *locations.shape[1:])
    weights = torch.rand(2, *weights.shape[1:])
    return [
        ExportCase(
            "multi_scale_deformable_attention",
            "dynamic",
            DeformableAttentionCall(),
            (value, shapes, starts, locations, weights),
            {
                "value": {0: "batch"},
                "locations": {0: "batch", 1: "queries"},
                "weights": {0: "batch", 1: "queries"},
            },
        ),
        ExportCase(
            "multi_scale_deformable_attention",
            "int32",
            DeformableAttentionCall(),
            (value, shapes.int(), starts.int(), locations, weights),
        ),
    ]


def _add_rms_norm() -> list[ExportCase]:
    # None yet: export holds the mutating op as auto_functionalized_v2(op, ...), and torch 2.13's dynamo exporter
    # fails on that node before any translation runs (it looks the OpOverload argument up as an FX value:
    # KeyError in _convert_fx_arg_to_onnx_arg). The hand-written AddRMSNorm node parses and builds (rtx tier).
    return []


#: op name -> the cases for it.
CASES: dict[str, Callable[[], list[ExportCase]]] = {
    "add_rms_norm": _add_rms_norm,
    "efficient_nms": _efficient_nms,
    "rms_norm": _rms_norm,
    "rms_norm_fp8": _rms_norm_quant("rms_norm_fp8"),
    "rms_norm_int8": _rms_norm_quant("rms_norm_int8"),
    "masked_rows": _masked_rows,
    "pad_to": _pad_to,
    "rotary_embedding": _rotary_embedding,
    "multi_scale_deformable_attention": _multi_scale_deformable_attention,
}


def cases() -> list[ExportCase]:
    missing = [e.spec.name for e in registry.all_ops() if e.spec.name not in CASES]
    if missing:
        raise LookupError(f"no ONNX export case for ops {missing}; add them to tests/export_cases.py")
    torch.manual_seed(0)
    return [case for entry in registry.all_ops() for case in CASES[entry.spec.name]()]


def end_to_end_cases() -> list[ExportCase]:
    """The decoder block (two RMSNorms among matmuls, softmax and SwiGLU) after ``torchtrt_plugins.lower``, in
    each float dtype: the plugin nodes must parse and build alongside ordinary ONNX layers."""
    from torchtrt_plugins.benchmarks.models import LlamaDecoderBlock
    from torchtrt_plugins.lowering import lower

    cases = []
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        torch.manual_seed(0)
        block = LlamaDecoderBlock(hidden_size=32, num_heads=2, intermediate_size=64).to(dtype).eval()
        x = torch.randn(2, 5, 32, dtype=dtype)
        case = ExportCase(
            "decoder_block", str(dtype).removeprefix("torch."), block, (x,), {"x": {0: "batch", 1: "seq"}}
        )
        lowered = lower(torch.export.export(block, (x,), dynamic_shapes=case.dynamic_shapes()).module())
        case.module = lowered
        case.torchscript = False  # an exported program's module: the dynamo exporter's input
        cases.append(case)
    return cases

"""pad_to(x, height, width, value=0.0): (B, C, H, W) -> (B, C, height, width), padded bottom/right or cropped."""

from __future__ import annotations

import torch

from ..spec import FieldSpec, OpEntry, OpSpec, SpecError, TensorSpec, Tolerance, register

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int8)

SPEC = OpSpec(
    name="pad_to",
    schema="(Tensor x, SymInt height, SymInt width, float value=0.0) -> Tensor",
    plugin_name="PadTo",
    inputs=(TensorSpec("x", DTYPES, doc="(B, C, H, W)"),),
    outputs=(
        TensorSpec("y", DTYPES, same_dtype_as="x", doc="(B, C, height, width): x where it reaches, `value` elsewhere"),
    ),
    fields=(
        FieldSpec(
            "height",
            "INT64",
            arg="height",
            min=0,
            shape_input=True,
            doc="output height; a shape input (field -1) when symbolic, e.g. other.shape[-2]",
        ),
        FieldSpec(
            "width",
            "INT64",
            arg="width",
            min=0,
            shape_input=True,
            doc="output width; a shape input (field -1) when symbolic",
        ),
        FieldSpec(
            "value",
            "FLOAT32",
            arg="value",
            default=0.0,
            required=False,
            doc="padding value (an integer in [-128, 127] for int8)",
        ),
    ),
    # A copy: every dtype is exact.
    tolerances={dtype: Tolerance(0.0, 0.0) for dtype in DTYPES},
)


def check_args(x: torch.Tensor, height, width, value: float = 0.0) -> None:
    SPEC.check_dtypes([x])
    if x.dim() != 4:
        raise SpecError(f"torchtrt.pad_to: argument 'x' must have shape (B, C, H, W), got {tuple(x.shape)}")
    SPEC.field_by_name("height").check("pad_to", height)
    SPEC.field_by_name("width").check("pad_to", width)
    value = SPEC.field_by_name("value").check("pad_to", value)
    if x.dtype == torch.int8 and not (value.is_integer() and -128 <= value <= 127):
        raise SpecError(
            f"torchtrt.pad_to: argument 'value' must be an integer in [-128, 127] when 'x' is int8, got {value!r}"
        )


def reference(x: torch.Tensor, height: int, width: int, value: float = 0.0) -> torch.Tensor:
    """Plain-torch pad_to: a `value`-filled output with the overlapping corner of x copied in."""
    y = x.new_full((x.shape[0], x.shape[1], height, width), value)
    h, w = min(x.shape[2], height), min(x.shape[3], width)
    y[:, :, :h, :w] = x[:, :, :h, :w]
    return y


def fake(x: torch.Tensor, height, width, value: float = 0.0) -> torch.Tensor:
    check_args(x, height, width, value)
    return x.new_empty((x.shape[0], x.shape[1], height, width))


ENTRY = register(OpEntry(SPEC, reference=reference, fake=fake, check_args=check_args))

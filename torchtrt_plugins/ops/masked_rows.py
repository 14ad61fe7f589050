"""masked_rows(x, mask): the rows of x (dim 0) where the bool mask is true, in order; a data-dependent shape."""

from __future__ import annotations

import torch

from ..spec import OpEntry, OpSpec, SpecError, TensorSpec, Tolerance, register

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)

SPEC = OpSpec(
    name="masked_rows",
    schema="(Tensor x, Tensor mask) -> Tensor",
    plugin_name="MaskedRows",
    inputs=(
        TensorSpec("x", DTYPES, doc="(N, ...)"),
        # TensorRT plugins take no kBOOL I/O: the converter casts the mask to int32 for the plugin.
        TensorSpec("mask", (torch.bool,), plugin_dtype=torch.int32, doc="(N,), bool"),
    ),
    outputs=(TensorSpec("y", DTYPES, same_dtype_as="x", doc="(K, ...), K = number of true mask entries"),),
    # Plugin output 1: the 0-D INT32 size tensor K, which the torch op does not return.
    hidden_outputs=1,
    requires_output_allocator=True,
    # A copy: every dtype is exact.
    tolerances={dtype: Tolerance(0.0, 0.0) for dtype in DTYPES},
)


def _check_same_size(a, b, message: str) -> None:
    if isinstance(a, int) and isinstance(b, int):
        if a != b:
            raise SpecError(message)
    else:
        torch._check_with(SpecError, a == b, lambda: message)


def check_args(x: torch.Tensor, mask: torch.Tensor) -> None:
    SPEC.check_dtypes([x, mask])
    if x.dim() < 1:
        raise SpecError(
            f"torchtrt.masked_rows: argument 'x' must have at least 1 dimension, got shape {tuple(x.shape)}"
        )
    expected = (
        f"torchtrt.masked_rows: argument 'mask' must have shape ({x.shape[0]},) to match the first dimension of 'x'"
    )
    if mask.dim() != 1:
        raise SpecError(f"{expected}, got {tuple(mask.shape)}")
    _check_same_size(mask.shape[0], x.shape[0], f"{expected}, got {tuple(mask.shape)}")


def reference(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return x[mask]


def fake(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    check_args(x, mask)
    rows = x.shape[0]
    # K is data: an unbacked size, 0 <= K <= rows.
    kept = torch.library.get_ctx().new_dynamic_size(max=rows if isinstance(rows, int) else None)
    if not isinstance(rows, int):
        torch._check(kept <= rows)
    return x.new_empty((kept, *x.shape[1:]))


ENTRY = register(OpEntry(SPEC, reference=reference, fake=fake, check_args=check_args))

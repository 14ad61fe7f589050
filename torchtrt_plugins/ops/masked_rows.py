"""masked_rows(x, mask): the rows of x (dim 0) where the bool mask is true, in order; a data-dependent shape.

Declared through the public path (:func:`torchtrt_plugins.declare`): the launcher is
``csrc/kernels/masked_rows_launcher.cu``; the plugin is the generic one (``MaskedRows`` v3), whose output 1 is the
0-D INT64 size tensor K that the torch op does not return. TensorRT plugins take no BOOL inputs, so the converter
casts the mask to INT32 for the plugin; the eager op hands the launcher the bool mask as it is.
"""

from __future__ import annotations

import torch

from ..declare import declare
from ..spec import SpecError, Tolerance
from . import LIBRARY, define

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)


def reference(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return x[mask]


def fake(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The op's shape rules, in the one place they are written (eager, validator and plugin derive from here)."""
    if x.dim() < 1:
        raise SpecError(
            f"torchtrt.masked_rows: argument 'x' must have at least 1 dimension, got shape {tuple(x.shape)}"
        )
    torch._check_with(
        SpecError,
        mask.dim() == 1 and mask.shape[0] == x.shape[0],
        lambda: (
            f"torchtrt.masked_rows: argument 'mask' must have shape ({x.shape[0]},) to match the first dimension of "
            f"'x', got {tuple(mask.shape)}"
        ),
    )
    rows = x.shape[0]
    # K is data: an unbacked size, 0 <= K <= rows.
    kept = torch.library.get_ctx().new_dynamic_size(max=rows if isinstance(rows, int) else None)
    if not isinstance(rows, int):
        torch._check(kept <= rows)
    return x.new_empty((kept, *x.shape[1:]))


_LIB = define("masked_rows(Tensor x, Tensor mask) -> Tensor", fake, reference)

MASKED_ROWS = declare(
    "torchtrt::masked_rows",
    library=LIBRARY,
    plugin_name="MaskedRows",
    plugin_version="3",
    launcher="ttp::launchers::maskedRows",
    workspace="ttp::launchers::maskedRowsWorkspace",
    dtypes={"x": DTYPES, "mask": (torch.bool,)},
    reference=reference,
    data_dependent=True,
    # The eager op counts, reads K back and copies into y of K rows (no N-row buffer); the plugin runs both at once.
    sizes_first=True,
    example_inputs=(torch.zeros(2, 1), torch.zeros(2, dtype=torch.bool)),
    # A copy: every dtype is exact.
    tolerances={dtype: Tolerance(0.0, 0.0) for dtype in DTYPES},
    doc=__doc__,
)
ENTRY = MASKED_ROWS.entry
SPEC = MASKED_ROWS.spec
check_args = MASKED_ROWS.check_args

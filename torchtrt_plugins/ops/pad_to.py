"""pad_to(x, height, width, value=0.0): (B, C, H, W) -> (B, C, height, width), padded bottom/right or cropped.

Declared through the public path (:func:`torchtrt_plugins.declare`): the launcher is
``csrc/kernels/pad_to_launcher.cu`` (one memory-bound kernel, vectorized along W: no tactics); the plugin is the
generic one (``PadTo`` v2). A symbolic ``height`` or ``width`` (e.g. ``other.shape[-2]``) reaches the plugin as a
shape input. For int8, ``value`` must be an integer in [-128, 127]: the tensor holds it as it is (a torch int8 tensor
carries no quantization scale).
"""

from __future__ import annotations

import torch

from ..declare import Range, declare
from ..spec import SpecError, Tolerance
from . import LIBRARY, define

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int8)


def reference(x: torch.Tensor, height: int, width: int, value: float = 0.0) -> torch.Tensor:
    """Plain-torch pad_to: a `value`-filled output with the overlapping corner of x copied in."""
    y = x.new_full((x.shape[0], x.shape[1], height, width), value)
    h, w = min(x.shape[2], height), min(x.shape[3], width)
    y[:, :, :h, :w] = x[:, :, :h, :w]
    return y


def fake(x: torch.Tensor, height, width, value: float = 0.0) -> torch.Tensor:
    """The op's shape rules, in the one place they are written (eager, validator and plugin derive from here)."""
    if x.dim() != 4:
        raise SpecError(f"torchtrt.pad_to: argument 'x' must have shape (B, C, H, W), got {tuple(x.shape)}")
    if x.dtype == torch.int8 and not (float(value).is_integer() and -128 <= value <= 127):
        raise SpecError(
            f"torchtrt.pad_to: argument 'value' must be an integer in [-128, 127] when 'x' is int8, got {value!r}"
        )
    return x.new_empty((x.shape[0], x.shape[1], height, width))


_LIB = define("pad_to(Tensor x, SymInt height, SymInt width, float value=0.0) -> Tensor", fake, reference)

PAD_TO = declare(
    "torchtrt::pad_to",
    library=LIBRARY,
    launcher="ttp::launchers::padTo",
    dtypes={"x": DTYPES},
    ranges={
        "height": Range(min=0, doc="output height; a shape input of the plugin when symbolic (e.g. other.shape[-2])"),
        "width": Range(min=0, doc="output width; a shape input of the plugin when symbolic"),
    },
    plugin_name="PadTo",
    # v1 was a hand-written plugin (FLOAT32 value, -1 for a shape input); v2 is the generic one, on the declared fields.
    plugin_version="2",
    reference=reference,
    # A copy: every dtype is exact.
    tolerances={dtype: Tolerance(0.0, 0.0) for dtype in DTYPES},
    doc=__doc__,
)
ENTRY = PAD_TO.entry
SPEC = PAD_TO.spec
check_args = PAD_TO.check_args

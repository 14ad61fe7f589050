"""Converters of ours for ATen nodes that Torch-TensorRT 2.13 sends to PyTorch although TensorRT has the layers.

Each is registered after Torch-TensorRT's own converter of the op and accepts a node only where that converter's
validator rejects it (the registry tries converters in order), so it never shadows a working one.

- ``aten.avg_pool2d`` with ``ceil_mode=True`` (RT-DETR's ResNet shortcut, ``nn.AvgPool2d(2, 2, 0, ceil_mode=True)``):
  Torch-TensorRT's ``avg_pool_param_validator`` rejects every ``ceil_mode=True``. Where every spatial size is static and
  ``(size + 2 * padding - kernel) % stride == 0``, ceil and floor make the same windows, so the node is the floor-mode
  pool, which Torch-TensorRT's own layer code builds (``impl.pool.avg_poolNd``). Other ceil-mode pools stay in PyTorch.
- ``aten.baddbmm`` (Mask2Former's mask attention): Torch-TensorRT 2.13 has no converter and does not decompose it;
  ``beta * input + alpha * (batch1 @ batch2)`` from its matrix-multiply and elementwise layers (``beta == 0`` ignores
  ``input``, NaN included, as PyTorch does).
- ``aten.scaled_dot_product_attention`` whose value head dim differs from the query's and key's (ConditionalDETR's
  cross-attention): ``scaled_dot_product_attention_validator`` asks for ``key.shape == value.shape`` (TensorRT's
  ``IAttentionLayer``). Built as ``softmax(scale * q @ k^T + mask) @ v`` from matrix-multiply and softmax layers, what
  Torch-TensorRT's ``decompose_attention=True`` makes of every attention; without causal masking or dropout. A boolean
  mask is applied as PyTorch's math kernel does (a fully masked row gives zeros).
- ``aten.topk`` whose ``k`` is a SymInt (torchvision's one-stage detectors: ``min(topk_candidates, n)`` of the
  data-dependent count ``n`` of scores above the threshold): ``topk_validator`` takes an ``int`` only. TensorRT's
  ``ITopKLayer`` takes ``k`` as a scalar Int32 tensor (input 1) up to 3840, so the node is ours where the SymInt's
  upper bound is known and at most 3840.
- ``aten.index.Tensor`` with one boolean mask over the leading dims (``scores[keep]``, ``boxes[keep]``: torchvision's
  postprocessing; ``x[mask]`` with a mask (B, N) over x (B, N, C)): Torch-TensorRT registers its boolean-index
  converter (``nonzero``) for full TensorRT only (``index_nonbool_validator``); on TensorRT-RTX the node becomes our
  ``torchtrt::masked_rows`` plugin (a data-dependent output), where that op's own validator takes it. A mask of rank
  k > 1 picks the same elements, in the same (row-major) order, as a 1-D mask over x's first k dims flattened into
  one, so x and the mask are reshaped to that (shuffle layers) and masked_rows runs on them; the dims past the
  mask's must be static (one inferred dim in the reshape).
- ``aten.isin.Tensor_Tensor`` and ``aten.isin.Tensor_Scalar`` (GroundingDino's special-token masks,
  ``torch.isin(input_ids, special_tokens)``): Torch-TensorRT 2.13 has no converter and does not decompose them. The
  elements, unsqueezed by one trailing axis, are compared with the test elements flattened (an equality layer
  broadcasting to ``(*elements.shape, M)``), and a reduce over that axis says whether any matched; ``invert`` negates
  it; ``assume_unique`` changes no result. The test elements' count must be static and at least 1.
- ``aten.cummax`` / ``aten.cummin`` (GroundingDino's previous and next special token): Torch-TensorRT 2.13 has no
  converter; TensorRT's ``ICumulativeLayer`` sums only. Along a dim of static length N at most
  ``CUMULATIVE_MAX_LENGTH``, an N x N lower-triangular mask (``j <= i``) selects each prefix and a max (min) reduce
  gives the values; the index is the largest ``j <= i`` whose element equals the value (NaN matching NaN), which is
  PyTorch's rule (a tie takes the later index; from a NaN on, the value is NaN and the index the last NaN's). The
  layers hold ``N * N`` elements per row along the dim (``N <= 1024``: 4 MiB of int32 per row set); longer or
  symbolic dims stay in PyTorch.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import torch

__all__ = [
    "attention_value_dim_differs",
    "avg_pool2d_ceil_is_floor",
    "baddbmm_has_no_converter",
    "cumulative_extremum_is_static",
    "disabled",
    "index_by_mask_is_masked_rows",
    "isin_has_no_converter",
    "register",
    "topk_k_is_bounded_symint",
]

#: ``ITopKLayer``'s largest ``k``.
TOPK_MAX_K = 3840
#: The longest dim ``aten.cummax`` / ``aten.cummin`` take (their layers hold N * N elements per row).
CUMULATIVE_MAX_LENGTH = 1024
#: Element dtypes of ``aten.isin`` and of ``aten.cummax`` / ``aten.cummin`` (bool: these two only, through int32).
_ISIN_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)
_CUMULATIVE_DTYPES = (*_ISIN_DTYPES, torch.bool)

_registered = False
_disabled = False


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Within the block these converters take no node (what Torch-TensorRT does without us)."""
    global _disabled
    before, _disabled = _disabled, True
    try:
        yield
    finally:
        _disabled = before


def _pair(value: Any) -> list[int]:
    return list(value) * (2 if len(value) == 1 else 1) if isinstance(value, (list, tuple)) else [value, value]


def _pool_args(node_args: tuple) -> tuple[list[int], list[int], list[int], bool, bool, Any]:
    """``(kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)`` of avg_pool2d's arguments."""
    args = list(node_args) + [None] * (7 - len(node_args))
    kernel = _pair(args[1])
    stride = _pair(args[2]) if args[2] else kernel
    padding = _pair(args[3] if args[3] is not None else 0)
    ceil_mode = bool(args[4]) if args[4] is not None else False
    count_include_pad = True if args[5] is None else bool(args[5])
    return kernel, stride, padding, ceil_mode, count_include_pad, args[6]


def avg_pool2d_ceil_is_floor(node: torch.fx.Node, settings: Any = None) -> bool:
    """True for an ``aten.avg_pool2d`` node with ``ceil_mode=True`` whose windows are the floor mode's."""
    kernel, stride, padding, ceil_mode, _, divisor_override = _pool_args(node.args)
    value = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    if _disabled or not ceil_mode or divisor_override is not None or value is None or value.dim() < 2:
        return False
    sizes = value.shape[-2:]
    if not all(isinstance(size, int) for size in sizes):
        return False
    return all((size + 2 * p - k) % s == 0 for size, k, s, p in zip(sizes, kernel, stride, padding))


def convert_avg_pool2d_ceil_as_floor(ctx: Any, target: Any, args: tuple, kwargs: dict, name: str):
    from torch_tensorrt.dynamo._SourceIR import SourceIR
    from torch_tensorrt.dynamo.conversion import impl

    kernel, stride, padding, _, count_include_pad, _ = _pool_args(args)
    return impl.pool.avg_poolNd(
        ctx,
        target,
        source_ir=SourceIR.ATEN,
        name=name,
        input=args[0],
        kernel_size=kernel,
        stride=stride,
        padding=padding,
        ceil_mode=False,
        count_include_pad=count_include_pad,
        divisor_override=None,
    )


def _value(arg: Any) -> Any:
    return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None


def baddbmm_has_no_converter(node: torch.fx.Node, settings: Any = None) -> bool:
    """True for every ``aten.baddbmm`` node (Torch-TensorRT has no converter of it) while ours are on."""
    return not _disabled


def convert_baddbmm(ctx: Any, target: Any, args: tuple, kwargs: dict, name: str):
    from torch_tensorrt.dynamo._SourceIR import SourceIR
    from torch_tensorrt.dynamo.conversion import impl

    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    product = impl.matmul.matrix_multiply(ctx, target, SourceIR.ATEN, f"{name}_bmm", args[1], args[2])
    if alpha != 1:
        product = impl.elementwise.mul(ctx, target, SourceIR.ATEN, f"{name}_alpha", product, alpha)
    if beta == 0:
        return product
    base = args[0] if beta == 1 else impl.elementwise.mul(ctx, target, SourceIR.ATEN, f"{name}_beta", args[0], beta)
    return impl.elementwise.add(ctx, target, SourceIR.ATEN, f"{name}_add", base, product)


def _attention_args(node_args: tuple, node_kwargs: dict) -> tuple[Any, Any, Any, Any, float, bool]:
    """``(query, key, value, attn_mask, dropout_p, is_causal)`` of scaled_dot_product_attention's arguments."""
    args = list(node_args) + [None] * (6 - len(node_args))
    return args[0], args[1], args[2], args[3], args[4] or 0.0, bool(args[5])


def attention_value_dim_differs(node: torch.fx.Node, settings: Any = None) -> bool:
    """True for an ``aten.scaled_dot_product_attention`` node that Torch-TensorRT's validator rejects only because the
    value's head dim differs: query and key alike but in sequence length, value alike key but in head dim; no causal
    masking, no dropout, no grouped heads."""
    from torch_tensorrt.dynamo.conversion.aten_ops_converters import scaled_dot_product_attention_validator

    query, key, value, mask, dropout_p, is_causal = _attention_args(node.args, node.kwargs)
    q, k, v = _value(query), _value(key), _value(value)
    if _disabled or q is None or k is None or v is None or is_causal or dropout_p != 0.0:
        return False
    if node.kwargs.get("enable_gqa", False) or not q.dim() == k.dim() == v.dim() >= 3:
        return False
    mask_value = _value(mask)
    if mask is not None and (mask_value is None or mask_value.dtype not in (torch.bool, q.dtype)):
        return False
    alike = q.shape[:-2] == k.shape[:-2] == v.shape[:-2] and q.shape[-1] == k.shape[-1] and k.shape[-2] == v.shape[-2]
    return alike and not scaled_dot_product_attention_validator(node, settings)


def convert_attention_value_dim_differs(ctx: Any, target: Any, args: tuple, kwargs: dict, name: str):
    import tensorrt as trt
    from torch_tensorrt.dynamo._SourceIR import SourceIR
    from torch_tensorrt.dynamo.conversion import impl
    from torch_tensorrt.dynamo.conversion.converter_utils import get_trt_tensor

    ir = SourceIR.ATEN
    query, key, value, mask, _, _ = _attention_args(args, kwargs)
    query, key, value = (get_trt_tensor(ctx, t, f"{name}_{n}") for t, n in zip((query, key, value), "qkv"))
    scale = kwargs.get("scale")
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scaled = impl.elementwise.mul(ctx, target, ir, f"{name}_scale", query, scale)
    scores = impl.matmul.matrix_multiply(
        ctx, target, ir, f"{name}_scores", scaled, key, other_matrix_op=trt.MatrixOperation.TRANSPOSE
    )
    keep = None
    if mask is not None:
        mask = get_trt_tensor(ctx, mask, f"{name}_mask")
        if mask.dtype == trt.DataType.BOOL:
            keep = mask
            low = get_trt_tensor(ctx, float("-inf"), f"{name}_minus_inf", query.dtype)
            scores = impl.condition.where(ctx, target, ir, f"{name}_masked", scores, low, keep)
        else:
            scores = impl.elementwise.add(ctx, target, ir, f"{name}_bias", scores, mask)
    weights = impl.normalization.softmax(ctx, target, ir, f"{name}_softmax", scores, -1, False)
    if keep is not None:  # a fully masked row: softmax of -inf only is NaN, PyTorch's math kernel gives zeros
        zero = get_trt_tensor(ctx, 0.0, f"{name}_zero", query.dtype)
        weights = impl.condition.where(ctx, target, ir, f"{name}_safe", weights, zero, keep)
    return impl.matmul.matrix_multiply(ctx, target, ir, f"{name}_out", weights, value)


def topk_k_is_bounded_symint(node: torch.fx.Node, settings: Any = None) -> bool:
    """True for an ``aten.topk`` node whose ``k`` is a SymInt (Torch-TensorRT's validator takes an int only) with a
    known upper bound of at most ``TOPK_MAX_K``."""
    k = _value(node.args[1])
    if _disabled or not isinstance(k, torch.SymInt):
        return False
    upper = k.node.shape_env.bound_sympy(k.node.expr).upper
    return upper.is_number and bool(upper <= TOPK_MAX_K)


def convert_topk_symint_k(ctx: Any, target: Any, args: tuple, kwargs: dict, name: str):
    import tensorrt as trt
    from torch_tensorrt.dynamo._SourceIR import SourceIR
    from torch_tensorrt.dynamo.conversion import impl
    from torch_tensorrt.dynamo.conversion.converter_utils import (
        cast_trt_tensor,
        get_positive_dim,
        get_trt_tensor,
        set_layer_name,
    )

    args = list(args) + [None] * (5 - len(args))
    data, k = get_trt_tensor(ctx, args[0], f"{name}_input"), args[1]
    vector = len(data.shape) == 1
    if vector:  # ITopKLayer takes 2 dims or more
        data = impl.shuffle.reshape(ctx, target, SourceIR.ATEN, f"{name}_as_row", data, [1, -1])
    dim = get_positive_dim(-1 if args[2] is None else args[2], 1 if vector else len(data.shape)) + vector
    operation = trt.TopKOperation.MAX if args[3] in (None, True) else trt.TopKOperation.MIN
    k = get_trt_tensor(ctx, k, f"{name}_k")  # a SymInt arrives as a tensor; a constant one as an int
    k = impl.shuffle.reshape(ctx, target, SourceIR.ATEN, f"{name}_k_scalar", k, [])
    k = cast_trt_tensor(ctx, k, trt.int32, f"{name}_k_int32", target, SourceIR.ATEN)
    layer = ctx.net.add_topk(data, operation, 1, 1 << dim)  # k=1 stands in until input 1 overrides it
    layer.set_input(1, k)
    set_layer_name(layer, target, f"{name}_topk", SourceIR.ATEN)
    outputs = layer.get_output(0), layer.get_output(1)
    if not vector:
        return outputs
    return tuple(
        impl.shuffle.reshape(ctx, target, SourceIR.ATEN, f"{name}_{part}_as_vector", out, [-1])
        for part, out in zip(("values", "indices"), outputs)
    )


def isin_has_no_converter(node: torch.fx.Node, settings: Any = None) -> bool:
    """True for an ``aten.isin`` node (Torch-TensorRT has no converter of it) whose elements and test elements share
    a dtype of ``_ISIN_DTYPES`` and whose test elements' count is static and at least 1."""
    elements, test = _value(node.args[0]), node.args[1]
    if _disabled or elements is None or elements.dtype not in _ISIN_DTYPES:
        return False
    if node.target == torch.ops.aten.isin.Tensor_Scalar:
        return isinstance(test, (int, float)) and not isinstance(test, bool)
    test = _value(test)
    return test is not None and test.dtype == elements.dtype and isinstance(test.numel(), int) and test.numel() >= 1


def convert_isin(ctx: Any, target: Any, args: tuple, kwargs: dict, name: str):
    from torch_tensorrt.dynamo._SourceIR import SourceIR
    from torch_tensorrt.dynamo.conversion import impl
    from torch_tensorrt.dynamo.conversion.converter_utils import get_trt_tensor

    ir = SourceIR.ATEN
    elements = get_trt_tensor(ctx, args[0], f"{name}_elements")
    if target == torch.ops.aten.isin.Tensor_Scalar:
        found = impl.elementwise.eq(ctx, target, ir, f"{name}_eq", elements, args[1])
    else:
        test = get_trt_tensor(ctx, args[1], f"{name}_test")
        test = impl.shuffle.reshape(ctx, target, ir, f"{name}_test_row", test, [1] * len(elements.shape) + [-1])
        column = impl.unsqueeze.unsqueeze(ctx, target, ir, f"{name}_column", elements, len(elements.shape))
        matches = impl.elementwise.eq(ctx, target, ir, f"{name}_eq", column, test)
        found = impl.reduce.any(ctx, target, ir, f"{name}_any", matches, len(elements.shape), False)
    if kwargs.get("invert", False):
        found = impl.unary.logical_not(ctx, target, ir, f"{name}_invert", found)
    return found


def _cumulative_dim(node: torch.fx.Node) -> int | None:
    value = _value(node.args[0])
    if value is None or value.dim() == 0 or value.dtype not in _CUMULATIVE_DTYPES:
        return None
    dim = node.args[1] % value.dim()
    length = value.shape[dim]
    return dim if isinstance(length, int) and 1 <= length <= CUMULATIVE_MAX_LENGTH else None


def cumulative_extremum_is_static(node: torch.fx.Node, settings: Any = None) -> bool:
    """True for an ``aten.cummax`` / ``aten.cummin`` node (Torch-TensorRT has no converter of them) of a rank >= 1
    tensor of ``_CUMULATIVE_DTYPES`` along a dim of static length at most ``CUMULATIVE_MAX_LENGTH``."""
    return not _disabled and _cumulative_dim(node) is not None


def convert_cumulative_extremum(ctx: Any, target: Any, args: tuple, kwargs: dict, name: str):
    import numpy as np
    import tensorrt as trt
    from torch_tensorrt.dynamo._SourceIR import SourceIR
    from torch_tensorrt.dynamo.conversion import impl
    from torch_tensorrt.dynamo.conversion.converter_utils import cast_trt_tensor, get_trt_tensor, set_layer_name

    ir = SourceIR.ATEN
    x = get_trt_tensor(ctx, args[0], f"{name}_input")
    rank, is_bool = len(x.shape), x.dtype == trt.bool
    dim = args[1] % rank
    length = x.shape[dim]
    if is_bool:
        x = cast_trt_tensor(ctx, x, trt.int32, f"{name}_as_int32", target, ir)
    floating = x.dtype in (trt.float32, trt.float16, trt.bfloat16)
    operation = trt.ReduceOperation.MAX if target == torch.ops.aten.cummax.default else trt.ReduceOperation.MIN

    # Over axis dim + 1 (j), in the tensor's own dtype: Torch-TensorRT's impl.reduce.amax/amin cast int8/int32 to
    # float32 first (inexact past 2**24, and cummax of int32 values must stay int32), so the layer is added here.
    def reduce_j(tensor, operation, part):
        layer = ctx.net.add_reduce(tensor, operation, 1 << (dim + 1), False)
        set_layer_name(layer, target, f"{name}_{part}", ir)
        return layer.get_output(0)

    def around(matrix):  # an (N, N) constant shaped to broadcast over axes (dim, dim + 1) = (i, j)
        return matrix.reshape([1] * dim + list(matrix.shape) + [1] * (rank - dim - 1))

    positions = np.arange(length, dtype=np.int32)
    prefix = get_trt_tensor(ctx, around(positions[None, :] <= positions[:, None]), f"{name}_prefix")
    x_j = impl.unsqueeze.unsqueeze(ctx, target, ir, f"{name}_x_j", x, dim)  # (.., 1, N, ..)
    x_i = impl.unsqueeze.unsqueeze(ctx, target, ir, f"{name}_x_i", x, dim + 1)  # (.., N, 1, ..)
    # Past i, x[i] stands in: it is in the prefix, so the extremum does not change (no dtype's extreme needed).
    values = reduce_j(impl.condition.where(ctx, target, ir, f"{name}_in_prefix", x_j, x_i, prefix), operation, "values")
    if floating:  # from a NaN on the value is NaN, whatever the reduce does with one
        nan_j = impl.unary.isnan(ctx, target, ir, f"{name}_nan_j", x_j)
        nan_in_prefix = impl.elementwise.logical_and(ctx, target, ir, f"{name}_nan_in_prefix", nan_j, prefix)
        seen_nan = impl.reduce.any(ctx, target, ir, f"{name}_seen_nan", nan_in_prefix, dim + 1, False)
        nan = get_trt_tensor(ctx, float("nan"), f"{name}_nan", x.dtype)
        values = impl.condition.where(ctx, target, ir, f"{name}_nan_values", nan, values, seen_nan)
    value_i = impl.unsqueeze.unsqueeze(ctx, target, ir, f"{name}_value_i", values, dim + 1)
    hits = impl.elementwise.eq(ctx, target, ir, f"{name}_hits", x_j, value_i)
    if floating:
        nan_i = impl.unary.isnan(ctx, target, ir, f"{name}_nan_i", value_i)
        both_nan = impl.elementwise.logical_and(ctx, target, ir, f"{name}_both_nan", nan_j, nan_i)
        hits = impl.elementwise.logical_or(ctx, target, ir, f"{name}_hits_or_nan", hits, both_nan)
    hits = impl.elementwise.logical_and(ctx, target, ir, f"{name}_hits_in_prefix", hits, prefix)
    j = get_trt_tensor(ctx, positions.reshape([1] * (dim + 1) + [length] + [1] * (rank - dim - 1)), f"{name}_j")
    none = get_trt_tensor(ctx, np.array([-1], dtype=np.int32), f"{name}_none")
    last = reduce_j(
        impl.condition.where(ctx, target, ir, f"{name}_hit_j", j, none, hits), trt.ReduceOperation.MAX, "last"
    )
    indices = cast_trt_tensor(ctx, last, trt.int64, f"{name}_indices", target, ir)
    if is_bool:
        values = cast_trt_tensor(ctx, values, trt.bool, f"{name}_as_bool", target, ir)
    return values, indices


def _masked_rows_entry() -> Any:
    from ..plan import entry_for_target

    packet = getattr(getattr(torch.ops, "torchtrt", None), "masked_rows", None)
    return None if packet is None else entry_for_target(packet.default)


def _masked_layout(x: Any, mask: Any) -> tuple[int, list[int]] | None:
    """``(k, rows' trailing dims)`` where ``mask`` (bool, rank k >= 1) covers x's first k dims and x's dims past them
    are static (the rows masked_rows takes: x as (prod(x.shape[:k]), *trailing)); else None."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    k = mask.dim()
    if mask.dtype != torch.bool or not 1 <= k <= x.dim():
        return None
    if not all(statically_known_true(a == b) for a, b in zip(x.shape[:k], mask.shape)):
        return None
    trailing = list(x.shape[k:])
    return (k, trailing) if all(isinstance(d, int) for d in trailing) else None


def index_by_mask_is_masked_rows(node: torch.fx.Node, settings: Any = None) -> bool:
    """True for an ``aten.index.Tensor`` node indexing x's leading dims by one boolean mask of their sizes (any rank;
    x's dims past the mask's static) that Torch-TensorRT's boolean-index validator rejects (TensorRT-RTX) and
    ``torchtrt::masked_rows`` takes (on x and the mask flattened over the mask's dims)."""
    from torch_tensorrt.dynamo.conversion.aten_ops_converters import index_nonbool_validator

    from ._factory import accept, rejection

    x, indices = node.args[0], node.args[1]
    entry = _masked_rows_entry()
    if _disabled or entry is None or len(indices) != 1 or not isinstance(indices[0], torch.fx.Node):
        return False
    x_value, mask_value = _value(x), _value(indices[0])
    if x_value is None or mask_value is None or (layout := _masked_layout(x_value, mask_value)) is None:
        return False
    if index_nonbool_validator(node, settings):
        return False
    if mask_value.dim() == 1:
        return accept(node, rejection(entry, [x, indices[0]], {}))
    rows = mask_value.numel()
    flat_x, flat_mask = x_value.new_empty((rows, *layout[1])), mask_value.new_empty((rows,))
    return accept(node, rejection(entry, [flat_x, flat_mask], {}))


def convert_index_by_mask_as_masked_rows(ctx: Any, target: Any, args: tuple, kwargs: dict, name: str):
    from torch_tensorrt.dynamo._SourceIR import SourceIR
    from torch_tensorrt.dynamo.conversion import impl
    from torch_tensorrt.dynamo.conversion.converter_utils import get_trt_tensor

    from ._factory import make_converter

    x, mask = args[0], args[1][0]
    k = len(mask.shape)
    if k > 1:  # the validator took x's dims past the mask's as static
        x = get_trt_tensor(ctx, x, f"{name}_x")
        trailing = list(x.shape[k:])
        x = impl.shuffle.reshape(ctx, target, SourceIR.ATEN, f"{name}_x_rows", x, [-1, *trailing])
        mask = get_trt_tensor(ctx, mask, f"{name}_mask")
        mask = impl.shuffle.reshape(ctx, target, SourceIR.ATEN, f"{name}_mask_rows", mask, [-1])
    return make_converter(_masked_rows_entry())(ctx, target, (x, mask), {}, name)


def register() -> bool:
    """Register the converters above with Torch-TensorRT (after its own); False when it is not installed."""
    global _registered
    from .._compat import torch_tensorrt

    if torch_tensorrt() is None:
        return False
    if _registered:
        return True
    from torch_tensorrt.dynamo.conversion._ConverterRegistry import dynamo_tensorrt_converter

    for target, validator, converter in (
        (torch.ops.aten.avg_pool2d.default, avg_pool2d_ceil_is_floor, convert_avg_pool2d_ceil_as_floor),
        (torch.ops.aten.baddbmm.default, baddbmm_has_no_converter, convert_baddbmm),
        (
            torch.ops.aten.scaled_dot_product_attention.default,
            attention_value_dim_differs,
            convert_attention_value_dim_differs,
        ),
        (torch.ops.aten.topk.default, topk_k_is_bounded_symint, convert_topk_symint_k),
        (torch.ops.aten.isin.Tensor_Tensor, isin_has_no_converter, convert_isin),
        (torch.ops.aten.isin.Tensor_Scalar, isin_has_no_converter, convert_isin),
        (torch.ops.aten.cummax.default, cumulative_extremum_is_static, convert_cumulative_extremum),
        (torch.ops.aten.cummin.default, cumulative_extremum_is_static, convert_cumulative_extremum),
    ):
        dynamo_tensorrt_converter(target, capability_validator=validator, supports_dynamic_shapes=True)(converter)
    dynamo_tensorrt_converter(
        torch.ops.aten.index.Tensor,
        capability_validator=index_by_mask_is_masked_rows,
        supports_dynamic_shapes=True,
        requires_output_allocator=True,
    )(convert_index_by_mask_as_masked_rows)
    _registered = True
    return True

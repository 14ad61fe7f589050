"""What ``converters.aten_fallbacks`` decides from a node's fake values alone (no Torch-TensorRT): which boolean
``aten.index.Tensor`` nodes become masked_rows over the mask's dims flattened into rows, which ``aten.isin`` and
``aten.cummax`` nodes its validators take. The partition and the plans
are the tt tier's (tests/tt/test_aten_fallbacks_tt.py)."""

from __future__ import annotations

import pytest
import torch

from torchtrt_plugins.converters import aten_fallbacks


class _Index(torch.nn.Module):
    def forward(self, x, mask):
        return x[mask]


def _index_values(x, mask, dynamic_shapes=None):
    program = torch.export.export(_Index(), (x, mask), dynamic_shapes=dynamic_shapes)
    (node,) = [n for n in program.graph.nodes if n.target == torch.ops.aten.index.Tensor]
    return node.args[0].meta["val"], node.args[1][0].meta["val"]


def _dim(name: str):
    return torch.export.Dim(name, min=2, max=16)


@pytest.mark.parametrize(
    "x_shape, mask_shape, dynamic, layout",
    [
        ((6, 4), (6,), None, (1, [4])),
        ((3, 5, 4), (3, 5), None, (2, [4])),
        ((2, 3, 5, 4), (2, 3, 5), None, (3, [4])),
        ((3, 5), (3, 5), None, (2, [])),  # the whole tensor: 1-D rows
        ((3, 5, 4), (3, 5), ({0: "batch"}, {0: "batch"}), (2, [4])),  # symbolic leading dims
        ((3, 5, 4), (3, 5), ({2: "width"}, None), None),  # a symbolic dim past the mask's: no static rows
    ],
)
def test_masked_layout_of_exported_index_nodes(x_shape, mask_shape, dynamic, layout):
    x = torch.randn(x_shape)
    mask = torch.rand(mask_shape, generator=torch.Generator().manual_seed(0)) > 0.5
    dims = {}
    shapes = None
    if dynamic is not None:
        shapes = tuple(None if d is None else {k: dims.setdefault(v, _dim(v)) for k, v in d.items()} for d in dynamic)
    x_value, mask_value = _index_values(x, mask, shapes)
    assert aten_fallbacks._masked_layout(x_value, mask_value) == layout
    if layout is not None:  # the rows masked_rows takes pick x[mask], in order
        rows = x.reshape(-1, *layout[1])[mask.reshape(-1)]
        torch.testing.assert_close(rows, x[mask], rtol=0, atol=0)


def test_masked_layout_takes_boolean_masks_of_the_leading_dims_only():
    x_value, mask_value = _index_values(torch.randn(3, 5, 4), torch.ones(3, 5, dtype=torch.bool))
    assert aten_fallbacks._masked_layout(x_value, mask_value.to(torch.uint8)) is None
    assert aten_fallbacks._masked_layout(x_value[0], mask_value) is None  # (3, 5) is not the leading dims of (5, 4)


class _IsIn(torch.nn.Module):
    def __init__(self, test):
        super().__init__()
        self.test = test

    def forward(self, x, test):
        return torch.isin(x, self.test if self.test is not None else test)


def _node(model, inputs, target, dynamic_shapes=None):
    program = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    (node,) = [n for n in program.graph.nodes if n.target == target]
    return node


@pytest.mark.parametrize(
    "x, test, taken",
    [
        (torch.tensor([1, 2, 3]), torch.tensor([3, 4]), True),
        (torch.tensor([1.0, 2.0]), torch.tensor([2.0]), True),
        (torch.tensor([1, 2, 3]), torch.tensor([3.0]), False),  # dtypes differ: PyTorch promotes, we do not
        (torch.tensor([1, 2, 3]), torch.zeros(0, dtype=torch.int64), False),  # no test elements
        (torch.tensor([1, 2], dtype=torch.uint8), torch.tensor([2], dtype=torch.uint8), False),  # uint8: not ours
        (torch.tensor([1, 2, 3]), 2, True),  # Tensor_Scalar
    ],
    ids=["int64", "float32", "mixed-dtypes", "empty-test", "uint8", "scalar"],
)
def test_isin_validator(x, test, taken):
    scalar = not isinstance(test, torch.Tensor)
    target = torch.ops.aten.isin.Tensor_Scalar if scalar else torch.ops.aten.isin.Tensor_Tensor
    node = _node(_IsIn(test if scalar else None), (x, x if scalar else test), target)
    assert aten_fallbacks.isin_has_no_converter(node) is taken
    with aten_fallbacks.disabled():
        assert not aten_fallbacks.isin_has_no_converter(node)


class _Cummax(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cummax(x, self.dim)


@pytest.mark.parametrize(
    "shape, dim, dynamic, taken",
    [
        ((3, 7), 1, None, True),
        ((3, 7), -2, None, True),
        ((2, aten_fallbacks.CUMULATIVE_MAX_LENGTH), 1, None, True),
        ((2, aten_fallbacks.CUMULATIVE_MAX_LENGTH + 1), 1, None, False),  # past the N x N layers' limit
        ((4, 7), 1, {0: "batch"}, True),  # symbolic, but not along dim
        ((4, 7), 1, {1: "n"}, False),  # symbolic along dim: no static N
    ],
)
def test_cumulative_extremum_validator(shape, dim, dynamic, taken):
    shapes = None if dynamic is None else ({k: torch.export.Dim(v, min=2, max=64) for k, v in dynamic.items()},)
    node = _node(_Cummax(dim), (torch.randn(shape),), torch.ops.aten.cummax.default, shapes)
    assert aten_fallbacks.cumulative_extremum_is_static(node) is taken

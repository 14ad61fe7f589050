"""What ``converters.aten_fallbacks`` decides from a node's fake values alone (no Torch-TensorRT): which boolean
``aten.index.Tensor`` nodes become masked_rows over the mask's dims flattened into rows. The partition and the plans
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

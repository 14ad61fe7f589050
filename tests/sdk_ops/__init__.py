"""Test ops declared through torchtrt_plugins.declare, with launchers built by the SDK (shapes.cu).

``sdk_test::shapes`` exercises every shape-program construct (input dims, a SymInt shape input, +, -, *, floor and
ceil division, min, max, constants from int fields) and every scalar field type; ``sdk_test::nonzero_count`` a
data-dependent size; ``sdk_test::broken`` a launcher that returns an error.
"""

from __future__ import annotations

from pathlib import Path

import torch

import torchtrt_plugins as ttp

LIBRARY = ttp.sdk.PluginLibrary("sdk_test", sources=[Path(__file__).parent / "shapes.cu"])

_LIB = torch.library.Library("sdk_test", "DEF")
_LIB.define("shapes(Tensor x, Tensor w, SymInt n, int k, bool flag=False, float scale=1.0) -> (Tensor, Tensor)")
_LIB.define("nonzero_count(Tensor x) -> Tensor")
_LIB.define("broken(Tensor x) -> Tensor")


def shapes_sizes(x_shape, w_shape, n, k):
    rows, cols = x_shape
    first = (rows // k, -(-cols // k), max(rows, n), min(n, cols) * 2 - 1 + k)
    return first, (n + w_shape[0],)


def _shapes_fake(x, w, n, k, flag=False, scale=1.0):
    torch._check(w.shape[0] == x.shape[1])
    first = (
        x.shape[0] // k,
        -(-x.shape[1] // k),
        torch.sym_max(x.shape[0], n),
        torch.sym_min(n, x.shape[1]) * 2 - 1 + k,
    )
    return x.new_empty(first), x.new_empty((n + w.shape[0],), dtype=torch.int32)


def _shapes_cpu(x, w, n, k, flag=False, scale=1.0):
    first, second = shapes_sizes(tuple(x.shape), tuple(w.shape), n, k)
    return x.new_zeros(first), x.new_zeros(second, dtype=torch.int32)


def _nonzero_fake(x):
    count = torch.library.get_ctx().new_dynamic_size(max=1 << 20)
    return x.new_empty((count, x.shape[1]))


torch.library.register_fake("sdk_test::shapes", _shapes_fake, lib=_LIB)
_LIB.impl("shapes", _shapes_cpu, "CPU")
torch.library.register_fake("sdk_test::nonzero_count", _nonzero_fake, lib=_LIB)
_LIB.impl("nonzero_count", lambda x: x.new_zeros((0, x.shape[1])), "CPU")
torch.library.register_fake("sdk_test::broken", lambda x: torch.empty_like(x), lib=_LIB)
_LIB.impl("broken", lambda x: torch.zeros_like(x), "CPU")

SHAPES = ttp.declare(
    "sdk_test::shapes",
    library=LIBRARY,
    launcher="sdk_test::zeros",
    tactics={3: "sdk_test::zeros", 7: "sdk_test::zeros"},
    workspace="sdk_test::zerosWorkspace",
    ranges={"k": ttp.Range(min=1, max=16), "n": ttp.Range(min=0), "scale": ttp.Range(min=0.0, min_inclusive=False)},
    dtypes={"x": (torch.float32, torch.float16), "w": (torch.float32, torch.float16)},
    same_dtype={"w": "x"},
    weight_fields=("w",),
)
NONZERO_COUNT = ttp.declare(
    "sdk_test::nonzero_count",
    library=LIBRARY,
    launcher="sdk_test::zeros",
    dtypes={"x": (torch.float32,)},
    sizes_first=True,
    example_inputs=(torch.zeros(4, 3),),
)
BROKEN = ttp.declare("sdk_test::broken", library=LIBRARY, launcher="sdk_test::failing", dtypes={"x": (torch.float32,)})


def shapes_call(k: int = 3, symbolic: bool = True, **scalars):
    """The converter's plan of ``sdk_test::shapes`` on x (6, 5) and w (5,) with ``n`` = 9, the size of another
    tensor: symbolic (traced: n becomes a shape input) or a constant."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchtrt_plugins import converters

    x, w = torch.zeros(6, 5), torch.zeros(5)
    if not symbolic:
        return converters.plan(SHAPES.spec, (x, w, 9, k), scalars)
    graph = make_fx(lambda x, w, y: torch.ops.sdk_test.shapes(x, w, y.shape[0], k, **scalars), tracing_mode="symbolic")(
        x, w, torch.zeros(9)
    )
    (node,) = [n for n in graph.graph.nodes if n.target == torch.ops.sdk_test.shapes.default]
    return converters.plan_node(node)

"""masked_rows: eager composite vs x[mask] vs torch.compile vs our CUDA op vs the plugin's enqueue through the
harness vs TensorRT engines.

A size is ``(N, D, P)``: x (N, D) and a bool mask (N,) keeping P % of the rows (shown as ``NxDxP``). P = 50
draws each mask entry at random (seeded: the same mask for every provider and run); P = 0 and P = 100 are the
all-false and all-true masks. K, the number of rows kept, is counted from the mask itself.

Bytes moved = read the mask + read the kept rows + write them
            = N*1 + 2*K*D*elt   (elt: bytes per element of x; the bool mask is 1 byte an entry)
(rows that are dropped are never read). % of copy compares with a device-to-device copy of that many bytes.
The plugin's enqueue reads the mask TensorRT hands it, INT32: its rows count 4 bytes a mask entry
(N*4 + 2*K*D*elt), against the copy's time scaled to those bytes (``Provider.nbytes``).

What is timed differs in one way that matters here: the eager op (and x[mask], and the reference) read K back to
the host once per call to size the output (one device->host sync); the plugin's enqueue has no host sync (TensorRT
sizes the output from the plugin's size tensor), and the harness times the enqueue alone. The plugin takes the
mask as int32 (TensorRT plugins take no bool I/O; an engine casts it first): ``plugin_enqueue`` casts it before
the timing starts, so the cast is not timed there, while the ``tensorrt[*]`` engines time their cast layer.

    python -m torchtrt_plugins.benchmarks.bench_masked_rows [--quick] [--dtypes fp32,bf16] [--csv PATH]
"""

from __future__ import annotations

import sys

import torch

import torchtrt_plugins
from torchtrt_plugins.benchmarks import common
from torchtrt_plugins.benchmarks.common import (
    Case,
    Plan,
    Provider,
    needs_cuda,
    needs_eager_kernel,
    needs_inductor,
    needs_tensorrt,
    tensorrt_engine,
)

ENTRY = torchtrt_plugins.get("masked_rows")
SEED = 0
BF16, FP32 = torch.bfloat16, torch.float32


def moved_bytes(rows: int, kept: int, row_elements: int, element_size: int, mask_element_size: int = 1) -> int:
    """Read the mask (rows entries) + read the kept rows + write them."""
    return rows * mask_element_size + 2 * kept * row_elements * element_size


def make_mask(rows: int, percent: int, device: torch.device) -> torch.Tensor:
    if percent <= 0:
        return torch.zeros(rows, dtype=torch.bool, device=device)
    if percent >= 100:
        return torch.ones(rows, dtype=torch.bool, device=device)
    generator = torch.Generator(device=device).manual_seed(SEED)
    return torch.rand(rows, generator=generator, device=device) < percent / 100


def make_case(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Case:
    rows, row_elements, percent = shape
    if dtype.is_floating_point:
        x = torch.randn(rows, row_elements, dtype=dtype, device=device)
    else:
        x = torch.randint(-1000, 1000, (rows, row_elements), dtype=dtype, device=device)
    mask = make_mask(rows, percent, device)
    kept = int(mask.sum())  # one sync, here, when the case is built
    nbytes = moved_bytes(rows, kept, row_elements, x.element_size(), mask.element_size())
    return Case("masked_rows", shape, dtype, device, (x, mask), {}, nbytes)


def expected(case: Case) -> torch.Tensor:
    return ENTRY.reference(*case.inputs)


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    tol = ENTRY.spec.tolerance(dtype)
    return tol.atol, tol.rtol


def eager_composite(case: Case):
    x, mask = case.inputs
    return lambda: ENTRY.reference(x, mask)


def boolean_index(case: Case):
    """Plain boolean indexing, as one writes it (the spec's reference is written the same way today)."""
    x, mask = case.inputs
    return lambda: x[mask]


def inductor(case: Case):
    """The reference through inductor, as one graph (fullgraph): a graph break would time eager, so it is a skip."""
    x, mask = case.inputs
    compiled = common.compile_inductor(ENTRY.reference, fullgraph=True)
    try:
        # K is data: dynamo must capture an op whose output shape depends on it. Compiled here, once; later
        # calls (outside the patch) reuse the compiled graph.
        with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
            compiled(x, mask)
    except Exception as err:  # noqa: BLE001 - cannot compile: a skip with the reason, not an error
        raise common.Skip(f"torch.compile cannot compile x[mask] as one graph: {common._first_line(err)}") from err
    return lambda: compiled(x, mask)


def torchtrt_op(case: Case):
    x, mask = case.inputs
    return lambda: torch.ops.torchtrt.masked_rows(x, mask)


def _plugin_module(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.ops.torchtrt.masked_rows(x, mask)


def _composite_module(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return ENTRY.reference(x, mask)


PROVIDERS = [
    Provider("eager_composite", eager_composite),
    Provider("x[mask]", boolean_index),
    Provider("torch.compile", inductor, (needs_inductor,)),
    Provider("torchtrt", torchtrt_op, (needs_eager_kernel(ENTRY),)),
    *common.plugin_enqueue_providers(ENTRY),
    Provider("tensorrt[plugin]", tensorrt_engine(_plugin_module, lowering=True), (needs_cuda, needs_tensorrt)),
    Provider("tensorrt[composite]", tensorrt_engine(_composite_module, lowering=False), (needs_cuda, needs_tensorrt)),
]

ROWS = (10_000, 1_000_000, 10_000_000)
ROW_ELEMENTS = (1, 8, 64, 1024)
#: Every (N, D) but 10M rows of 1024 (x alone would be 41 GB in fp32): x is at most 4.1 GB in fp32. In fp32 the
#: cases move 50 KB (10k x 1, half kept) to 8.2 GB (1M x 1024, all kept); all-false ones move the mask alone.
MAX_X_ELEMENTS = 1_100_000_000
SIZES = tuple((n, d) for n in ROWS for d in ROW_ELEMENTS if n * d <= MAX_X_ELEMENTS)
# Half the rows at random for every size; all-false and all-true where the mask is large (>= 1M rows).
FULL = tuple((n, d, 50) for n, d in SIZES) + tuple((n, d, p) for p in (0, 100) for n, d in SIZES if n >= 1_000_000)

BENCHMARK = common.Benchmark(
    name="masked_rows",
    make_case=make_case,
    providers=PROVIDERS,
    full=Plan(FULL, (FP32,)),
    quick=Plan(((1_000_000, 64, 50), (10_000_000, 8, 50), (1_000_000, 64, 100)), (FP32,)),
    cpu=Plan(((1_000, 8, 50), (10_000, 64, 50), (10_000, 64, 0), (10_000, 64, 100)), (FP32, BF16)),
    cpu_quick=Plan(((1_000, 8, 50), (4_096, 64, 100)), (FP32,)),
    expected=expected,
    tolerance=tolerance,
)


if __name__ == "__main__":
    sys.exit(common.script_main(BENCHMARK))

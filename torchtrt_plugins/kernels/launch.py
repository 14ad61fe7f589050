"""A Python kernel launched the way its own package does (Triton's launcher, CuPy): what ``testing.check_op``
compares the generated launcher with on a GPU."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ..declaration import Declaration
from .describe import CudaKernel, _call
from .source import _functions, _meta

# ---------------------------------------------------------------------------------------------- from Python


def launch_from_python(
    declaration: Declaration,
    args: Sequence[Any],
    outputs: Sequence[torch.Tensor],
    tactic: int = 0,
    kwargs: Mapping[str, Any] | None = None,
) -> None:
    """Launch the op's kernel for ``tactic`` the way its own package does (Triton's launcher; CuPy), writing
    ``outputs`` (contiguous CUDA tensors at the op's output shapes): the reference that check_op and the benchmarks
    compare the compiled launcher with."""
    kernel, index = declaration.aot_kernels[tactic]
    bound = declaration.bind(*args, **(kwargs or {}))
    named = {a.name: bound[a.name] for a in declaration.schema.arguments}
    tensors = {a.name: bound[a.name].contiguous() for a in declaration.tensor_args}
    named.update(tensors)
    named.update({o.name: t for o, t in zip(declaration.spec.outputs, outputs)})
    variants = kernel.variants(index)
    if kernel.select is not None:
        value = _call(kernel.select, {**named, "meta": _meta(variants[0])})
        chosen = [v for v in variants if value <= v.bound]
        if not chosen:
            raise kernel.fail(f"select gives {value}, beyond the largest variant bound {variants[-1].bound}")
        variant = chosen[0]
    else:
        variant = variants[0]
    functions = dict(_functions(kernel, variant))
    grid = tuple(functions[f"grid[{axis}]"](named) for axis in range(3))
    scalars = [named[a.name] for a in declaration.scalar_args]
    tensor_names = [a.name for a in declaration.tensor_args]
    values = []
    for p in kernel.bound_params:
        if p.kind == "input":
            values.append(tensors[tensor_names[p.index]])
        elif p.kind == "output":
            values.append(outputs[p.index])
        elif p.kind == "scalar":
            values.append(scalars[p.index])
        elif p.kind == "expr":
            values.append(int(_call(p.value, {**named, "meta": _meta(variant)})))
        elif p.kind == "const":
            values.append(p.value)
        else:
            values.append(variant.constexprs.get(p.name, p.value))
    if kernel.kind == "triton":
        runtime = [v for p, v in zip(kernel.bound_params, values) if p.kind not in ("constexpr",)]
        names = [p.name for p in kernel.bound_params if p.kind not in ("constexpr",)]
        constexprs = {p.name: v for p, v in zip(kernel.bound_params, values) if p.kind == "constexpr"}
        for index in kernel.zeroed_outputs:  # what the autotuner's reset_to_zero does before its own launches
            outputs[index].zero_()
        kernel.jit[grid](
            **dict(zip(names, runtime)),
            **constexprs,
            num_warps=variant.num_warps,
            num_stages=variant.num_stages,
        )
        return
    _cupy_launch(kernel, grid, values, tensors, declaration)


def _cupy_launch(kernel: CudaKernel, grid: tuple, values: list, tensors: dict, declaration: Declaration) -> None:
    import cupy
    import numpy

    dtype = tensors[kernel.dtype_of].dtype if kernel.dtype_of else None
    if not hasattr(kernel, "_cupy_functions"):
        kernel._cupy_functions = {}
    function = kernel._cupy_functions.get(dtype)
    if function is None:
        if kernel.names:
            module = cupy.RawModule(
                code=kernel.code, options=kernel.options, name_expressions=list(kernel.names.values())
            )
        else:
            module = cupy.RawModule(code=kernel.code, options=kernel.options)
        function = module.get_function(kernel.function_for(dtype) if kernel.names else kernel.function_name)
        kernel._cupy_functions[dtype] = function
    numpy_types = {
        "i32": numpy.int32,
        "u32": numpy.uint32,
        "i64": numpy.int64,
        "u64": numpy.uint64,
        "f32": numpy.float32,
        "f64": numpy.float64,
        "bool": numpy.bool_,
    }
    converted = []
    for p, v in zip(kernel.bound_params, values):
        converted.append(numpy.uint64(v.data_ptr()) if p.ctype == "ptr" else numpy_types[p.ctype](v))
    stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    with stream:
        function(grid, kernel.block, tuple(converted), shared_mem=kernel.shared_mem)

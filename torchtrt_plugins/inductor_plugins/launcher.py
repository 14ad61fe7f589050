"""The C++ launcher of a generated op (the SDK's launcher ABI): Inductor's launch sequence over the embedded cubins.

Every size is static: the launcher checks that its inputs have the shapes and dtypes it was compiled for, points
each kernel argument at an input, an output or its offset in the workspace (the intermediates, sized when the op is
generated) and launches the kernels in Inductor's order on the call's stream through ``sdk/cubin_launch.h``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..dtypes import KERNEL_NAMES
from ..kernels.source import cubin_kernel_cxx
from .inductor_code import CompiledSegment, Pointer, Value

#: The alignment Inductor's kernels assume of every tensor they get (it specializes pointers on it).
POINTER_ALIGNMENT = 16

_VALUE_TYPES = {"i32": "int32_t", "i64": "int64_t", "fp32": "float", "i1": "int8_t"}


def _argument(arg: Pointer | Value, variable: str) -> str:
    if isinstance(arg, Value):
        value = repr(float(arg.value)) + "f" if arg.type == "fp32" else str(int(arg.value))
        return f"{_VALUE_TYPES[arg.type]} {variable} = {value};"
    base = {
        "input": f"const_cast<void*>(args.inputs[{arg.index}].data)",
        "output": f"args.outputs[{arg.index}].data",
        "workspace": "args.workspace",
    }[arg.where]
    return f"void* {variable} = static_cast<char*>({base}) + {arg.offset};"


def _shapes_check(label: str, tensors: str, metas: Sequence[torch.Tensor]) -> list[str]:
    terms = [f"args.nb{tensors.capitalize()} == {len(metas)}"]
    for i, meta in enumerate(metas):
        terms.append(f"args.{tensors}[{i}].rank == {meta.dim()}")
        terms.append(f"args.{tensors}[{i}].dtype == ::ttp::DType::{KERNEL_NAMES[meta.dtype]}")
        terms += [f"args.{tensors}[{i}].dims[{d}] == {size}" for d, size in enumerate(meta.shape)]
    shapes = ", ".join(f"{KERNEL_NAMES[m.dtype]}{list(m.shape)}" for m in metas)
    return [
        f"    if (!({' && '.join(terms)}))",
        "    {",
        f'        return ::ttp::sdk::launchFailure(cudaErrorInvalidValue, kOp, "segment", "{label} other than the '
        f'ones it was generated for ({shapes})");',
        "    }",
    ]


def launcher_source(
    segment: CompiledSegment,
    op: str,
    symbol: str,
    workspace_symbol: str,
    inputs: Sequence[torch.Tensor],
    outputs: Sequence[torch.Tensor],
) -> str:
    """C++ defining ``cudaError_t <symbol>(LaunchArgs const&)`` and ``size_t <workspace_symbol>(LaunchArgs const&)``
    for the op ``op`` (both symbols in one namespace)."""
    namespace, _, name = symbol.rpartition("::")
    workspace_name = workspace_symbol.rpartition("::")[2]
    out = [
        f"// The generated op {op}: Inductor's kernels for a segment of a model (torchtrt_plugins.inductor_plugins);",
        "// do not edit.",
        '#include "sdk/cubin_launch.h"',
        '#include "sdk/ttp_sdk.h"',
        "",
        "#include <cstdint>",
        "",
        "namespace",
        "{",
        f'char const kOp[] = "{op}";',
    ]
    for k, (kernel_name, compiled) in enumerate(zip(segment.names, segment.kernels)):
        out += cubin_kernel_cxx(f"kKernel{k}", op, kernel_name, compiled)
    out += ["} // namespace", "", f"namespace {namespace}", "{", ""]
    out += [
        f"size_t {workspace_name}(::ttp::sdk::LaunchArgs const& /*args*/)",
        "{",
        f"    return {segment.workspace};",
        "}",
        "",
        f"cudaError_t {name}(::ttp::sdk::LaunchArgs const& args)",
        "{",
    ]
    out += _shapes_check("inputs", "inputs", inputs)
    out += _shapes_check("outputs", "outputs", outputs)
    # Inductor compiled the kernels for 16-byte aligned tensors (tt.divisibility); it would recompile for others.
    aligned = " && ".join(
        f"reinterpret_cast<uintptr_t>(args.{kind}[{i}].data) % {POINTER_ALIGNMENT} == 0"
        for kind, metas in (("inputs", inputs), ("outputs", outputs))
        for i in range(len(metas))
    )
    out += [
        f"    if (!({aligned or 'true'}))",
        "    {",
        '        return ::ttp::sdk::launchFailure(cudaErrorInvalidValue, kOp, "segment", "a tensor not '
        f'{POINTER_ALIGNMENT}-byte aligned (its kernels were compiled for aligned ones)");',
        "    }",
    ]
    if segment.workspace:
        out += [
            f"    if (args.workspace == nullptr || args.workspaceSize < {segment.workspace})",
            "    {",
            '        return ::ttp::sdk::launchFailure(cudaErrorInvalidValue, kOp, "segment", "a workspace smaller than '
            f'its intermediates ({segment.workspace} bytes)");',
            "    }",
        ]
    for n, launch in enumerate(segment.launches):
        variables = [f"a{i}" for i in range(len(launch.args))]
        out += ["    {"]
        out += [f"        {_argument(arg, v)}" for arg, v in zip(launch.args, variables)]
        out += ["        void* globalScratch = nullptr;", "        void* profileScratch = nullptr;"]
        pointers = ", ".join([*(f"&{v}" for v in variables), "&globalScratch", "&profileScratch"])
        grid = ", ".join(f"{g}u" for g in launch.grid)
        out += [
            f"        void* params[] = {{{pointers}}};",
            f"        uint64_t const grid[3] = {{{grid}}};",
            f"        cudaError_t const status = ::ttp::sdk::launchCubin(kKernel{launch.kernel}, grid, params, "
            "args.stream);",
            "        if (status != cudaSuccess)",
            "        {",
            f"            return status; // launch {n} of {len(segment.launches)}",
            "        }",
            "    }",
        ]
    out += ["    return cudaSuccess;", "}", "", f"}} // namespace {namespace}", ""]
    return "\n".join(out)

"""The C++ launcher of a generated op (the SDK's launcher ABI): Inductor's launch sequence over the embedded cubins.

Every size of the sequence (grids, size arguments, offsets, the intermediates' bytes) is an expression of the
segment's size symbols, each read off one input dimension at run time; the expressions are translated as the shape
rules are (``_derive``: +, -, *, floor and ceil division, min, max) and printed as C++ over the launch's input dims
(``kernels.source``). The launcher checks the dims, dtypes and symbol ranges it was generated for, points each
kernel argument at an input, an output or its intermediate's offset in the workspace, and launches the kernels in
Inductor's order on the call's stream through ``sdk/cubin_launch.h``. The workspace function lays the intermediates
out the same way at the dims it is given (the profile's maximum, from ``getWorkspaceSize``).
"""

from __future__ import annotations

import sympy
import torch

from .. import _derive
from ..dtypes import KERNEL_NAMES
from ..kernels.source import _cxx_expr, cubin_kernel_cxx
from .inductor_code import ALIGNMENT, CompiledSegment, Pointer, Refused, Size, Value, symbol

#: The alignment Inductor's kernels assume of every tensor they get (it specializes pointers on it).
POINTER_ALIGNMENT = 16

_VALUE_TYPES = {"i32": "int32_t", "i64": "int64_t", "fp32": "float", "i1": "int8_t"}


class _Printer:
    """Sizes of a segment as C++ int64 expressions over ``args.inputs[i].dims[d]``."""

    def __init__(self, op: str, segment: CompiledSegment):
        self.translate = _derive._Translator(
            op, {symbol(s.name): (_derive.DIM, s.input, s.dim) for s in segment.symbols}, {}
        )

    def __call__(self, size: Size, where: str) -> str:
        if isinstance(size, int):
            return f"int64_t{{{size}}}"
        try:
            return _cxx_expr(self.translate(size, where)[1:])
        except _derive.DerivationError as err:
            raise Refused(str(err)) from err


def _argument(arg: Pointer | Value, variable: str, cxx: _Printer) -> str:
    if isinstance(arg, Value):
        if arg.type == "fp32":
            return f"float {variable} = {float(arg.value)!r}f;"
        value = cxx(arg.value, f"the value of {variable}") if isinstance(arg.value, sympy.Expr) else int(arg.value)
        return f"{_VALUE_TYPES[arg.type]} {variable} = static_cast<{_VALUE_TYPES[arg.type]}>({value});"
    base = {
        "input": f"const_cast<void*>(args.inputs[{arg.index}].data)",
        "output": f"args.outputs[{arg.index}].data",
        "workspace": f"static_cast<char*>(args.workspace) + offsets[{arg.index}]",
    }[arg.where]
    return f"void* {variable} = static_cast<char*>({base}) + {cxx(arg.offset, f'the offset of {variable}')};"


_RELATIONS = {
    sympy.Eq: "==",
    sympy.Ne: "!=",
    sympy.Lt: "<",
    sympy.Le: "<=",
    sympy.Gt: ">",
    sympy.Ge: ">=",
}


def _relation(relation: sympy.Basic, cxx: _Printer, k: int) -> str:
    operator = next((o for kind, o in _RELATIONS.items() if isinstance(relation, kind)), None)
    if operator is None:
        raise Refused(f"Inductor's code assumes {relation}, which the launcher cannot check")
    where = f"Inductor's assumption {k} ({relation})"
    return f"{cxx(relation.lhs, where)} {operator} {cxx(relation.rhs, where)}"


def _failure(why: str) -> list[str]:
    return [
        "    {",
        f'        return ::ttp::sdk::launchFailure(cudaErrorInvalidValue, kOp, "segment", "{why}");',
        "    }",
    ]


def _describe(shape: tuple[Size, ...], dtype: torch.dtype) -> str:
    return f"{KERNEL_NAMES[dtype]}[{', '.join(str(d) for d in shape)}]"


def _shapes_check(
    label: str, tensors: str, shapes: list[tuple[Size, ...]], dtypes: list[torch.dtype], cxx: _Printer, read: set
) -> list[str]:
    """Counts, ranks, dtypes, and each dim that is not where a size symbol is read: equal to its expression."""
    terms = [f"args.nb{tensors.capitalize()} == {len(shapes)}"]
    for i, (shape, dtype) in enumerate(zip(shapes, dtypes)):
        terms.append(f"args.{tensors}[{i}].rank == {len(shape)}")
        terms.append(f"args.{tensors}[{i}].dtype == ::ttp::DType::{KERNEL_NAMES[dtype]}")
    dims = [
        f"args.{tensors}[{i}].dims[{d}] == {cxx(size, f'{label} {i} dim {d}')}"
        for i, shape in enumerate(shapes)
        for d, size in enumerate(shape)
        if (tensors, i, d) not in read
    ]
    described = ", ".join(_describe(s, t) for s, t in zip(shapes, dtypes))
    out = [f"    if (!({' && '.join(terms)}))"]
    out += _failure(f"{label} other than the ones it was generated for ({described})")
    if dims:
        out += [f"    if (!({' && '.join(dims)}))"]
        out += _failure(f"{label} of sizes other than the ones it was generated for ({described})")
    return out


def _layout(segment: CompiledSegment, cxx: _Printer) -> list[str]:
    """C++ of ``size_t workspaceLayout(LaunchArgs const&, size_t* offsets)``: each intermediate's offset (a multiple of
    ALIGNMENT) and the bytes of them all, at the call's dims."""
    out = [
        "size_t workspaceLayout(::ttp::sdk::LaunchArgs const& args, size_t* offsets)",
        "{",
        "    (void) args;",
        "    size_t size = 0;",
    ]
    for k, nbytes in enumerate(segment.intermediates):
        out += [
            f"    offsets[{k}] = size;",
            f"    size += static_cast<size_t>(::ttp::sdk::sizeCeilDiv(std::max<int64_t>("
            f"{cxx(nbytes, f'intermediate {k}')}, 0), {ALIGNMENT})) * {ALIGNMENT};",
        ]
    return [*out, "    return size;", "}"]


def launcher_source(
    segment: CompiledSegment,
    op: str,
    symbol_name: str,
    workspace_symbol: str,
    input_dtypes: list[torch.dtype],
    output_dtypes: list[torch.dtype],
) -> str:
    """C++ defining ``cudaError_t <symbol_name>(LaunchArgs const&)`` and ``size_t <workspace_symbol>(LaunchArgs
    const&)`` for the op ``op`` (both symbols in one namespace)."""
    cxx = _Printer(op, segment)
    namespace, _, name = symbol_name.rpartition("::")
    workspace_name = workspace_symbol.rpartition("::")[2]
    slots = max(len(segment.intermediates), 1)
    out = [
        f"// The generated op {op}: Inductor's kernels for a segment of a model (torchtrt_plugins.inductor_plugins);",
        "// do not edit.",
        '#include "sdk/cubin_launch.h"',
        '#include "sdk/ttp_sdk.h"',
        "",
        "#include <algorithm>",
        "#include <cstdint>",
        "",
        "namespace",
        "{",
        f'char const kOp[] = "{op}";',
    ]
    for k, (kernel_name, compiled) in enumerate(zip(segment.names, segment.kernels)):
        out += cubin_kernel_cxx(f"kKernel{k}", op, kernel_name, compiled)
    out += ["", *_layout(segment, cxx), "} // namespace", "", f"namespace {namespace}", "{", ""]
    out += [
        f"size_t {workspace_name}(::ttp::sdk::LaunchArgs const& args)",
        "{",
        f"    size_t offsets[{slots}];",
        "    return workspaceLayout(args, offsets);",
        "}",
        "",
        f"cudaError_t {name}(::ttp::sdk::LaunchArgs const& args)",
        "{",
    ]
    read = {("inputs", s.input, s.dim) for s in segment.symbols}
    out += _shapes_check("inputs", "inputs", segment.input_shapes, input_dtypes, cxx, read)
    for s in segment.symbols:
        value = f"args.inputs[{s.input}].dims[{s.dim}]"
        bounds = [f"{value} >= {s.low}", *([f"{value} <= {s.high}"] if s.high is not None else [])]
        out += [
            f"    if (!({' && '.join(bounds)}))",
            *_failure(
                f"input {s.input} dim {s.dim} ({s.name}) outside [{s.low}, {'inf' if s.high is None else s.high}], "
                "the range its kernels were generated for"
            ),
        ]
    for k, assumption in enumerate(segment.assumptions):
        out += [f"    if (!({_relation(assumption, cxx, k)}))", *_failure(f"sizes for which {assumption} is false")]
    out += _shapes_check("outputs", "outputs", segment.output_shapes, output_dtypes, cxx, set())
    # Inductor compiled the kernels for 16-byte aligned tensors (tt.divisibility); it would recompile for others.
    aligned = " && ".join(
        f"reinterpret_cast<uintptr_t>(args.{kind}[{i}].data) % {POINTER_ALIGNMENT} == 0"
        for kind, count in (("inputs", len(segment.input_shapes)), ("outputs", len(segment.output_shapes)))
        for i in range(count)
    )
    out += [
        f"    if (!({aligned or 'true'}))",
        *_failure(f"a tensor not {POINTER_ALIGNMENT}-byte aligned (its kernels were compiled for aligned ones)"),
    ]
    out += [f"    size_t offsets[{slots}];", "    size_t const workspace = workspaceLayout(args, offsets);"]
    out += [
        "    if (workspace > 0 && (args.workspace == nullptr || args.workspaceSize < workspace))",
        *_failure("a workspace smaller than its intermediates at these sizes"),
    ]
    for n, launch in enumerate(segment.launches):
        variables = [f"a{i}" for i in range(len(launch.args))]
        out += ["    {"]
        out += [f"        {_argument(arg, v, cxx)}" for arg, v in zip(launch.args, variables)]
        out += ["        void* globalScratch = nullptr;", "        void* profileScratch = nullptr;"]
        pointers = ", ".join([*(f"&{v}" for v in variables), "&globalScratch", "&profileScratch"])
        grid = ", ".join(f"static_cast<uint64_t>({cxx(g, f'launch {n} grid')})" for g in launch.grid)
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

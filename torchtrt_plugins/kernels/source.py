"""The generated C++ launchers of Python kernels: the cubins and their PTX embedded, and their grid and parameters as
expressions of the op's arguments evaluated per call (derived once, symbolically)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from .. import _derive
from ..declaration import Declaration
from ..shape_rules import ShapeRuleCompiler
from ..spec import SpecError
from .compile import _Case, _Compiled, _dtype_combinations, _nvrtc_compile, _triton_compile, parse_archs
from .describe import (
    _CXX_DTYPES,
    _INT32,
    ALIGNMENT,
    CudaKernel,
    Kernel,
    KernelError,
    Variant,
    _call,
    _Param,
    _signature,
    _source_text,
)

# ---------------------------------------------------------------------------------------------- expressions


def _meta(variant: Variant) -> dict[str, Any]:
    return {**variant.constexprs, "num_warps": variant.num_warps, "num_stages": variant.num_stages}


def _functions(kernel: Kernel, variant: Variant) -> list[tuple[str, Callable[[Mapping[str, Any]], Any]]]:
    """(what, function of the named values) for the select, the grid's 3 dims and each expr parameter."""
    meta = _meta(variant)
    out = []
    if kernel.select is not None:
        out.append(("select", lambda named: _call(kernel.select, {**named, "meta": meta})))

    def grid(named: Mapping[str, Any]) -> tuple:
        value = _call(kernel.grid, {**named, "meta": meta}) if callable(kernel.grid) else kernel.grid
        value = tuple(value) if isinstance(value, (tuple, list)) else (value,)
        if not 1 <= len(value) <= 3:
            raise kernel.fail(f"grid must give 1 to 3 sizes, got {value!r}")
        return (*value, 1, 1)[:3]

    for axis in range(3):
        out.append((f"grid[{axis}]", lambda named, axis=axis: grid(named)[axis]))
    for p in kernel.bound_params:
        if p.kind == "expr":
            out.append((f"parameter '{p.name}'", lambda named, f=p.value: _call(f, {**named, "meta": meta})))
    return out


def _named_values(declaration: Declaration, call_args: Sequence[Any], needs_outputs: bool) -> dict[str, Any]:
    named = {a.name: v for a, v in zip(declaration.schema.arguments, call_args)}
    if needs_outputs:
        if declaration.fake_override is not None:
            result = declaration.fake_override(*call_args)
        else:
            mode = torch._guards.detect_fake_mode([v for v in call_args if isinstance(v, torch.Tensor)])
            result = _derive._run_fake(declaration.overload, mode, list(call_args), True)
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        named.update({o.name: r for o, r in zip(declaration.spec.outputs, results)})
    return named


def _uses_outputs(kernel: Kernel) -> bool:
    names = {o.name for o in kernel.declaration.spec.outputs}
    functions = [kernel.grid, kernel.select, *(p.value for p in kernel.bound_params if p.kind == "expr")]
    return any(callable(f) and names & set(_signature(f).parameters) for f in functions)


def _derive_expressions(kernel: Kernel, ranks: tuple[int, ...], variant: Variant) -> list[tuple[int, ...]]:
    """The select, grid and expr parameters as token expressions for inputs of ``ranks``, via the shape
    derivation: integer arguments stay symbols (ARG leaves)."""
    d = kernel.declaration
    compiler = ShapeRuleCompiler(d)
    functions = _functions(kernel, variant)
    needs_outputs = _uses_outputs(kernel)

    def fake(*call_args: Any) -> torch.Tensor:
        named = _named_values(d, call_args, needs_outputs)
        values = []
        for what, function in functions:
            value = function(named)
            if isinstance(value, bool) or not isinstance(value, (int, torch.SymInt)):
                raise kernel.fail(
                    f"{what} must be an int (an expression of sizes; // not /), got {value!r} from "
                    f"{_expression_text(kernel, what)}"
                )
            values.append(value)
        return torch.empty(values)

    metas = {a.name: _derive.TensorMeta((None,) * r, t) for a, r, t in zip(d.tensor_args, ranks, compiler.dtypes)}
    try:
        derived = _derive.derive(
            d.label,
            d.overload,
            d.schema.arguments,
            compiler.values,
            metas,
            frozenset(),
            fake=fake,
            fields={n: compiler.field_index[n] for n in compiler.ints},
            field_ranges=compiler.ranges,
        )
    except KernelError:
        raise
    except SpecError as err:
        raise kernel.fail(f"its grid or parameters cannot be evaluated from the op's arguments: {err}") from err
    program = _derive.Program.parse(derived.program)
    exprs = list(program.outputs[0][1])
    for (what, _), expr in zip(functions, exprs):
        if _derive.uses_size(expr):
            raise kernel.fail(f"{what} depends on a size known only after the launch, so it cannot be evaluated")
    return exprs


def _expression_text(kernel: Kernel, what: str) -> str:
    """The user's source of the function that gives ``what`` (the select, a grid axis, a parameter)."""
    if what == "select":
        function = kernel.select
    elif what.startswith("grid"):
        function = kernel.grid
    else:
        function = next(p.value for p in kernel.bound_params if p.kind == "expr" and what == f"parameter '{p.name}'")
    return _source_text(function).strip()


def check_kernels(declaration: Declaration) -> None:
    """What can be checked of a declaration's Python kernels without compiling them, when the op is declared rather
    than when its library is built (:class:`KernelError` names op, kernel and parameter): each CUDA kernel's pointer
    parameters against its tensors' dtypes, every dtype combination; each kernel's select, grid and parameters as int
    expressions (derived for the op's first accepted input ranks, every tactic and variant: one shape derivation, not
    the full search of a build)."""
    if not declaration.aot_kernels:
        return
    program = ShapeRuleCompiler(declaration).first_program()
    ranks = _derive.Program.parse(program).input_ranks
    for kernel, tactic in declaration.aot_kernels.values():
        if isinstance(kernel, CudaKernel):
            for inputs in _dtype_combinations(declaration):
                kernel.check_pointees(inputs, _derive.output_dtypes(program, inputs))
        for variant in kernel.variants(tactic):
            _derive_expressions(kernel, ranks, variant)


_CXX_BINARY = {
    _derive.ADD: "({a} + {b})",
    _derive.SUB: "({a} - {b})",
    _derive.MUL: "({a} * {b})",
    _derive.FLOORDIV: "::ttp::sdk::sizeFloorDiv({a}, {b})",
    _derive.CEILDIV: "::ttp::sdk::sizeCeilDiv({a}, {b})",
    _derive.MIN: "std::min<int64_t>({a}, {b})",
    _derive.MAX: "std::max<int64_t>({a}, {b})",
}


_CXX_LEAVES = {
    _derive.CONST: "int64_t{{{0}}}",
    _derive.DIM: "args.inputs[{0}].dims[{1}]",
    _derive.ARG: "static_cast<int64_t>(args.scalars[{0}])",
}


def _cxx_expr(expr: Sequence[int]) -> str:
    """A token expression (postfix) as C++ over ``args``."""
    stack: list[str] = []
    tokens = iter(expr)
    for code in tokens:
        if code in _CXX_BINARY:
            right = stack.pop()
            stack[-1] = _CXX_BINARY[code].format(a=stack[-1], b=right)
        else:
            stack.append(_CXX_LEAVES[code].format(*(next(tokens) for _ in range(_derive._OPERAND_COUNTS[code]))))
    return stack[0]


# ---------------------------------------------------------------------------------------------- generation


def _cases(kernel: Kernel, tactic: int) -> list[_Case]:
    variants = kernel.variants(tactic)
    aligned = (False, True) if kernel.kind == "triton" else (False,)
    combos = _dtype_combinations(kernel.declaration)
    return [_Case(v, c, a) for v in range(len(variants)) for c in combos for a in aligned]


def _bytes(data: bytes) -> str:
    lines = []
    for start in range(0, len(data), 40):
        lines.append(",".join(str(b) for b in data[start : start + 40]))
    return ",\n".join(lines)


def cubin_kernel_cxx(variable: str, op: str, kernel_name: str, compiled: _Compiled) -> list[str]:
    """C++ defining ``::ttp::sdk::CubinKernel const <variable>`` (``sdk/cubin_launch.h``) with its embedded images
    (each cubin, and each PTX as ``<variable>_sm<arch>_ptx``), registered for ``loadCubinKernels`` (the plugin loads
    them before its first enqueue)."""
    out, images = [], []
    for image in compiled.images:
        # PTX is text that cuModuleLoadData reads to its nul: the array carries one.
        name = f"{variable}_sm{image.arch}" + ("_ptx" if image.kind == "ptx" else "")
        data = image.data + b"\0" if image.kind == "ptx" else image.data
        kind = "::ttp::sdk::ImageKind::kPTX" if image.kind == "ptx" else "::ttp::sdk::ImageKind::kCUBIN"
        out.append(f"alignas(8) unsigned char const {name}[] = {{\n{_bytes(data)}}};")
        images.append(f"{{{image.arch}, {str(image.exact).lower()}, {kind}, {name}, sizeof({name})}}")
    out.append(f"::ttp::sdk::CubinImage const {variable}_images[] = {{{', '.join(images)}}};")
    block = ", ".join(f"{b}u" for b in compiled.block)
    out.append(
        f'::ttp::sdk::CubinKernel const {variable}{{"{op}", "{kernel_name}", "{compiled.function}", '
        f"{variable}_images, {len(images)}, {{{block}}}, {compiled.shared}u, {compiled.num_ctas}u}};"
    )
    out.append(f"::ttp::sdk::CubinKernelRegistration const {variable}_registration{{{variable}}};")
    return out


def _param_cxx(kernel: Kernel, p: _Param, index: int, slot: int) -> tuple[str, str]:
    """C++ declaring parameter variable ``p{index}`` (an expr parameter's value is ``e[slot]``) and a check that
    returns an error (or "")."""
    d = kernel.declaration
    var = f"p{index}"
    if p.kind == "input":
        return f"void* {var} = args.inputs[{p.index}].data;", ""
    if p.kind == "output":
        return f"void* {var} = args.outputs[{p.index}].data;", ""
    if kernel.kind == "triton":
        ctype = {"fp32": "float", "i1": "int8_t", "i64": "int64_t", "i32": "int32_t"}
        if p.kind == "scalar":
            type_name = d._types[d.scalar_args[p.index].name]
            kind = {"float": "fp32", "bool": "i1"}.get(type_name, "i64")
            value = f"args.scalars[{p.index}]"
        else:
            kind, value = "i32", f"e[{slot}]"
    else:
        kind = p.ctype
        ctype = {
            "i32": "int32_t",
            "u32": "uint32_t",
            "i64": "int64_t",
            "u64": "uint64_t",
            "f32": "float",
            "f64": "double",
            "bool": "bool",
        }
        value = f"args.scalars[{p.index}]" if p.kind == "scalar" else f"e[{slot}]"
        if p.kind == "const":
            value = repr(float(p.value)) if kind in ("f32", "f64") else str(int(p.value))
    check = ""
    if p.kind == "expr" and kind in ("i32", "u32"):
        low = 0 if kind == "u32" else _INT32[0]
        high = 2**32 - 1 if kind == "u32" else _INT32[1]
        check = f"if ({value} < {low} || {value} > {high}) return cudaErrorInvalidValue;"
    return f"{ctype[kind]} {var} = static_cast<{ctype[kind]}>({value});", check


def _generate_tactic(kernel: Kernel, tactic: int, symbol: str, tag: str, archs: list[tuple[int, bool]]) -> list[str]:
    d = kernel.declaration
    variants = kernel.variants(tactic)
    cases = _cases(kernel, tactic)
    out: list[str] = ["namespace", "{"]
    for n, case in enumerate(cases):
        variant = variants[case.variant]
        if kernel.kind == "triton":
            case.compiled = _triton_compile(kernel, variant, case, archs)
        else:
            case.compiled = _nvrtc_compile(kernel, case, archs)
        out += cubin_kernel_cxx(f"k{tag}_{n}", d.qualname, kernel.name, case.compiled)
    out.append(
        f"::ttp::sdk::CubinKernel const* const k{tag}[] = {{{', '.join(f'&k{tag}_{n}' for n in range(len(cases)))}}};"
    )
    out += ["} // namespace", ""]

    # Expressions: per accepted input ranks (and per variant where they read meta).
    reads_meta = any(
        callable(f) and "meta" in _signature(f).parameters
        for f in [kernel.grid, *(p.value for p in kernel.bound_params if p.kind == "expr")]
    )
    ranks_list = [_derive.Program.parse(p).input_ranks for p in d.compiled_programs]
    exprs_count = len(_functions(kernel, variants[0]))
    offset = 1 if kernel.select is not None else 0
    namespace, _, name = symbol.rpartition("::")
    body = [
        f"namespace {namespace}",
        "{",
        f"cudaError_t {name}(::ttp::sdk::LaunchArgs const& args)",
        "{",
        f"    int64_t e[{exprs_count}] = {{}};",
        "    int32_t variant = -1;",
    ]
    for k, ranks in enumerate(ranks_list):
        condition = " && ".join(
            [f"args.nbInputs == {len(ranks)}"] + [f"args.inputs[{i}].rank == {r}" for i, r in enumerate(ranks)]
        )
        body.append(f"    {'else ' if k else ''}if ({condition})")
        body.append("    {")
        per_variant = [
            _derive_expressions(kernel, ranks, variants[v]) for v in (range(len(variants)) if reads_meta else [0])
        ]
        if kernel.select is not None:
            select = _cxx_expr(per_variant[0][0])
            choice = " : ".join(f"s <= {v.bound} ? {i}" for i, v in enumerate(variants)) + " : -1"
            body.append(f"        int64_t const s = {select};")
            body.append(f"        variant = {choice};")
        else:
            body.append("        variant = 0;")
        for v, exprs in enumerate(per_variant):
            indent = "        "
            if reads_meta:
                body.append(f"        if (variant == {v})")
                body.append("        {")
                indent = "            "
            for j, expr in enumerate(exprs[offset:], start=offset):
                body.append(f"{indent}e[{j}] = {_cxx_expr(expr)};")
            if reads_meta:
                body.append("        }")
        body.append("    }")
    fail = f'return ::ttp::sdk::launchFailure(cudaErrorInvalidValue, "{d.qualname}", "{kernel.name}", '
    accepted = ", ".join(str(r) for r in ranks_list)
    body.append("    if (variant < 0)")
    body.append("    {")
    if kernel.select is not None:
        bounds = f"select gives more than the largest variant bound {variants[-1].bound}"
        body.append(f'        {fail}"inputs of ranks it was not compiled for (it takes {accepted}), or {bounds}");')
    else:
        body.append(f'        {fail}"inputs of ranks it was not compiled for (it takes {accepted})");')
    body.append("    }")
    combos = _dtype_combinations(d)
    body.append("    int32_t combo = -1;")
    for c, combo in enumerate(combos):
        condition = " && ".join(
            f"args.inputs[{i}].dtype == ::ttp::DType::{_CXX_DTYPES[t]}" for i, t in enumerate(combo)
        )
        body.append(f"    {'else ' if c else ''}if ({condition or 'true'})")
        body.append("    {")
        body.append(f"        combo = {c};")
        body.append("    }")
    body.append("    if (combo < 0)")
    body.append("    {")
    body.append(f'        {fail}"input dtypes it was not compiled for");')
    body.append("    }")
    declarations, checks, pointers, aligned_terms = [], [], [], []
    expr_number = offset + 3
    for index, p in enumerate(kernel.bound_params):
        if p.kind in ("constexpr",) or (kernel.kind == "triton" and p.kind == "const"):
            continue
        slot = expr_number if p.kind == "expr" else -1
        expr_number += p.kind == "expr"
        decl, check = _param_cxx(kernel, p, index, slot)
        check = check.replace(
            "return cudaErrorInvalidValue;", f'{fail}"parameter {p.name} is out of its type\'s range");'
        )
        declarations.append(f"    {decl}")
        if check:
            checks.append(f"    {check}")
        pointers.append(f"&p{index}")
        if kernel.kind == "triton" and p.kind in ("input", "output"):
            aligned_terms.append(f"reinterpret_cast<uintptr_t>(p{index}) % {ALIGNMENT} == 0")
        elif kernel.kind == "triton" and p.kind == "expr":
            aligned_terms.append(f"p{index} % {ALIGNMENT} == 0")
    body += declarations + checks
    if kernel.kind == "triton":
        body.append("    void* globalScratch = nullptr;")
        body.append("    void* profileScratch = nullptr;")
        pointers += ["&globalScratch", "&profileScratch"]
        body.append(f"    bool const aligned = {' && '.join(aligned_terms) or 'true'};")
        body.append(f"    int32_t const index = (variant * {len(combos)} + combo) * 2 + (aligned ? 1 : 0);")
    else:
        body.append(f"    int32_t const index = variant * {len(combos)} + combo;")
    body.append(f"    void* params[] = {{{', '.join(pointers) or 'nullptr'}}};")
    body.append(
        f"    uint64_t const grid[3] = {{static_cast<uint64_t>(std::max<int64_t>(e[{offset}], 0)), "
        f"static_cast<uint64_t>(std::max<int64_t>(e[{offset + 1}], 0)), "
        f"static_cast<uint64_t>(std::max<int64_t>(e[{offset + 2}], 0))}};"
    )
    for i in kernel.zeroed_outputs:  # triton.autotune(reset_to_zero=...): on the stream, capturable
        out_i = f"args.outputs[{i}]"
        size = f"static_cast<size_t>({out_i}.numel() * ::ttp::dtypeSize({out_i}.dtype))"
        body.append(f"    if ({out_i}.data != nullptr)")
        body.append("    {")
        body.append(f"        cudaError_t const zeroed = cudaMemsetAsync({out_i}.data, 0, {size}, args.stream);")
        body.append("        if (zeroed != cudaSuccess)")
        body.append("        {")
        body.append("            return zeroed;")
        body.append("        }")
        body.append("    }")
    body.append(f"    return ::ttp::sdk::launchCubin(*k{tag}[index], grid, params, args.stream);")
    body += ["}", f"}} // namespace {namespace}", ""]
    return out + body


def generate_source(declarations: Sequence[Declaration], archs: str) -> str:
    """C++: the embedded cubins and the generated launchers of the declarations' Python kernels ("" if none).
    Compiles every kernel (see the module doc); errors name the op, the kernel and why."""
    pending = [(d, v, k, i) for d in declarations for v, (k, i) in sorted(getattr(d, "aot_kernels", {}).items())]
    if not pending:
        return ""
    targets = parse_archs(archs)
    if not targets:
        raise KernelError(f"no architecture to compile kernels for in {archs!r}")
    for d in {id(d): d for d, *_ in pending}.values():
        check_kernels(d)
    out = [
        "// Python kernels of the declared ops, compiled ahead of time (torchtrt_plugins.kernels); do not edit.",
        '#include "sdk/cubin_launch.h"',
        '#include "sdk/ttp_sdk.h"',
        "",
        "#include <algorithm>",
        "#include <cstdint>",
        "",
    ]
    for n, (d, value, kernel, index) in enumerate(pending):
        symbol = d.launchers[value]
        out += _generate_tactic(kernel, index, symbol, f"Kernel{n}", targets)
    return "\n".join(out)


def kernel_sizes(source: str) -> int:
    """Bytes of cubin a generated source embeds (for reports)."""
    return sum(len(m.group(1).split(",")) for m in re.finditer(r"\[\] = \{\n([\d,\n]*)\}", source))

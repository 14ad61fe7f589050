"""Kernels written in Python as launchers of declared ops: a ``@triton.jit`` kernel or a CuPy ``RawKernel`` /
``RawModule`` (CUDA source), compiled ahead of time to cubin and launched from C++ with no Python.

::

    from liger_kernel.ops.rms_norm import _rms_norm_forward_kernel

    ttp.declare(
        "pyops::liger_rms_norm",
        library=LIBRARY,
        launcher=ttp.triton_kernel(
            _rms_norm_forward_kernel,
            grid=lambda X: (math.prod(X.shape[:-1]),),
            params={"Y_ptr": "out0", "X_ptr": "X", "W_ptr": "W", "RSTD_ptr": "out1",
                    "Y_row_stride": lambda X: X.shape[-1], ..., "n_cols": lambda X: X.shape[-1]},
            constexprs={"casting_mode": 0, "elementwise_affine": True},
            select=lambda X: X.shape[-1],                       # picks the first variant whose bound holds
            variants={1024: {"BLOCK_SIZE": 1024, "num_warps": 4}, 4096: {"BLOCK_SIZE": 4096, "num_warps": 8}},
        ),
    )

How the op's arguments reach the kernel's parameters is explicit: each parameter takes an op argument or output by
name (a tensor: its data pointer; a scalar: its value at run time, floats included), a constant (compiled in), or a
function of the op's arguments (and outputs, and ``meta``: the variant's constexprs) giving an int. The grid is such
a function too. These functions run once, symbolically, when the tables are generated (the shape derivation of
``_derive``); the generated C++ launcher evaluates the resulting expressions per call, one set per input rank the op
accepts. A Triton parameter not named in ``params`` takes the op argument or output of the same name.

When a library's tables are generated (:func:`generate_source`, from ``sdk.generated_sources``) every kernel is
compiled for each architecture the library targets, each dtype combination the declaration allows and each variant:
Triton's own compiler with an explicit ``GPUTarget`` (its bundled ``ptxas``; no GPU), NVRTC for CUDA source (CuPy's
binding; ``nvidia-cuda-nvrtc`` or a CUDA toolkit's ``libnvrtc``; no GPU). A Triton kernel is also compiled with its
pointers and int parameters assumed divisible by 16 (what Triton's own launcher specializes on), used where a call's
values are. The cubins are embedded in the plugin library and in the launcher library, and the generated launchers
(the SDK's ABI, ``cudaError_t fn(ttp::sdk::LaunchArgs const&)``) launch them through ``csrc/sdk/cubin_launch.h``.
Several kernels, or a Triton ``autotune`` kernel's configs, are the op's tactics.

:func:`launch_from_python` launches the same kernel the way its own package does (Triton's launcher, CuPy), which
``testing.check_op`` compares with on a GPU.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from . import _derive, dtypes
from .spec import SpecError

if TYPE_CHECKING:
    from .declare import Declaration

__all__ = [
    "CudaKernel",
    "KernelError",
    "TritonKernel",
    "cuda_kernel",
    "fingerprint",
    "generate_source",
    "launch_from_python",
    "triton_kernel",
]

#: The namespace of the generated launchers.
NAMESPACE = "ttp_aot"
#: What a Triton kernel's aligned build assumes of pointers and int parameters (Triton's own specialization).
ALIGNMENT = 16
_INT32 = (-(2**31), 2**31 - 1)
_TRITON_DTYPES = dtypes.TRITON_NAMES
#: ttp::DType enumerator names (csrc/kernels/common.h).
_CXX_DTYPES = dtypes.KERNEL_NAMES
_OPTIONS = ("num_warps", "num_stages", "num_ctas")


class KernelError(SpecError):
    """A kernel that cannot be a declared op's launcher. The message names the op, the kernel and the parameter."""


@dataclass(frozen=True)
class Variant:
    """One compiled specialization of a tactic: its constexprs and launch options, chosen where ``select`` <= bound."""

    bound: int | None
    constexprs: Mapping[str, Any]
    num_warps: int = 4
    num_stages: int = 3
    num_ctas: int = 1


@dataclass
class _Param:
    """One kernel parameter and what it takes: an op ``input`` / ``output`` (index), a ``scalar`` argument (index
    among the scalar arguments), an ``expr`` (a function of shapes), a ``const`` or a ``constexpr``."""

    name: str
    kind: str
    index: int = -1
    value: Any = None
    ctype: str = ""  # CUDA kernels: the parameter's C type


class Kernel:
    """What Triton and CUDA kernels share: the mapping from the op's arguments, the grid, variants."""

    kind = ""

    def __init__(self, name: str, grid: Any, params: Any, select: Callable[..., Any] | None):
        self.name = name
        self.grid = grid
        self.params = params
        self.select = select
        self.declaration: Declaration = None

    # -- what a declaration needs
    def tactic_count(self) -> int:
        return 1

    def label(self) -> str:
        op = self.declaration.qualname if self.declaration is not None else "?"
        return f"{op}: kernel '{self.name}'"

    def fail(self, message: str) -> KernelError:
        return KernelError(f"{self.label()}: {message}")

    def bind(self, declaration: Declaration) -> None:
        raise NotImplementedError

    def variants(self, tactic: int) -> list[Variant]:
        raise NotImplementedError

    def fingerprint(self) -> str:
        raise NotImplementedError

    # -- the op's argument names
    def _names(self) -> tuple[list[str], list[str], list[str]]:
        d = self.declaration
        return [a.name for a in d.tensor_args], [a.name for a in d.scalar_args], [o.name for o in d.spec.outputs]

    def _source(self, param: str, source: Any, *, constexpr: bool) -> _Param:
        """What ``source`` (an op argument or output name, a constant, a function) gives parameter ``param``."""
        tensors, scalars, outputs = self._names()
        if isinstance(source, str):
            where = [(tensors, "input"), (outputs, "output"), (scalars, "scalar")]
            for names, kind in where:
                if source in names:
                    if constexpr:
                        raise self.fail(
                            f"parameter '{param}' is a tl.constexpr, but takes the op's {kind} '{source}', whose value "
                            "is known only at run time; give it a constant in constexprs= (or in variants)"
                        )
                    return _Param(param, kind, names.index(source))
            raise self.fail(
                f"parameter '{param}' takes {source!r}, which is not an argument or output of the op (tensors "
                f"{tensors}, scalars {scalars}, outputs {outputs})"
            )
        if callable(source):
            if constexpr:
                raise self.fail(f"parameter '{param}' is a tl.constexpr: give it a constant, not a function")
            self._check_names(source, f"parameter '{param}'")
            return _Param(param, "expr", value=source)
        if isinstance(source, (bool, int, float)):
            return _Param(param, "constexpr" if constexpr else "const", value=source)
        raise self.fail(
            f"parameter '{param}' takes {source!r}; expected an op argument or output name, a constant or a function "
            "of the op's arguments"
        )

    def _check_names(self, function: Callable[..., Any], what: str) -> None:
        tensors, scalars, outputs = self._names()
        known = {*tensors, *scalars, *outputs, "meta"}
        for name, p in _signature(function).parameters.items():
            if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            if name not in known and p.default is inspect.Parameter.empty:
                raise self.fail(
                    f"{what} is a function of {name!r}, which is not an argument or output of the op (tensors "
                    f"{tensors}, scalars {scalars}, outputs {outputs}, or meta: the variant's constexprs)"
                )


def _signature(function: Callable[..., Any]) -> inspect.Signature:
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):
        return inspect.Signature()


def _call(function: Callable[..., Any], named: Mapping[str, Any]) -> Any:
    """``function`` called with the named values it asks for (all of them when it takes ``**kwargs``)."""
    parameters = _signature(function).parameters
    if any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
        return function(**named)
    return function(**{n: named[n] for n in parameters if n in named})


def _source_text(value: Any) -> str:
    if callable(value):
        try:
            return inspect.getsource(value)
        except (OSError, TypeError):
            return repr(value)
    return repr(value)


def _variants(
    owner: Kernel, base: Mapping[str, Any], options: Mapping[str, int], variants: Mapping[int, Mapping] | None
) -> list[Variant]:
    if not variants:
        return [Variant(None, dict(base), **options)]
    if owner.select is None:
        raise owner.fail("variants= needs select= (a function of the op's arguments compared with each bound)")
    out = []
    for bound, values in sorted(variants.items()):
        if not isinstance(bound, int):
            raise owner.fail(f"variants are keyed by int bounds, got {bound!r}")
        values = dict(values)
        merged = {**options, **{k: values.pop(k) for k in _OPTIONS if k in values}}
        out.append(Variant(bound, {**base, **values}, **merged))
    return out


class TritonKernel(Kernel):
    """A ``@triton.jit`` kernel (or a ``triton.autotune`` one: its configs become tactics) as a declared op's
    launcher; see the module doc and :func:`triton_kernel`."""

    kind = "triton"

    def __init__(
        self,
        fn: Any,
        *,
        grid: Any,
        params: Mapping[str, Any] | None = None,
        constexprs: Mapping[str, Any] | None = None,
        num_warps: int = 4,
        num_stages: int = 3,
        num_ctas: int = 1,
        select: Callable[..., Any] | None = None,
        variants: Mapping[int, Mapping[str, Any]] | None = None,
    ):
        configs: list[Any] = [None]
        jit = fn
        if hasattr(fn, "configs") and hasattr(fn, "fn"):  # triton.autotune
            configs, jit = list(fn.configs), fn.fn
        if not hasattr(jit, "arg_names") or not hasattr(jit, "params"):
            raise KernelError(f"triton_kernel: expected a @triton.jit function, got {fn!r}")
        super().__init__(getattr(jit, "__name__", "kernel"), grid, dict(params or {}), select)
        self.jit = jit
        self.constexprs = dict(constexprs or {})
        self.options = {"num_warps": num_warps, "num_stages": num_stages, "num_ctas": num_ctas}
        self.configs = configs
        self.variant_spec = dict(variants or {})
        self.bound_params: list[_Param] = []

    def tactic_count(self) -> int:
        return len(self.configs)

    def variants(self, tactic: int) -> list[Variant]:
        config = self.configs[tactic]
        base, options = dict(self.constexprs), dict(self.options)
        if config is not None:
            if getattr(config, "pre_hook", None) is not None:
                raise self.fail(f"autotune config {tactic} has a pre_hook, which needs Python at run time")
            base.update(config.kwargs)
            options.update({k: getattr(config, k) for k in _OPTIONS if getattr(config, k, None) is not None})
        return _variants(self, base, options, self.variant_spec)

    def bind(self, declaration: Declaration) -> None:
        self.declaration = declaration
        tensors, scalars, outputs = self._names()
        names = list(self.jit.arg_names)
        for key in self.params:
            if key not in names:
                raise self.fail(f"params names {key!r}, which is not a parameter of the kernel {names}")
        constexpr_names = {k for t in range(self.tactic_count()) for v in self.variants(t) for k in v.constexprs}
        for key in constexpr_names:
            if key not in names:
                raise self.fail(f"constexprs name {key!r}, which is not a parameter of the kernel {names}")
        bound = []
        for p in self.jit.params:
            name = p.name
            if p.is_constexpr and name not in self.params:
                missing = [t for t in range(self.tactic_count()) for v in self.variants(t) if name not in v.constexprs]
                if missing and p.default is inspect.Parameter.empty:
                    raise self.fail(
                        f"parameter '{name}' is a tl.constexpr with no value: give it in constexprs= (or variants)"
                    )
                bound.append(_Param(name, "constexpr", value=p.default))
                continue
            if name in constexpr_names and name not in self.params:
                bound.append(_Param(name, "constexpr"))
                continue
            if name in self.params:
                source = self.params[name]
            elif name in {*tensors, *scalars, *outputs}:
                source = name
            elif p.default is not inspect.Parameter.empty:
                source = p.default
            else:
                raise self.fail(
                    f"parameter '{name}' takes nothing: name an op argument or output (tensors {tensors}, scalars "
                    f"{scalars}, outputs {outputs}) or give params={{'{name}': ...}}"
                )
            bound.append(self._source(name, source, constexpr=p.is_constexpr))
        for kind, names_of_kind in (("input", tensors), ("output", outputs)):
            used = {q.index for q in bound if q.kind == kind}
            for i, n in enumerate(names_of_kind):
                if i not in used and kind == "output":
                    raise self.fail(f"output '{n}' is passed to no parameter of the kernel, so nothing writes it")
        for q in bound:
            if q.kind == "scalar" and declaration._types[scalars[q.index]] == "bool":
                q.ctype = "i1"
        self.bound_params = bound
        for function, what in ((self.grid, "grid"), (self.select, "select")):
            if function is not None:
                self._check_names(function, what)

    def fingerprint(self) -> str:
        import triton

        parts = [
            triton.__version__,
            self.jit.cache_key,
            repr(sorted((k, repr(v)) for k, v in self.constexprs.items())),
            repr(self.options),
            repr([(c.kwargs, c.num_warps, c.num_stages) if c is not None else None for c in self.configs]),
            repr(self.variant_spec),
            *(f"{k}={_source_text(v)}" for k, v in sorted(self.params.items())),
            _source_text(self.grid),
            _source_text(self.select),
        ]
        return hashlib.sha256("|".join(parts).encode()).hexdigest()


def triton_kernel(fn: Any, **options: Any) -> TritonKernel:
    """A ``@triton.jit`` kernel as a declared op's launcher (``declare(..., launcher=triton_kernel(fn, ...))``).

    ``grid``: a function of the op's arguments (by name; also ``meta``, the variant's constexprs) giving 1 to 3 ints.
    ``params``: kernel parameter -> op argument or output name, constant, or function of the arguments giving an int
    (a parameter left out takes the op argument or output of its own name). ``constexprs``: the tl.constexpr values.
    ``num_warps``, ``num_stages``, ``num_ctas``: as for Triton's launcher. ``select`` and ``variants``: compiled
    specializations ``{bound: {constexpr or option: value}}``, the first whose bound is >= ``select(...)`` runs (the
    op's calls beyond the largest bound are errors). A ``triton.autotune`` kernel's configs become tactics.
    """
    return TritonKernel(fn, **options)


_CTYPE_WORDS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct)\b")


def _c_type(text: str) -> str:
    """A CUDA parameter declaration's kind: ``ptr`` or a scalar type (``i32``, ``u32``, ``i64``, ``u64``, ``f32``,
    ``f64``, ``bool``), else ``?`` (a type we cannot pass)."""
    text = _CTYPE_WORDS.sub(" ", text)
    if "*" in text:
        return "ptr"
    words = text.split()[:-1]  # drop the parameter's name
    base = " ".join(w for w in words if w not in ("signed",))
    return {
        "int": "i32",
        "int32_t": "i32",
        "unsigned": "u32",
        "unsigned int": "u32",
        "uint32_t": "u32",
        "long long": "i64",
        "long long int": "i64",
        "long": "i64",
        "int64_t": "i64",
        "ptrdiff_t": "i64",
        "unsigned long long": "u64",
        "unsigned long": "u64",
        "size_t": "u64",
        "uint64_t": "u64",
        "float": "f32",
        "double": "f64",
        "bool": "bool",
    }.get(base, "?")


#: Pointee types whose dtype a CUDA kernel's pointer parameter fixes (others, e.g. a template's T, are not checked).
_C_POINTEES = {
    "float": torch.float32,
    "__half": torch.float16,
    "half": torch.float16,
    "__nv_bfloat16": torch.bfloat16,
    "nv_bfloat16": torch.bfloat16,
    "double": None,
    "int": torch.int32,
    "int32_t": torch.int32,
    "long long": torch.int64,
    "int64_t": torch.int64,
    "int8_t": torch.int8,
    "signed char": torch.int8,
}


def _pointee(text: str) -> str:
    return " ".join(_CTYPE_WORDS.sub(" ", text.split("*")[0]).split())


class CudaKernel(Kernel):
    """A CUDA C++ kernel given as source (a CuPy ``RawKernel`` or ``RawModule``) as a declared op's launcher; see
    :func:`cuda_kernel`."""

    kind = "cuda"

    def __init__(
        self,
        kernel: Any,
        *,
        grid: Any,
        block: Sequence[int] | int,
        params: Sequence[Any],
        shared_mem: int = 0,
        name: str | None = None,
        names: Mapping[torch.dtype, str] | None = None,
        dtype_of: str | None = None,
        options: Sequence[str] | None = None,
    ):
        code = getattr(kernel, "code", kernel)
        if not isinstance(code, str):
            raise KernelError(f"cuda_kernel: expected a cupy.RawKernel, cupy.RawModule or CUDA source, got {kernel!r}")
        name = name or getattr(kernel, "name", None)
        if not name and not names:
            raise KernelError("cuda_kernel: a RawModule (or source) needs name= (the function) or names= (per dtype)")
        super().__init__(name or next(iter(names.values())), grid, list(params), None)
        self.code = code
        self.names = dict(names or {})
        self.function_name = name
        self.dtype_of = dtype_of
        self.options = tuple(options if options is not None else getattr(kernel, "options", ()) or ())
        self.block = (block,) if isinstance(block, int) else tuple(block)
        if not 1 <= len(self.block) <= 3 or not all(isinstance(b, int) and b > 0 for b in self.block):
            raise KernelError(f"cuda_kernel {self.name}: block must be 1 to 3 positive ints, got {block!r}")
        self.shared_mem = int(shared_mem)
        self.bound_params: list[_Param] = []

    def variants(self, tactic: int) -> list[Variant]:
        return [Variant(None, {})]

    def function_for(self, dtype: torch.dtype | None) -> str:
        if self.names:
            if dtype not in self.names:
                raise self.fail(f"names= has no function for dtype {dtype} (of argument '{self.dtype_of}')")
            return self.names[dtype]
        return self.function_name

    def declared_parameters(self, function: str) -> list[str]:
        """The parameter declarations of ``function`` (a name or a template's name expression) in the source."""
        base = function.split("<")[0].strip()
        match = re.search(
            rf"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+{re.escape(base)}\s*\(", self.code
        )
        if match is None:
            raise self.fail(f"its source defines no __global__ void {base}(...)")
        depth, start = 1, match.end()
        for i in range(start, len(self.code)):
            depth += {"(": 1, ")": -1}.get(self.code[i], 0)
            if depth == 0:
                text = self.code[start:i]
                break
        else:
            raise self.fail(f"cannot read the parameters of {base} in its source")
        text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
        return [p.strip() for p in text.split(",") if p.strip() and p.strip() != "void"]

    def bind(self, declaration: Declaration) -> None:
        self.declaration = declaration
        tensors, scalars, outputs = self._names()
        if self.dtype_of is None:
            self.dtype_of = tensors[0] if tensors else None
        if self.names and self.dtype_of not in tensors:
            raise self.fail(f"dtype_of must name a tensor argument of the op {tensors}, got {self.dtype_of!r}")
        if self.names:
            allowed = declaration.spec.inputs[tensors.index(self.dtype_of)].dtypes
            missing = [str(d) for d in allowed if d not in self.names]
            if missing:
                raise self.fail(f"names= has no function for dtypes {missing} of argument '{self.dtype_of}'")
        functions = list(self.names.values()) or [self.function_name]
        declared = self.declared_parameters(functions[0])
        if len(declared) != len(self.params):
            raise self.fail(
                f"its signature has {len(declared)} parameters ({', '.join(declared)}), but params= gives "
                f"{len(self.params)}"
            )
        bound = []
        for text, source in zip(declared, self.params):
            name = text.split()[-1].lstrip("*&") if text.split() else text
            param = self._source(name, source, constexpr=False)
            param.ctype = _c_type(text)
            kind = "tensor" if param.kind in ("input", "output") else "value"
            if param.ctype == "?":
                raise self.fail(f"parameter '{name}' has type '{text}', which the launcher cannot pass")
            if (param.ctype == "ptr") != (kind == "tensor"):
                what = "a pointer, which takes an op tensor" if param.ctype == "ptr" else f"a {param.ctype} value"
                raise self.fail(f"parameter '{name}' ('{text}') is {what}; params= gives it {source!r}")
            if param.kind == "scalar":
                type_name = declaration._types[scalars[param.index]]
                if type_name == "float" and param.ctype not in ("f32", "f64"):
                    raise self.fail(f"parameter '{name}' ('{text}') takes float argument '{source}': use float/double")
            if param.kind == "input" and not self.names:
                pointee = _C_POINTEES.get(_pointee(text), "unchecked")
                allowed = declaration.spec.inputs[param.index].dtypes
                if pointee != "unchecked" and any(d != pointee for d in allowed):
                    raise self.fail(
                        f"parameter '{name}' ('{text}') takes input '{source}', whose declared dtypes are "
                        f"{[str(d) for d in allowed]}; the kernel takes {pointee} only"
                    )
            bound.append(param)
        self.bound_params = bound
        self._check_names(self.grid, "grid")

    def fingerprint(self) -> str:
        parts = [
            self.code,
            repr(self.names),
            repr(self.function_name),
            repr(self.options),
            repr(self.block),
            repr(self.shared_mem),
            *(_source_text(p) for p in self.params),
            _source_text(self.grid),
        ]
        return hashlib.sha256("|".join(parts).encode()).hexdigest()


def cuda_kernel(kernel: Any, **options: Any) -> CudaKernel:
    """CUDA source (a ``cupy.RawKernel``, a ``cupy.RawModule`` or a str) as a declared op's launcher.

    ``params``: one entry per kernel parameter, in order (op argument or output names, constants, functions of the
    op's arguments giving an int); checked against the kernel's signature in the source. ``grid``: a function of the
    op's arguments giving 1 to 3 ints; ``block``: 1 to 3 ints; ``shared_mem``: dynamic shared memory bytes. A
    ``RawModule`` names its function with ``name=``, or one per dtype of tensor argument ``dtype_of`` (default: the
    first) with ``names={torch.float16: "kernel<__half>", ...}`` (template instances, as ``name_expressions``).
    ``options``: NVRTC options (default: the CuPy object's); ``-arch`` is added per architecture.
    """
    return CudaKernel(kernel, **options)


# ---------------------------------------------------------------------------------------------- declarations


def expand_launchers(
    qualname: str, launcher: Any, tactics: Mapping[int, Any] | None
) -> tuple[Any, dict[int, Any], dict[int, tuple[Kernel, int]]]:
    """A declaration's ``launcher``/``tactics`` with each Python kernel replaced by its generated launcher's C++
    symbol; also {tactic value: (kernel, index among its tactics)}. A Triton autotune kernel given as ``launcher``
    takes tactics 0, 1, ... (one per config); elsewhere it must have one config."""
    kernels: dict[int, tuple[Kernel, int]] = {}
    symbol = re.sub(r"\W", "_", qualname.replace("::", "_"))

    def name(value: int) -> str:
        return f"{NAMESPACE}::{symbol}_t{value}"

    out_tactics = dict(tactics or {})
    if isinstance(launcher, Kernel):
        for index in range(launcher.tactic_count()):
            if index and index in out_tactics:
                raise KernelError(
                    f"{qualname}: kernel '{launcher.name}' has {launcher.tactic_count()} autotune configs (tactics 0 "
                    f"to {launcher.tactic_count() - 1}), but tactics= also gives tactic {index}"
                )
            kernels[index] = (launcher, index)
            if index:
                out_tactics[index] = name(index)
        launcher = name(0)
    for value, kernel in list(out_tactics.items()):
        if isinstance(kernel, Kernel):
            if kernel.tactic_count() != 1:
                raise KernelError(
                    f"{qualname}: kernel '{kernel.name}' has {kernel.tactic_count()} autotune configs; give it as "
                    "launcher= (its configs become tactics) or give one config"
                )
            kernels[value] = (kernel, 0)
            out_tactics[value] = name(value)
    return launcher, out_tactics, kernels


def bind_kernels(declaration: Declaration) -> None:
    """Check each Python kernel of a declaration against the op (names op, kernel and parameter)."""
    for kernel in {id(k): k for k, _ in declaration.aot_kernels.values()}.values():
        kernel.bind(declaration)
        for t in range(kernel.tactic_count()):
            kernel.variants(t)
        for tensor in declaration.spec.inputs:
            if kernel.kind == "triton" and any(d not in _TRITON_DTYPES for d in tensor.dtypes):
                raise kernel.fail(
                    f"input '{tensor.name}' may be {[str(d) for d in tensor.dtypes if d not in _TRITON_DTYPES]}, "
                    f"which the kernel cannot take (Triton pointers: {[str(d) for d in _TRITON_DTYPES]}); declare "
                    f"dtypes={{'{tensor.name}': ...}}"
                )


def fingerprint(declarations: Sequence[Declaration], archs: str | None = None) -> str:
    """What the generated kernel source depends on, without compiling (a build's cache key)."""
    digest = hashlib.sha256(repr(archs).encode())
    for d in declarations:
        for value, (kernel, index) in sorted(getattr(d, "aot_kernels", {}).items(), key=lambda kv: kv[0]):
            digest.update(f"{d.qualname}|{value}|{index}|{kernel.fingerprint()}".encode())
    return digest.hexdigest()[:16]


def parse_archs(archs: str) -> list[tuple[int, bool]]:
    """CMake CUDA architectures ("80;90", "90-real", "90a", "100f") -> [(compute capability, arch-specific)];
    PTX-only entries ("-virtual") are left out: a cubin is SASS."""
    out = []
    for entry in re.split(r"[;,\s]+", archs.strip()):
        if not entry or entry.endswith("-virtual"):
            continue
        match = re.fullmatch(r"(?:sm_|compute_)?(\d+)([af]?)(?:-real)?", entry)
        if match is None:
            raise KernelError(
                f"cannot compile kernels for CUDA architecture {entry!r} (expected e.g. 90, 90a, 90-real)"
            )
        value = (int(match.group(1)), match.group(2) == "a")
        if value not in out:
            out.append(value)
    return out


# ---------------------------------------------------------------------------------------------- compilation


@dataclass
class _Compiled:
    function: str
    images: list[tuple[int, bool, bytes]]
    block: tuple[int, int, int]
    shared: int
    num_ctas: int = 1


@dataclass
class _Case:
    """One compiled kernel of a tactic: (variant, dtype combination, aligned)."""

    variant: int
    dtypes: tuple[torch.dtype, ...]
    aligned: bool
    compiled: _Compiled | None = None


def _dtype_combinations(declaration: Declaration) -> list[tuple[torch.dtype, ...]]:
    specs = list(declaration.spec.inputs)
    names = [s.name for s in specs]
    free = [s for s in specs if s.same_dtype_as is None]
    combos = []
    for choice in itertools.product(*(s.dtypes for s in free)):
        chosen = dict(zip((s.name for s in free), choice))
        combo = []
        for s in specs:
            combo.append(chosen[s.name] if s.same_dtype_as is None else combo[names.index(s.same_dtype_as)])
        combos.append(tuple(combo))
    return combos


def _output_dtypes(declaration: Declaration, inputs: tuple[torch.dtype, ...]) -> list[torch.dtype]:
    return _derive.output_dtypes(declaration.compiled_programs[0], inputs)


def _triton_compile(kernel: TritonKernel, variant: Variant, case: _Case, archs: list[tuple[int, bool]]) -> _Compiled:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    d = kernel.declaration
    outputs = _output_dtypes(d, case.dtypes)
    signature, constexprs, attrs = {}, {}, {}
    for position, p in enumerate(kernel.bound_params):
        if p.kind == "constexpr":
            value = variant.constexprs.get(p.name, p.value)
            signature[p.name], constexprs[p.name] = "constexpr", value
        elif p.kind == "const":
            signature[p.name], constexprs[p.name] = "constexpr", p.value
        elif p.kind in ("input", "output"):
            dtype = case.dtypes[p.index] if p.kind == "input" else outputs[p.index]
            if dtype not in _TRITON_DTYPES:
                raise kernel.fail(f"parameter '{p.name}' would point at {dtype}, which the kernel cannot take")
            signature[p.name] = "*" + _TRITON_DTYPES[dtype]
            if case.aligned:
                attrs[(position,)] = [["tt.divisibility", ALIGNMENT]]
        elif p.kind == "scalar":
            type_name = d._types[d.scalar_args[p.index].name]
            signature[p.name] = {"float": "fp32", "bool": "i1"}.get(type_name, "i64")
        else:  # expr
            signature[p.name] = "i32"
            if case.aligned and not kernel.jit.params[position].do_not_specialize:
                attrs[(position,)] = [["tt.divisibility", ALIGNMENT]]
    images, first = [], None
    options = {"num_warps": variant.num_warps, "num_stages": variant.num_stages, "num_ctas": variant.num_ctas}
    for arch, _ in archs:
        try:
            source = ASTSource(kernel.jit, signature, constexprs, attrs)
            compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)
        except Exception as err:  # noqa: BLE001 - Triton's own errors, reported with op, kernel and arch
            raise kernel.fail(
                f"Triton {triton.__version__} could not compile it for sm_{arch} (signature {signature}, constexprs "
                f"{constexprs}): {type(err).__name__}: {err}"
            ) from err
        md = compiled.metadata
        for what in ("global_scratch_size", "profile_scratch_size"):
            if getattr(md, what, 0):
                raise kernel.fail(f"the compiled kernel needs {what} {getattr(md, what)}; scratch is not provided yet")
        if getattr(md, "tensordesc_meta", None):
            raise kernel.fail("the compiled kernel takes tensor descriptors (TMA), which the launcher cannot pass")
        target = re.search(r"\.target\s+sm_(\d+)([af]?)", compiled.asm.get("ptx", ""))
        exact = bool(target and target.group(2) == "a")
        images.append((arch, exact, bytes(compiled.asm["cubin"])))
        first = first or md
    return _Compiled(first.name, images, (32 * first.num_warps, 1, 1), first.shared, getattr(first, "num_ctas", 1))


def _cuda_include_dirs() -> list[str]:
    """The CUDA toolkit's headers (cuda_fp16.h, ...), which NVRTC does not carry: as nvcc finds them."""
    import os
    import site
    from pathlib import Path

    from . import _build

    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = _build.nvcc_path()
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent.parent))
    candidates += [str(Path(p) / "nvidia" / "cu13") for p in site.getsitepackages()]
    for root in candidates:
        if root and (Path(root) / "include" / "cuda_fp16.h").is_file():
            return [str(Path(root) / "include")]
    return []


def _nvrtc_compile(kernel: CudaKernel, case: _Case, archs: list[tuple[int, bool]]) -> _Compiled:
    try:
        from cupy_backends.cuda.libs import nvrtc
    except ImportError as err:
        raise kernel.fail(
            f"compiling CUDA source needs NVRTC through CuPy (pip install cupy-cuda13x nvidia-cuda-nvrtc): {err}"
        ) from err
    d = kernel.declaration
    dtype = case.dtypes[[a.name for a in d.tensor_args].index(kernel.dtype_of)] if kernel.dtype_of else None
    function = kernel.function_for(dtype) if kernel.names else kernel.function_name
    images, lowered = [], function
    for arch, exact in archs:
        try:
            program = nvrtc.createProgram(kernel.code, f"{kernel.name}.cu", [], [])
        except Exception as err:  # noqa: BLE001 - libnvrtc missing or unusable
            raise kernel.fail(f"NVRTC is not usable (pip install nvidia-cuda-nvrtc): {err}") from err
        try:
            if kernel.names:
                nvrtc.addNameExpression(program, function)
            options = [
                *kernel.options,
                *(f"-I{d}" for d in _cuda_include_dirs()),
                f"-arch=sm_{arch}{'a' if exact else ''}",
            ]
            try:
                nvrtc.compileProgram(program, options)
            except Exception as err:  # noqa: BLE001 - a compile error: NVRTC's log says why
                log = nvrtc.getProgramLog(program)
                raise kernel.fail(f"NVRTC could not compile it for sm_{arch} ({' '.join(options)}):\n{log}") from err
            if kernel.names:
                lowered = nvrtc.getLoweredName(program, function)
            images.append((arch, exact, bytes(nvrtc.getCUBIN(program))))
        finally:
            nvrtc.destroyProgram(program)
    block = (*kernel.block, 1, 1)[:3]
    return _Compiled(lowered, images, block, kernel.shared_mem)


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
    from .declare import _RuleCompiler

    d = kernel.declaration
    compiler = _RuleCompiler(d)
    functions = _functions(kernel, variant)
    needs_outputs = _uses_outputs(kernel)

    def fake(*call_args: Any) -> torch.Tensor:
        named = _named_values(d, call_args, needs_outputs)
        values = []
        for what, function in functions:
            value = function(named)
            if isinstance(value, bool) or not isinstance(value, (int, torch.SymInt)):
                raise kernel.fail(f"{what} must be an int (an expression of sizes), got {value!r}")
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
        compiled = case.compiled
        images = []
        for arch, exact, data in compiled.images:
            out.append(f"alignas(8) unsigned char const k{tag}_{n}_sm{arch}[] = {{\n{_bytes(data)}}};")
            images.append(f"{{{arch}, {str(exact).lower()}, k{tag}_{n}_sm{arch}, sizeof(k{tag}_{n}_sm{arch})}}")
        out.append(f"::ttp::sdk::CubinImage const k{tag}_{n}_images[] = {{{', '.join(images)}}};")
        block = ", ".join(f"{b}u" for b in compiled.block)
        out.append(
            f'::ttp::sdk::CubinKernel const k{tag}_{n}{{"{d.qualname}", "{kernel.name}", "{compiled.function}", '
            f"k{tag}_{n}_images, {len(images)}, {{{block}}}, {compiled.shared}u, {compiled.num_ctas}u}};"
        )
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
    out = [
        "// Python kernels of the declared ops, compiled ahead of time (torchtrt_plugins.kernels_aot); do not edit.",
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

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
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .. import dtypes
from ..errors import DeclarationError

#: The namespace of the generated launchers.
NAMESPACE = "ttp_aot"
#: What a Triton kernel's aligned build assumes of pointers and int parameters (Triton's own specialization).
ALIGNMENT = 16
_INT32 = (-(2**31), 2**31 - 1)
_TRITON_DTYPES = dtypes.TRITON_NAMES
#: ttp::DType enumerator names (csrc/sdk/dtypes.h).
_CXX_DTYPES = dtypes.KERNEL_NAMES
_OPTIONS = ("num_warps", "num_stages", "num_ctas")


class KernelError(DeclarationError):
    """A kernel that cannot be a declared op's launcher (a declaration error, caught as :class:`DeclarationError`).
    The message names the op, the kernel and the parameter."""


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
        self.declaration: Any = None
        #: Outputs (indices) that the generated launcher zeroes on the stream before each launch (Triton's
        #: ``autotune(reset_to_zero=...)``).
        self.zeroed_outputs: list[int] = []

    # -- what a declaration needs
    def tactic_count(self) -> int:
        return 1

    def label(self) -> str:
        op = self.declaration.qualname if self.declaration is not None else "?"
        return f"{op}: kernel '{self.name}'"

    def fail(self, message: str) -> KernelError:
        error = KernelError(f"{self.label()}: {message}")
        error.declaration = self.declaration
        return error

    def bind(self, declaration: Any) -> None:
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
        jit, self.autotuner = fn, None
        if hasattr(fn, "configs") and hasattr(fn, "fn"):  # triton.autotune
            configs, jit, self.autotuner = list(fn.configs), fn.fn, fn
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

    def _bind_autotune_hooks(self) -> None:
        """``reset_to_zero`` becomes outputs the launcher zeroes; the autotuner's other hooks would run in Python on
        its own launches only, so a declaration that gives one is refused rather than run without it."""
        tuner = self.autotuner
        if tuner is None:
            return
        ignored = {
            "restore_value": bool(getattr(tuner, "restore_value", ())),
            "pre_hook": bool(getattr(tuner, "user_defined_pre_hook", False)),
            "post_hook": bool(getattr(tuner, "user_defined_post_hook", False)),
            "prune_configs_by": getattr(tuner, "early_config_prune", None) is not None
            or getattr(tuner, "perf_model", None) is not None
            or getattr(tuner, "configs_top_k", 1.0) != 1.0,
        }
        for hook, given in ignored.items():
            if given:
                raise self.fail(
                    f"triton.autotune({hook}=...) is not supported: the generated launcher runs without Python, "
                    "every config is a tactic TensorRT times, and the eager op runs config 0"
                )
        outputs = {q.name: q for q in self.bound_params}
        for name in getattr(tuner, "reset_to_zero", ()):
            param = outputs.get(name)
            if param is None or param.kind != "output":
                what = f"takes the op's {param.kind}" if param is not None else "takes no op output"
                raise self.fail(
                    f"triton.autotune(reset_to_zero=[{name!r}]): parameter '{name}' {what}; only outputs can be zeroed"
                )
            self.zeroed_outputs.append(param.index)

    def variants(self, tactic: int) -> list[Variant]:
        config = self.configs[tactic]
        base, options = dict(self.constexprs), dict(self.options)
        if config is not None:
            if getattr(config, "pre_hook", None) is not None:
                raise self.fail(f"autotune config {tactic} has a pre_hook, which needs Python at run time")
            base.update(config.kwargs)
            options.update({k: getattr(config, k) for k in _OPTIONS if getattr(config, k, None) is not None})
        return _variants(self, base, options, self.variant_spec)

    def bind(self, declaration: Any) -> None:
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
        self.zeroed_outputs = []
        self._bind_autotune_hooks()
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
            repr(list(getattr(self.autotuner, "reset_to_zero", ()))),
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

    def bind(self, declaration: Any) -> None:
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
            bound.append(param)
        self.bound_params = bound
        self._check_names(self.grid, "grid")

    def template_arguments(self, function: str) -> dict[str, str]:
        """A template instance's arguments by the template's parameter names (``scale<float>`` of ``template
        <typename T> __global__ void scale(...)``: {"T": "float"}); {} for a plain function."""
        base, _, rest = function.partition("<")
        if not rest:
            return {}
        match = re.search(
            rf"template\s*<([^>]*)>\s*__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+{re.escape(base.strip())}\s*\(",
            self.code,
        )
        if match is None:
            return {}
        names = [p.split("=")[0].split()[-1] for p in match.group(1).split(",") if p.split()]
        values = [v.strip() for v in rest.rpartition(">")[0].split(",")]
        return dict(zip(names, values))

    def check_pointees(self, inputs: Sequence[torch.dtype], outputs: Sequence[torch.dtype]) -> None:
        """Each pointer parameter whose pointee type the source fixes (after a template's arguments are put in)
        points at the dtype its tensor has for this dtype combination of the op: a kernel reading fp16 bits as
        floats is an error naming the parameter, the expected and the found type."""
        dtype = inputs[[a.name for a in self.declaration.tensor_args].index(self.dtype_of)] if self.names else None
        function = self.function_for(dtype) if self.names else self.function_name
        arguments = self.template_arguments(function)
        tensors, _, output_names = self._names()
        for text, param in zip(self.declared_parameters(function), self.bound_params):
            if param.kind not in ("input", "output"):
                continue
            pointee = _pointee(text)
            pointee = arguments.get(pointee, pointee)
            if pointee not in _C_POINTEES:
                continue
            expected = inputs[param.index] if param.kind == "input" else outputs[param.index]
            if _C_POINTEES[pointee] != expected:
                tensor = (tensors if param.kind == "input" else output_names)[param.index]
                where = f"'{text}' of {function}" if arguments else f"'{text}'"
                wanted = next((c for c, t in _C_POINTEES.items() if t == expected), expected)
                raise self.fail(
                    f"parameter '{param.name}' ({where}) points at {pointee}, but takes {param.kind} '{tensor}', which "
                    f"is {expected} (for inputs of {[str(d) for d in inputs]}); expected a pointer to {wanted}"
                )

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


def bind_kernels(declaration: Any) -> None:
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

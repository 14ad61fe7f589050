"""Output dtypes and shapes of a declared op, derived from its registered fake kernel run symbolically.

The fake kernel runs under a ``FakeTensorMode`` whose ``ShapeEnv`` gives every input dimension (and every
symbolic SymInt argument) its own symbol. The sizes of the outputs come back as sympy expressions over those
symbols; they are translated into a *shape program*, a flat list of int64 tokens that the generic C++ plugin
(``csrc/sdk``) turns into ``IExprBuilder`` calls and that :func:`evaluate` evaluates concretely. Sizes the fake
kernel makes with ``ctx.new_dynamic_size()`` are unbacked symbols; each becomes a size tensor (an extra 0-D
INT64 plugin output) whose upper bound comes from ``max=`` or a ``torch._check(u <= expr)`` in the fake kernel
(or the declaration's ``size_upper``), and whose optimum is a declared fraction of it.

Program layout (int64 tokens)::

    MAGIC VERSION
    nb_inputs  rank_0 .. rank_{n-1}
    nb_shape_inputs
    nb_size_tensors  (opt_expr upper_expr) * nb_size_tensors
    nb_outputs       (dtype_code rank dim_expr * rank) * nb_outputs
    nb_checks        (lhs_expr rhs_expr) * nb_checks                      (version 2)

An expression is its token count followed by postfix tokens: ``CONST v``, ``DIM input dim``, ``SHAPE input elem``,
``SIZE index``, ``ARG field`` (version 3) and the binary operators ADD, SUB, MUL, FLOORDIV, CEILDIV, MIN, MAX.
``ARG k`` is the value of the op's k-th scalar argument (its plugin field k): the programs compiled into a plugin
library (:func:`derive` with ``fields``) hold no argument values, only ``ARG`` leaves, and the plugin reads each from
its field or, where the field holds the shape-input marker, from the next shape input. A dtype code >= 0 is a
TensorRT ``DataType`` value; ``-(i + 1)`` means "the type of input i". A check is an equality between input sizes
that the fake kernel requires (``torch._check(w.shape[0] == x.shape[-1])``): the plugin verifies it on the profile's
and the actual dims, so a mismatch is an error at build time rather than a wrong kernel launch. Version-1 programs
(no checks) still parse.
"""

from __future__ import annotations

import contextlib
import functools
import math
import operator
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import sympy
import torch

from . import dtypes
from .spec import SpecError

MAGIC = 0x54545053  # "TTPS"
VERSION = 3

CONST, DIM, SHAPE, SIZE, ARG = 1, 2, 3, 4, 5
ADD, SUB, MUL, FLOORDIV, CEILDIV, MIN, MAX = 10, 11, 12, 13, 14, 15, 16
_OPERAND_COUNTS = {CONST: 1, DIM: 2, SHAPE: 2, SIZE: 1, ARG: 1}
_BINARY: dict[int, Callable[[int, int], int]] = {
    ADD: operator.add,
    SUB: operator.sub,
    MUL: operator.mul,
    FLOORDIV: operator.floordiv,
    CEILDIV: lambda a, b: -((-a) // b),
    MIN: min,
    MAX: max,
}

#: torch dtype -> TensorRT DataType value (NvInferRuntimeBase.h) and back.
TRT_DTYPE_CODES = dtypes.TRT_CODES
DTYPES_BY_CODE = {code: dtype for dtype, code in TRT_DTYPE_CODES.items()}

#: Hint for an input dimension that is unknown where the derivation runs (a -1 in a TensorRT ITensor).
UNKNOWN_DIM_HINT = 64


class DerivationError(SpecError):
    """The fake kernel's output shapes cannot be expressed for the plugin. Names op, output and why."""


@dataclass(frozen=True)
class TensorMeta:
    """What the derivation needs of a tensor input: its sizes (None where unknown) and dtype."""

    shape: tuple[int | None, ...]
    dtype: torch.dtype


@dataclass(frozen=True)
class Derived:
    program: tuple[int, ...]
    output_dtypes: tuple[torch.dtype, ...]
    num_size_tensors: int


def _hint(value: Any) -> int | None:
    if isinstance(value, int):
        return int(value)
    node = getattr(value, "node", None)
    hint = getattr(node, "hint", None) if node is not None else None
    return int(hint) if hint is not None else None


class _Translator:
    """sympy size expression -> postfix tokens."""

    def __init__(self, op: str, symbols: dict[sympy.Symbol, tuple[int, ...]], sizes: dict[sympy.Symbol, int]):
        self.op = op
        self.symbols = symbols
        self.sizes = sizes

    def __call__(self, expr: Any, where: str) -> list[int]:
        tokens: list[int] = []
        self._emit(sympy.sympify(expr), tokens, where, expr)
        return [len(tokens), *tokens]

    def _fail(self, where: str, whole: Any, why: str) -> None:
        raise DerivationError(
            f"{self.op}: {where} has size {whole}, which the plugin cannot express ({why}); the fake kernel may use "
            "+, -, *, //, ceil division, torch.sym_min/sym_max of input sizes, SymInt arguments and "
            "ctx.new_dynamic_size(); otherwise declare the op with outputs=... (an override fake function)"
        )

    def _emit(self, expr: Any, out: list[int], where: str, whole: Any) -> None:
        from torch.utils._sympy.functions import CeilDiv, FloorDiv, Max, Min

        if expr.is_Integer:
            out += [CONST, int(expr)]
        elif expr.is_Symbol:
            if expr in self.symbols:
                out += list(self.symbols[expr])
            elif expr in self.sizes:
                out += [SIZE, self.sizes[expr]]
            else:
                self._fail(where, whole, f"symbol {expr} is neither an input size nor a dynamic size")
        elif expr.is_Add:
            # Terms with a minus sign become SUB, so no intermediate dimension goes negative.
            positive = [a for a in expr.args if not a.could_extract_minus_sign()]
            negative = [-a for a in expr.args if a.could_extract_minus_sign()]
            if positive:
                self._emit(positive[0], out, where, whole)
            else:
                out += [CONST, 0]
            for arg in positive[1:]:
                self._emit(arg, out, where, whole)
                out.append(ADD)
            for arg in negative:
                self._emit(arg, out, where, whole)
                out.append(SUB)
        elif expr.is_Mul:
            ceil = _ceil_division(expr)
            if ceil is not None:
                self._emit(ceil[0], out, where, whole)
                self._emit(ceil[1], out, where, whole)
                out.append(CEILDIV)
                return
            for i, arg in enumerate(expr.args):
                if not arg.is_Integer and arg.is_number:
                    self._fail(where, whole, f"non-integer coefficient {arg}")
                self._emit(arg, out, where, whole)
                if i:
                    out.append(MUL)
        elif expr.is_Pow and expr.exp.is_Integer and int(expr.exp) >= 1:
            for i in range(int(expr.exp)):
                self._emit(expr.base, out, where, whole)
                if i:
                    out.append(MUL)
        elif isinstance(expr, (FloorDiv, CeilDiv)):
            self._emit(expr.args[0], out, where, whole)
            self._emit(expr.args[1], out, where, whole)
            out.append(FLOORDIV if isinstance(expr, FloorDiv) else CEILDIV)
        elif isinstance(expr, (Max, Min, sympy.Max, sympy.Min)):
            code = MAX if isinstance(expr, (Max, sympy.Max)) else MIN
            for i, arg in enumerate(expr.args):
                self._emit(arg, out, where, whole)
                if i:
                    out.append(code)
        else:
            self._fail(where, whole, f"{type(expr).__name__} is not supported")


def _ceil_division(expr: Any) -> tuple[Any, Any] | None:
    """(a, b) when expr is -((-a) // b), the usual way to write ceil(a / b) on sizes; else None."""
    from torch.utils._sympy.functions import FloorDiv

    if len(expr.args) == 2 and expr.args[0] == -1 and isinstance(expr.args[1], FloorDiv):
        numerator, denominator = expr.args[1].args
        if numerator.could_extract_minus_sign():
            return -numerator, denominator
    return None


def _holds_for_all_sizes(expr: Any) -> bool:
    """Whether a guard holds for every non-negative size (e.g. s0 >= 0): such a guard restricts nothing."""
    sizes = {s: sympy.Dummy(s.name, integer=True, nonnegative=True) for s in expr.free_symbols}
    return expr.xreplace(sizes) == sympy.true


def _from_user(guard: Any) -> bool:
    """Whether a guard comes from the user's fake kernel rather than torch's own meta code (strides, contiguity)."""
    frame = getattr(getattr(guard, "sloc", None), "framework_loc", None)
    filename = getattr(frame, "filename", None) or str(frame or "")
    return not filename.startswith(_TORCH_DIR)


# With the separator: site-packages/torchtrt_plugins (and any user package named torch*) is not torch's own code.
_TORCH_DIR = str(Path(torch.__file__).resolve().parent) + os.sep


def _upper_bound(env: Any, symbol: sympy.Symbol) -> Any:
    """The tightest expressible upper bound of an unbacked size: max= (static), or a torch._check(u <= e)."""
    bound = env.var_to_range.get(symbol)
    candidates = []
    for assertion in env.deferred_runtime_asserts.get(symbol, []):
        expr = assertion.expr
        if isinstance(expr, sympy.Le) and expr.lhs == symbol:
            candidates.append(expr.rhs)
        elif isinstance(expr, sympy.Ge) and expr.rhs == symbol:
            candidates.append(expr.lhs)
        elif isinstance(expr, sympy.Lt) and expr.lhs == symbol:
            candidates.append(expr.rhs - 1)
        elif isinstance(expr, sympy.Gt) and expr.rhs == symbol:
            candidates.append(expr.lhs - 1)
    candidates = [c for c in candidates if symbol not in c.free_symbols]
    if candidates:
        return candidates[0]
    if bound is not None and bound.upper.is_Integer:
        return bound.upper
    return None


def fake_kernel(overload: Any) -> Callable[..., Any] | None:
    """The Python fake kernel registered for the op (torch.library.register_fake), or None."""
    return torch._library.simple_registry.singleton.find(overload.name()).fake_impl.kernel


def _run_fake(overload: Any, mode: Any, args: list[Any], direct: bool) -> Any:
    """The op's fake kernel on ``args``. ``direct``: the registered Python fake kernel itself, as FakeTensorMode runs
    it, where there is one, so that an ``int`` argument (which the dispatcher takes as a Python int only) can be a
    symbol."""
    kernel = fake_kernel(overload) if direct else None
    if kernel is None:
        return overload(*args)
    ctx = torch._library.fake_impl.FakeImplCtx(mode, overload)
    with torch._library.fake_impl.set_ctx_getter(lambda: ctx):
        return kernel(*args)


_PROBING = threading.local()


@contextlib.contextmanager
def probing():
    """Marks a run of a fake kernel for its shapes only (the derivation, a declaration's shape checks): a fake
    kernel that also checks the declared dtypes skips them, since the plugin may take other dtypes (a bool as
    INT32)."""
    depth = getattr(_PROBING, "depth", 0)
    _PROBING.depth = depth + 1
    try:
        yield
    finally:
        _PROBING.depth = depth


def is_probing() -> bool:
    return getattr(_PROBING, "depth", 0) > 0


def derive(
    op: str,
    overload: Any,
    schema_args: Sequence[Any],
    values: dict[str, Any],
    metas: dict[str, TensorMeta],
    symbolic: frozenset[str],
    fake: Callable[..., Any] | None = None,
    size_upper: Callable[..., Any] | None = None,
    size_opt: float = 0.5,
    fields: Mapping[str, int] | None = None,
    dtype_codes: Sequence[int] | None = None,
    field_ranges: Mapping[str, tuple[Any, Any]] | None = None,
    unbacked: bool = False,
) -> Derived:
    """Run the fake kernel symbolically and translate its outputs into a shape program.

    ``schema_args`` are the op's ``torch.Argument``s; ``values`` the scalar arguments; ``metas`` the tensor inputs;
    ``symbolic`` the SymInt arguments that become shape inputs. ``fake`` overrides the registered fake kernel.
    ``fields`` (argument name -> field index) are integer arguments that stay symbols in the program (``ARG``
    leaves, their ``values`` only hints, ``field_ranges`` their declared (min, max)): the program then holds for
    every value. ``dtype_codes`` replace the output dtype codes (one per output), where the caller has found the rule
    over several input dtypes. ``unbacked``: the symbols have no hints, so a fake kernel's
    ``torch._check(rois.size(1) == 5)`` records a check instead of failing on a made-up size (but ``x.shape ==
    y.shape``, a Python comparison, cannot be decided); else every unknown size is hinted as ``UNKNOWN_DIM_HINT``.
    """
    from torch._dynamo.source import ConstantSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    env = ShapeEnv(duck_shape=False, specialize_zero_one=False)
    mode = FakeTensorMode(shape_env=env)
    symbols: dict[sympy.Symbol, tuple[int, ...]] = {}

    compiled = fields is not None

    def new_symbol(hint: int, name: str, token: tuple[int, ...]) -> torch.SymInt:
        if unbacked:
            node = env.create_unbacked_symint()
            symbols[node.node.expr] = token
        else:
            expr = env.create_symbol(hint, source=ConstantSource(name), dynamic_dim=DimDynamic.DYNAMIC, positive=None)
            symbols[expr] = token
            node = env.create_symintnode(expr, hint=hint)
        low, high = (0, None) if token[0] == DIM else (field_ranges or {}).get(name, (None, None))
        if low is not None:
            torch._check(node >= int(math.ceil(low)))
        if high is not None:
            torch._check(node <= int(math.floor(high)))
        return node

    tensor_names = [a.name for a in schema_args if a.name in metas]
    shape_names = [a.name for a in schema_args if a.name in symbolic]
    call_args = []
    with mode:
        for argument in schema_args:
            name = argument.name
            if name in metas:
                i = tensor_names.index(name)
                meta = metas[name]
                sizes = [
                    new_symbol(UNKNOWN_DIM_HINT if d is None else int(d), f"{name}_{j}", (DIM, i, j))
                    for j, d in enumerate(meta.shape)
                ]
                call_args.append(torch.empty(sizes, dtype=meta.dtype))
            elif name in symbolic:
                hint = _hint(values.get(name))
                k = shape_names.index(name)
                call_args.append(new_symbol(UNKNOWN_DIM_HINT if hint is None else hint, name, (SHAPE, k, 0)))
            elif fields and name in fields:
                call_args.append(new_symbol(int(values[name]), name, (ARG, fields[name])))
            else:
                call_args.append(values[name])
        try:
            with probing():
                result = fake(*call_args) if fake is not None else _run_fake(overload, mode, call_args, compiled)
            upper_override = size_upper(*call_args) if size_upper is not None else None
        except SpecError:
            raise
        except Exception as err:  # noqa: BLE001 - any failure of the user's fake kernel is reported with the op
            raise DerivationError(
                f"{op}: its fake kernel failed when run with symbolic sizes: {type(err).__name__}: {err}"
            ) from err
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    checks = [g.expr for g in env.guards if isinstance(g.expr, sympy.Eq) and _from_user(g)]
    if unbacked:  # the fake kernel's equalities are deferred runtime asserts, not guards
        asserts = [a.expr for group in env.deferred_runtime_asserts.values() for a in group]
        checks += [e for e in dict.fromkeys(asserts) if isinstance(e, sympy.Eq)]
    for guard in env.guards:
        if not isinstance(guard.expr, sympy.Eq) and not _holds_for_all_sizes(guard.expr) and _from_user(guard):
            raise DerivationError(
                f"{op}: its fake kernel branches on sizes (it assumed {guard.expr}), so its output shapes hold only "
                "for some inputs; use torch.sym_max/torch.sym_min (not max/min or if) on sizes, or declare the op "
                "with outputs=..."
            )

    def simplify(value: Any) -> Any:
        return env.simplify(value.node.expr) if isinstance(value, torch.SymInt) else sympy.Integer(int(value))

    exprs = [[simplify(d) for d in out.shape] for out in outputs]
    unbacked = sorted(
        {s for dims in exprs for e in dims for s in e.free_symbols if s not in symbols}, key=lambda s: s.name
    )
    sizes = {symbol: k for k, symbol in enumerate(unbacked)}
    translate = _Translator(op, symbols, {})
    program: list[int] = [MAGIC, VERSION if fields is not None else 2, len(tensor_names)]
    program += [len(metas[n].shape) for n in tensor_names]
    program += [len(shape_names), len(unbacked)]
    for k, symbol in enumerate(unbacked):
        upper = simplify(upper_override) if upper_override is not None and k == 0 else _upper_bound(env, symbol)
        if upper is None:
            raise DerivationError(
                f"{op}: output size {symbol} (from ctx.new_dynamic_size) has no upper bound; give new_dynamic_size "
                "max= (an int), add torch._check(size <= <expression of input sizes>) in the fake kernel, or "
                "declare the op with size_upper=..."
            )
        fraction = Fraction(size_opt).limit_denominator(64)
        upper_tokens = translate(upper, f"the upper bound of dynamic size {symbol}")
        scale = [CONST, fraction.numerator, MUL, CONST, fraction.denominator, FLOORDIV]
        program += [upper_tokens[0] + len(scale), *upper_tokens[1:], *scale]
        program += upper_tokens
    translate = _Translator(op, symbols, sizes)
    program.append(len(outputs))
    output_dtypes = []
    for index, (out, dims) in enumerate(zip(outputs, exprs, strict=True)):
        if out.dtype not in TRT_DTYPE_CODES or out.dtype == torch.bool:
            raise DerivationError(
                f"{op}: output {index} has dtype {out.dtype}, which a TensorRT plugin cannot produce "
                f"(expected one of {sorted(str(d) for d in TRT_DTYPE_CODES if d != torch.bool)})"
            )
        same = [i for i, n in enumerate(tensor_names) if metas[n].dtype == out.dtype]
        code = -(same[0] + 1) if same else TRT_DTYPE_CODES[out.dtype]
        program += [code if dtype_codes is None else dtype_codes[index], len(dims)]
        for j, expr in enumerate(dims):
            program += translate(expr, f"output {index} dim {j}")
        output_dtypes.append(out.dtype)
    translate = _Translator(op, symbols, {})
    translated = []
    for check in checks:
        try:
            translated.append(translate(check.lhs, "a check") + translate(check.rhs, "a check"))
        except DerivationError:
            continue  # a check over sizes the plugin cannot see (e.g. a SymInt argument's value) stays eager-only
    program.append(len(translated))
    for tokens in translated:
        program += tokens
    return Derived(tuple(int(t) for t in program), tuple(output_dtypes), len(unbacked))


# ---------------------------------------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class Program:
    """A parsed shape program (the inverse of :func:`derive`'s encoding)."""

    input_ranks: tuple[int, ...]
    num_shape_inputs: int
    sizes: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]  # (opt, upper) expressions
    outputs: tuple[tuple[int, tuple[tuple[int, ...], ...]], ...]  # (dtype code, dim expressions)
    checks: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()  # (lhs, rhs) expressions that must be equal

    @classmethod
    def parse(cls, tokens: Sequence[int]) -> Program:
        tokens = [int(t) for t in tokens]
        if len(tokens) < 3 or tokens[0] != MAGIC or not 1 <= tokens[1] <= VERSION:
            raise ValueError(f"not a version-1 to -{VERSION} shape program: {tokens[:4]}")
        pos = 2

        def take() -> int:
            nonlocal pos
            if pos >= len(tokens):
                raise ValueError("shape program ends early")
            pos += 1
            return tokens[pos - 1]

        def expr() -> tuple[int, ...]:
            nonlocal pos
            n = take()
            pos += n
            if n <= 0 or pos > len(tokens):
                raise ValueError("shape program has a malformed expression")
            return tuple(tokens[pos - n : pos])

        ranks = tuple(take() for _ in range(take()))
        num_shape = take()
        sizes = tuple((expr(), expr()) for _ in range(take()))
        outputs = []
        for _ in range(take()):
            code = take()
            outputs.append((code, tuple(expr() for _ in range(take()))))
        checks = tuple((expr(), expr()) for _ in range(take())) if tokens[1] >= 2 else ()
        if pos != len(tokens):
            raise ValueError(f"shape program has {len(tokens) - pos} trailing tokens")
        return cls(ranks, num_shape, sizes, tuple(outputs), checks)


def evaluate_expr(
    expr: Sequence[int],
    shapes: Sequence[Sequence[int]],
    shape_values: Sequence[Sequence[int]],
    sizes: Sequence[int],
    args: Sequence[int] = (),
) -> int:
    stack: list[int] = []
    i = 0
    while i < len(expr):
        code = expr[i]
        if code in _BINARY:
            b, a = stack.pop(), stack.pop()
            stack.append(_BINARY[code](a, b))
            i += 1
            continue
        operands = expr[i + 1 : i + 1 + _OPERAND_COUNTS[code]]
        if code == CONST:
            stack.append(operands[0])
        elif code == DIM:
            stack.append(int(shapes[operands[0]][operands[1]]))
        elif code == SHAPE:
            stack.append(int(shape_values[operands[0]][operands[1]]))
        elif code == ARG:
            stack.append(int(args[operands[0]]))
        else:
            stack.append(int(sizes[operands[0]]))
        i += 1 + len(operands)
    if len(stack) != 1:
        raise ValueError(f"malformed expression {list(expr)}")
    return stack[0]


def uses_size(expr: Sequence[int]) -> bool:
    """Whether an expression reads a data-dependent size (a ``SIZE`` leaf)."""
    i = 0
    while i < len(expr):
        if expr[i] == SIZE:
            return True
        i += 1 if expr[i] in _BINARY else 1 + _OPERAND_COUNTS[expr[i]]
    return False


def evaluate(
    tokens: Sequence[int],
    shapes: Sequence[Sequence[int]],
    shape_values: Sequence[Sequence[int]] = (),
    sizes: Sequence[int] | None = None,
    args: Sequence[int] = (),
) -> tuple[list[tuple[int, ...]], list[int]]:
    """Concrete output shapes and size-tensor upper bounds; dynamic sizes take ``sizes`` (default: the uppers),
    ``ARG`` leaves the scalar arguments ``args`` (field order)."""
    program = _parse_cached(tuple(int(t) for t in tokens))
    uppers = [evaluate_expr(upper, shapes, shape_values, (), args) for _, upper in program.sizes]
    values = uppers if sizes is None else list(sizes)
    shapes_out = [
        tuple(evaluate_expr(e, shapes, shape_values, values, args) for e in dims) for _, dims in program.outputs
    ]
    return shapes_out, uppers


@functools.lru_cache(maxsize=256)
def _parse_cached(tokens: tuple[int, ...]) -> Program:
    return Program.parse(tokens)


def output_dtypes(tokens: Sequence[int], input_dtypes: Sequence[torch.dtype]) -> list[torch.dtype]:
    program = _parse_cached(tuple(int(t) for t in tokens))
    return [input_dtypes[-code - 1] if code < 0 else DTYPES_BY_CODE[code] for code, _ in program.outputs]


__all__ = [
    "DerivationError",
    "Derived",
    "Program",
    "TensorMeta",
    "derive",
    "evaluate",
    "output_dtypes",
]

"""The shape-rule compiler: a declared op's shape programs for every input rank its fake kernel accepts, as compiled
into its plugin library (``Declaration.compiled_programs``), derived with :mod:`._derive`."""

from __future__ import annotations

import itertools
from typing import Any

import torch

from . import _derive
from .errors import DeclarationError
from .spec import SpecError

#: The largest rank a TensorRT tensor has (nvinfer1::Dims::MAX_DIMS): the compiled shape rules cover ranks 0 to this.
MAX_RANK = 8

#: How many input-rank combinations the search for the first one the fake kernel accepts may try.
_RANK_SEARCH_LIMIT = 512


class ShapeRuleCompiler:
    """Finds the input ranks a declared op accepts and derives its shape program for each (``compiled_programs``).

    Integer arguments are symbols (``ARG`` leaves) where the fake kernel takes a SymInt for them; otherwise, like
    float and bool arguments, they are probed with two values, and a shape that changes with the value is an error.
    Output dtypes are probed with two dtype assignments: an output is "the type of input i" where that holds for
    both, else a fixed type."""

    def __init__(self, declaration: Any):
        self.d = declaration
        scalars = declaration.scalar_args
        self.field_index = {a.name: k for k, a in enumerate(scalars)}
        self.ints = [a.name for a in scalars if declaration._types[a.name] in ("int", "SymInt")]
        self.ranges = {f.arg: (f.min, f.max) for f in declaration.spec.fields}
        self.probes = {a.name: self._probe_values(a) for a in scalars}
        self.values = {name: values[0] for name, values in self.probes.items()}
        self.dtypes, self.other_dtypes = self._probe_dtypes()
        self._cache: dict[tuple, Any] = {}
        self.symbolic_failure = ""

    def programs(self) -> tuple[tuple[int, ...], ...]:
        d = self.d
        base, mode = self._base()
        self._check_independent(base, mode)
        codes = self._dtype_codes(base, mode)
        programs = [self._attempt(ranks, mode, codes=codes) for ranks in self._accepted_ranks(base, mode)]
        counts = {p.num_size_tensors for p in programs}
        if len(counts) > 1:
            raise DeclarationError(
                f"{d.label}: its fake kernel makes a different number of dynamic sizes for different input ranks "
                f"({sorted(counts)}); a plugin has one output count"
            )
        return tuple(p.program for p in programs)

    def first_program(self) -> tuple[int, ...]:
        """The shape program for the first input ranks the fake kernel accepts, one of :meth:`programs` at the cost of
        one derivation: what a declaration's checks need."""
        base, mode = self._base()
        return self._attempt(base, mode, codes=self._dtype_codes(base, mode)).program

    def _base(self) -> tuple[tuple[int, ...], tuple[str, ...]]:
        """The first accepted input ranks and the integer arguments kept symbolic with them."""
        sym_ints = tuple(n for n in self.ints if self.d._types[n] == "SymInt")
        for mode in tuple(dict.fromkeys((tuple(self.ints), sym_ints, ()))):
            base = self._base_ranks(mode)
            if base is not None:
                return base, mode
            self.symbolic_failure = self._first_failure()
        raise DeclarationError(
            f"{self.d.label}: its fake kernel accepts no combination of input ranks 0 to {MAX_RANK}, so no shape rules "
            f"can be compiled into its plugin library; first failure: {self._first_failure()}"
        )

    def _attempt(
        self, ranks: tuple[int, ...], symbolic_ints: tuple[str, ...], *, dtypes=None, values=None, codes=None
    ) -> Any:
        dtypes = tuple(dtypes or self.dtypes)
        values = dict(values or self.values)
        key = (tuple(ranks), symbolic_ints, dtypes, tuple(sorted(values.items())), codes)
        if key not in self._cache:
            d = self.d
            metas = {a.name: _derive.TensorMeta((None,) * r, t) for a, r, t in zip(d.tensor_args, ranks, dtypes)}
            fields = {n: self.field_index[n] for n in symbolic_ints}
            self._cache[key] = None
            # Unhinted sizes first (checks such as rois.size(1) == 5 hold for no made-up size), then hinted ones
            # (a Python comparison such as x.shape == y.shape needs hints).
            for unbacked in (True, False):
                try:
                    self._cache[key] = _derive.derive(
                        d.label,
                        d.overload,
                        d.schema.arguments,
                        values,
                        metas,
                        frozenset(),
                        fake=d.fake_override,
                        size_upper=d.size_upper,
                        size_opt=d.size_opt,
                        fields=fields,
                        dtype_codes=codes,
                        field_ranges=self.ranges,
                        unbacked=unbacked,
                    )
                    break
                except SpecError as err:
                    self._cache[key] = self._cache[key] or err
        return self._cache[key]

    def _accepts(self, ranks: tuple[int, ...], symbolic_ints: tuple[str, ...]) -> bool:
        return not isinstance(self._attempt(ranks, symbolic_ints), Exception)

    def _accepted_ranks(self, base: tuple[int, ...], symbolic_ints: tuple[str, ...]) -> list[tuple[int, ...]]:
        """Every rank combination reachable from ``base`` through accepted ones, a step changing the rank of one
        input, of two inputs or of all inputs together by one (inputs whose ranks must agree move together)."""
        n = len(base)
        groups = {frozenset(g) for size in (1, 2, n) for g in itertools.combinations(range(n), size)}
        seen, pending, accepted = {base}, [base], []
        while pending:
            ranks = pending.pop()
            accepted.append(ranks)
            for group in groups:
                for step in (1, -1):
                    moved = tuple(r + step if i in group else r for i, r in enumerate(ranks))
                    if moved in seen or not all(0 <= r <= MAX_RANK for r in moved):
                        continue
                    seen.add(moved)
                    if self._accepts(moved, symbolic_ints):
                        pending.append(moved)
        return sorted(accepted)

    def _base_ranks(self, symbolic_ints: tuple[str, ...]) -> tuple[int, ...] | None:
        n = len(self.d.tensor_args)
        if self.d._example_ranks is not None and self._accepts(self.d._example_ranks, symbolic_ints):
            return self.d._example_ranks
        candidates = sorted(itertools.product(range(MAX_RANK + 1), repeat=n), key=lambda r: (sum(r), r))
        for ranks in candidates[:_RANK_SEARCH_LIMIT]:
            if self._accepts(ranks, symbolic_ints):
                return ranks
        return None

    def _first_failure(self) -> str:
        failures = [v for v in self._cache.values() if isinstance(v, Exception)]
        derivation = [f for f in failures if isinstance(f, _derive.DerivationError)]
        return str((derivation or failures or ["none tried"])[0])

    def _check_independent(self, base: tuple[int, ...], symbolic_ints: tuple[str, ...]) -> None:
        """A program holds for every value of the arguments it does not read as ARG leaves: probe a second value."""
        reference = self._attempt(base, symbolic_ints).program
        for argument in self.d.scalar_args:
            name = argument.name
            if name in symbolic_ints or len(self.probes[name]) < 2:
                continue
            other = self._attempt(base, symbolic_ints, values={**self.values, name: self.probes[name][1]})
            if not isinstance(other, Exception) and other.program != reference:
                raise DeclarationError(
                    f"{self.d.label}: its output shapes depend on the value of argument '{name}' "
                    f"({self.d._types[name]}), which the fake kernel does not take as a SymInt; a plugin library "
                    "holds shape rules for every value, so the fake kernel must use an integer argument in size "
                    "arithmetic only (no indexing, no if), and a float or bool argument not at all"
                    + (f"; with it symbolic: {self.symbolic_failure}" if self.symbolic_failure else "")
                )

    def _dtype_codes(self, base: tuple[int, ...], symbolic_ints: tuple[str, ...]) -> tuple[int, ...]:
        first = self._attempt(base, symbolic_ints)
        second = self._attempt(base, symbolic_ints, dtypes=self.other_dtypes)
        runs = [(self.dtypes, first.output_dtypes)]
        if not isinstance(second, Exception):
            runs.append((self.other_dtypes, second.output_dtypes))
        codes = []
        for o in range(len(first.output_dtypes)):
            same = [i for i in range(len(self.dtypes)) if all(ins[i] == outs[o] for ins, outs in runs)]
            if same:
                codes.append(-(same[0] + 1))
            elif len({outs[o] for _, outs in runs}) == 1:
                codes.append(_derive.TRT_DTYPE_CODES[first.output_dtypes[o]])
            else:
                raise DeclarationError(
                    f"{self.d.label}: output {o} has dtype {first.output_dtypes[o]} for inputs {self.dtypes} but "
                    f"{second.output_dtypes[o]} for {self.other_dtypes}: a plugin's output type is one input's type "
                    "or a fixed type"
                )
        return tuple(codes)

    def _probe_dtypes(self) -> tuple[tuple[torch.dtype, ...], tuple[torch.dtype, ...]]:
        """Two dtype assignments the declaration allows, as different from each other as it allows."""
        first: list[torch.dtype] = []
        second: list[torch.dtype] = []
        names = [t.name for t in self.d.spec.inputs]
        for spec in self.d.spec.inputs:
            if spec.same_dtype_as is not None:
                j = names.index(spec.same_dtype_as)
                first.append(first[j])
                second.append(second[j])
                continue
            first.append(spec.dtypes[0])
            others = [t for t in reversed(spec.dtypes) if t != spec.dtypes[0]]
            second.append(others[0] if others else spec.dtypes[0])
        return tuple(first), tuple(second)

    def _probe_values(self, argument: Any) -> tuple[Any, ...]:
        """Up to two distinct values the argument's declared range allows, its default first."""
        field = self.d.spec.field_by_name(argument.name)
        type_name = self.d._types[argument.name]
        if type_name == "bool":
            candidates: list[Any] = [False, True]
        elif type_name == "float":
            candidates = [0.5, 0.25, 1.0, 2.0]
        else:
            candidates = [3, 5, 2, 7, 1]
        bounds = [b for b in (field.min, field.max) if b is not None]
        candidates += bounds + [b + 1 for b in bounds] + [b - 1 for b in bounds]
        if argument.has_default_value():
            candidates.insert(0, argument.default_value)
        chosen: list[Any] = []
        for value in candidates:
            if type_name in ("int", "SymInt"):
                if not float(value).is_integer():
                    continue
                value = int(value)
            try:
                field.check(self.d.qualname, value)
            except SpecError:
                continue
            if value not in chosen:
                chosen.append(value)
            if len(chosen) == 2:
                break
        if not chosen:
            raise DeclarationError(f"{self.d.label}: found no value for argument '{argument.name}' in its range")
        return tuple(chosen)

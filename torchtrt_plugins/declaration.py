"""One declared op (:class:`Declaration`): the op's schema and declared options checked and turned into its spec,
the derivation of its plugin calls, its eager checks and its shape rules. :func:`torchtrt_plugins.declare` makes one
and registers it."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from . import _derive
from .errors import DeclarationError
from .kernels.describe import Kernel, bind_kernels, expand_launchers
from .shape_rules import ShapeRuleCompiler
from .spec import (
    CXX_SYMBOL,
    WEIGHT_FIELD_TYPES,
    FieldSpec,
    OpSpec,
    SpecError,
    Tactic,
    TensorSpec,
    Tolerance,
    bind,
)

#: What a tensor input accepts when the declaration does not say (bool: cast to int32 for the plugin).
DEFAULT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int32, torch.int64)

#: The dtypes a declared tensor input may have: those both a TensorRT plugin (DataType) and the launcher ABI
#: (``ttp::sdk::DType``) carry; bool only on its own (the plugin takes it as int32).
SUPPORTED_DTYPES = (*DEFAULT_DTYPES, torch.bool)

#: Schema scalar type -> PluginFieldType of its field.
SCALAR_FIELD_TYPES = {"float": "FLOAT64", "int": "INT64", "SymInt": "INT64", "bool": "INT32"}

#: The field value of a SymInt argument that reaches the plugin as a shape input: INT32_MIN, so that it survives
#: TensorRT's ONNX parser, which hands every integer attribute to createPlugin as kINT32 (a hand-written node marks a
#: shape input with it too).
SHAPE_INPUT_SENTINEL = -(2**31)


@dataclass(frozen=True)
class Range:
    """The valid values of a scalar argument, declared once."""

    min: float | None = None
    max: float | None = None
    min_inclusive: bool = True
    doc: str = ""


@dataclass(frozen=True)
class Resource:
    """A device table computed once from some of the op's scalar arguments (``key_fields``) and shared by every call
    and plugin instance with the same values: e.g. a rotary embedding's cos/sin cache from ``(max_position,
    rotary_dim, base)``. ``size`` and ``init`` are C++ functions of the launcher ABI (``sdk/resources.h``), called
    with the key fields' values as ``LaunchArgs::scalars`` (in ``key_fields`` order): ``size`` returns the table's
    bytes, ``init`` writes them to ``outputs[0]``; the op's launchers read the table as ``LaunchArgs::resources[i]``
    (the declaration's order). A plugin acquires it through TensorRT's plugin registry (``acquirePluginResource``, one
    table per key and device, released with the last instance); the eager op keeps one per key and device."""

    key_fields: tuple[str, ...]
    size: str
    init: str
    doc: str = ""


_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")


def _qualname(op: Any) -> str:
    if isinstance(op, str):
        return op
    for attribute in ("_qualname", "_qualified_op_name"):
        if isinstance(getattr(op, attribute, None), str):
            return getattr(op, attribute)
    name = getattr(op, "name", None)
    if callable(name):
        return name().split(".", 1)[0]
    raise DeclarationError(f"declare: expected an op or 'namespace::name', got {op!r}")


def _overload(qualname: str) -> torch._ops.OpOverload:
    if "::" not in qualname:
        raise DeclarationError(f"declare: expected 'namespace::name', got {qualname!r}")
    namespace, name = qualname.split("::", 1)
    try:
        return getattr(getattr(torch.ops, namespace), name).default
    except (AttributeError, RuntimeError):
        raise DeclarationError(
            f"{qualname}: no such torch op (with a default overload); define it first "
            "(torch.library.custom_op or Library.define) and import the module that defines it"
        ) from None


def _schema_types(schema: Any) -> dict[str, str]:
    """Argument name -> declared type, read from the schema's text: the parsed types say int for SymInt."""
    text = str(schema)
    inner = text[text.index("(") + 1 : text.rindex(") ->")]
    parts, current, depth = [], "", 0
    for char in inner:
        depth += char in "([" and 1 or (char in ")]" and -1 or 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    types = {}
    for part in parts:
        declaration = part.split("=", 1)[0].strip()
        if declaration in ("", "*"):
            continue
        type_text, _, name = declaration.rpartition(" ")
        types[name] = re.sub(r"\(.*?\)", "", type_text)  # drop alias annotations: Tensor(a!) -> Tensor
    return types


class Declaration:
    """One declared op: its spec, the derivation of its plugin calls, its eager checks and its eager CUDA kernel."""

    def __init__(
        self,
        op: Any,
        *,
        plugin_name: str | None = None,
        plugin_version: str = "1",
        plugin_namespace: str | None = None,
        ranges: Mapping[str, Range] | None = None,
        dtypes: Mapping[str, Sequence[torch.dtype]] | None = None,
        same_dtype: Mapping[str, str] | None = None,
        launcher: str | Kernel | None = None,
        tactics: Mapping[int, str | Kernel] | None = None,
        workspace: str | None = None,
        library: Any = None,
        reference: Callable[..., Any] | None = None,
        tolerances: Mapping[torch.dtype, Tolerance] | None = None,
        outputs: Callable[..., Any] | None = None,
        size_upper: Callable[..., Any] | None = None,
        size_opt: float = 0.5,
        data_dependent: bool | None = None,
        sizes_first: bool = False,
        example_inputs: Sequence[Any] | None = None,
        mutates: Sequence[str] | None = None,
        weight_fields: Sequence[str] = (),
        resources: Mapping[str, Resource] | None = None,
        doc: str = "",
    ):
        self.qualname = _qualname(op)
        self.overload = _overload(self.qualname)
        self.schema = self.overload._schema
        namespace, name = self.qualname.split("::", 1)
        self.library = library
        #: The op's registry entry (registry.OpEntry), once ``declare`` has registered it.
        self.registered_entry: Any = None
        self.fake_override = outputs
        self.size_upper = size_upper
        self.size_opt = float(size_opt)
        ranges, dtypes, same_dtype = dict(ranges or {}), dict(dtypes or {}), dict(same_dtype or {})
        if not 0.0 < self.size_opt <= 1.0:
            raise DeclarationError(f"{self.qualname}: size_opt must be in (0, 1], got {size_opt!r}")
        self._types = _schema_types(self.schema)
        self._check_schema()
        self.mutated = self._mutated_args(mutates)
        self.tensor_args = [a for a in self.schema.arguments if self._types[a.name] == "Tensor"]
        self.scalar_args = [a for a in self.schema.arguments if self._types[a.name] != "Tensor"]
        self.num_arguments = len(self.schema.arguments)
        self.argument_index = {a.name: i for i, a in enumerate(self.schema.arguments)}
        self.tensor_positions = frozenset(self.argument_index[a.name] for a in self.tensor_args)
        # The defaults of the trailing arguments that have one (the dispatcher leaves them out of a call).
        trailing = []
        for argument in reversed(self.schema.arguments):
            if not argument.has_default_value():
                break
            trailing.insert(0, argument.default_value)
        self.trailing_defaults = tuple(trailing)
        tensor_names = {a.name for a in self.tensor_args}
        scalar_names = {a.name for a in self.scalar_args}
        for mapping, what, names in (
            (ranges, "ranges", scalar_names),
            (dtypes, "dtypes", tensor_names),
            (same_dtype, "same_dtype", tensor_names),
        ):
            for key in mapping:
                if key not in names:
                    kind = "scalar" if what == "ranges" else "tensor"
                    raise DeclarationError(
                        f"{self.qualname}: {what} names argument '{key}', which is not a {kind} argument of "
                        f"{self.schema}; expected one of {sorted(names)}"
                    )
        self._check_options(ranges, dtypes, tolerances)
        for key, other in same_dtype.items():
            order = [a.name for a in self.tensor_args]
            if other not in tensor_names or order.index(other) >= order.index(key):
                raise DeclarationError(
                    f"{self.qualname}: same_dtype['{key}'] must name an earlier tensor argument, got {other!r}"
                )
        # A Python kernel (kernels.describe: Triton, CUDA source) stands for the C++ launcher generated for it.
        launcher, tactics, self.aot_kernels = expand_launchers(self.qualname, launcher, tactics)
        launchers = {0: launcher} if launcher else {}
        for value, symbol in (tactics or {}).items():
            if not isinstance(value, int) or value <= 0:
                raise DeclarationError(f"{self.qualname}: tactic values must be ints > 0, got {value!r}")
            launchers[value] = symbol
        if launchers and 0 not in launchers:
            launchers = {0: launchers[min(launchers)], **launchers}
        if library is not None and not launchers:
            raise DeclarationError(f"{self.qualname}: a declaration with a library needs launcher= (a C++ symbol)")
        for value, symbol in launchers.items():
            self._check_function_name(symbol, "launcher" if value == 0 else f"tactics[{value}]", "cudaError_t")
        if workspace is not None:
            self._check_function_name(workspace, "workspace", "size_t")
        self.launchers = dict(sorted(launchers.items()))
        self.workspace = workspace
        if sizes_first and data_dependent is False:
            raise DeclarationError(
                f"{self.qualname}: sizes_first=True is for data-dependent ops (their launcher writes size tensors), "
                "but the declaration says data_dependent=False"
            )
        self.sizes_first = bool(sizes_first)
        inputs = []
        for argument in self.tensor_args:
            allowed = tuple(dtypes.get(argument.name, DEFAULT_DTYPES))
            plugin_dtype = None
            if torch.bool in allowed:
                if allowed != (torch.bool,):
                    raise DeclarationError(
                        f"{self.qualname}: argument '{argument.name}' may be bool only on its own (TensorRT plugins "
                        f"take no BOOL tensors; a bool input is cast to int32), got {allowed}"
                    )
                plugin_dtype = torch.int32
            inputs.append(
                TensorSpec(
                    argument.name, allowed, same_dtype_as=same_dtype.get(argument.name), plugin_dtype=plugin_dtype
                )
            )
        fields = tuple(self._field(a, ranges.get(a.name)) for a in self.scalar_args)
        self.resources = self._resources(resources or {})
        weight_fields = self._weight_fields(weight_fields, inputs, {f.name for f in fields})
        self.spec = OpSpec(
            name=name,
            schema=str(self.schema)[len(self.qualname) :],
            plugin_name=plugin_name or "".join(part.title() for part in name.split("_")),
            inputs=tuple(inputs),
            outputs=tuple(
                TensorSpec(r.name or f"out{i}", tuple(_derive.TRT_DTYPE_CODES))
                for i, r in enumerate(self.schema.returns)
            ),
            fields=fields,
            plugin_version=plugin_version,
            plugin_namespace=plugin_namespace or namespace,
            tactics=tuple(Tactic(v, s) for v, s in self.launchers.items() if v != 0),
            tolerances=dict(tolerances or {}),
            requires_output_allocator=bool(data_dependent),
            mutated=self.mutated,
            weight_fields=weight_fields,
            doc=doc,
            op_namespace=namespace,
        )
        bind_kernels(self)
        self._probing = example_inputs is not None
        self._example_ranks = (
            tuple(len(t.shape) for t in example_inputs if isinstance(t, torch.Tensor)) if example_inputs else None
        )
        if example_inputs is not None:
            derived = self.derive_for_values(*example_inputs)
            self._probing = False
            if data_dependent is None:
                self.spec = _replace(self.spec, requires_output_allocator=derived.num_size_tensors > 0)
            self.spec = _replace(self.spec, hidden_outputs=derived.num_size_tensors)
        self.reference = reference or self.overload

    @property
    def entry(self) -> Any:
        """The op's entry in the registry (``declare`` registers it); KeyError for a declaration not registered."""
        if self.registered_entry is None:
            raise KeyError(f"{self.label}: this declaration is not the registered one (torchtrt_plugins.declare)")
        return self.registered_entry

    # ------------------------------------------------------------------------------------------ schema

    def _check_schema(self) -> None:
        for argument in self.schema.arguments:
            type_name = self._types[argument.name]
            if argument.alias_info is not None and argument.alias_info.is_write and type_name != "Tensor":
                raise DeclarationError(
                    f"{self.qualname}: argument '{argument.name}' is mutated but is not a tensor input (it is "
                    f"{type_name}); a plugin updates in place only a plain Tensor argument, through an output aliased "
                    "to it"
                )
            if type_name != "Tensor" and type_name not in SCALAR_FIELD_TYPES:
                raise DeclarationError(
                    f"{self.qualname}: argument '{argument.name}' has type {type_name}, which a plugin cannot take "
                    f"(expected Tensor, {', '.join(SCALAR_FIELD_TYPES)})"
                )
        if not self.schema.returns:
            raise DeclarationError(f"{self.qualname}: returns nothing; a plugin op must return tensors")
        for i, ret in enumerate(self.schema.returns):
            if ret.alias_info is not None:
                raise DeclarationError(
                    f"{self.qualname}: return {i} aliases an argument ({self.schema}); a declared op returns new "
                    "tensors and updates a mutated argument in place (declare it Tensor(a!) and return nothing for it)"
                )
            if str(ret.type) != "Tensor":
                raise DeclarationError(
                    f"{self.qualname}: return {i} has type {ret.type}, expected Tensor (or a tuple of Tensors)"
                )

    def _check_options(self, ranges: Mapping[str, Any], dtypes: Mapping[str, Any], tolerances: Any) -> None:
        """The values of ``ranges``, ``dtypes`` and ``tolerances`` are of the types they must be (the names are
        checked against the schema apart)."""
        for name, declared in ranges.items():
            if not isinstance(declared, Range):
                raise DeclarationError(
                    f"{self.qualname}: ranges['{name}'] must be a torchtrt_plugins.Range (e.g. Range(min=0, max=1)), "
                    f"got {declared!r}"
                )
            bounds = [b for b in (declared.min, declared.max) if b is not None]
            if any(isinstance(b, bool) or not isinstance(b, (int, float)) or b != b for b in bounds):
                raise DeclarationError(
                    f"{self.qualname}: ranges['{name}'] must have numbers (or None) as min and max, got {declared!r}"
                )
            if len(bounds) == 2 and (
                declared.min > declared.max or (declared.min == declared.max and not declared.min_inclusive)
            ):
                raise DeclarationError(
                    f"{self.qualname}: ranges['{name}'] admits no value (min {declared.min}, max {declared.max}), "
                    f"got {declared!r}"
                )
        supported = ", ".join(str(d).replace("torch.", "") for d in SUPPORTED_DTYPES)
        for name, allowed in dtypes.items():
            if isinstance(allowed, (str, torch.dtype)) or not isinstance(allowed, Sequence) or not allowed:
                raise DeclarationError(
                    f"{self.qualname}: dtypes['{name}'] must be a non-empty tuple of torch dtypes (e.g. "
                    f"(torch.float32,)), got {allowed!r}"
                )
            unsupported = [d for d in allowed if d not in SUPPORTED_DTYPES]
            if unsupported:
                raise DeclarationError(
                    f"{self.qualname}: dtypes['{name}'] has {unsupported}, which a TensorRT plugin cannot take; "
                    f"expected dtypes among {{{supported}}}"
                )
        for dtype, tolerance in (tolerances or {}).items():
            if not isinstance(dtype, torch.dtype) or not isinstance(tolerance, Tolerance):
                raise DeclarationError(
                    f"{self.qualname}: tolerances must map torch dtypes to torchtrt_plugins.Tolerance(atol=..., "
                    f"rtol=...), got {dtype!r}: {tolerance!r}"
                )

    def _check_function_name(self, symbol: Any, what: str, returns: str) -> None:
        if not isinstance(symbol, str) or not CXX_SYMBOL.match(symbol):
            raise DeclarationError(
                f"{self.qualname}: {what} must be the name of a C++ function of the library's sources, "
                f"'{returns} name(ttp::sdk::LaunchArgs const&)', namespace-qualified or not (e.g. 'myops::scaledAdd'), "
                f"got {symbol!r}"
            )

    def _mutated_args(self, declared: Sequence[str] | None) -> tuple[str, ...]:
        """The tensor arguments the schema marks as mutated (``Tensor(a!)``); ``mutates``, when given, must name
        exactly those (a name that is not a tensor input of the op is an error)."""
        mutated = tuple(a.name for a in self.schema.arguments if a.alias_info is not None and a.alias_info.is_write)
        if declared is None:
            return mutated
        for name in declared:
            if self._types.get(name) != "Tensor":
                kind = f"a {self._types[name]} argument" if name in self._types else "no argument"
                raise DeclarationError(
                    f"{self.qualname}: mutates names '{name}', which is {kind} of {self.schema}; expected a tensor "
                    f"input marked Tensor(a!) in the schema (mutated there: {list(mutated)})"
                )
            if name not in mutated:
                raise DeclarationError(
                    f"{self.qualname}: mutates names argument '{name}', which the schema does not mark as mutated "
                    f"({self.schema}); declare it Tensor(a!) (torch.library.custom_op: mutates_args)"
                )
        missing = [name for name in mutated if name not in declared]
        if missing:
            raise DeclarationError(
                f"{self.qualname}: the schema mutates {missing}, which mutates={list(declared)} leaves out"
            )
        return mutated

    def _resources(self, resources: Mapping[str, Resource]) -> dict[str, Resource]:
        """The declared shared tables, each keyed by scalar arguments whose values every plugin knows at createPlugin
        (no SymInt: it may come from a shape input), with C++ symbols for its size and init functions."""
        if resources and self.library is None:
            raise DeclarationError(
                f"{self.qualname}: resources={sorted(resources)} need a library (their init launchers are C++)"
            )
        scalars = [a.name for a in self.scalar_args]
        out = {}
        for name, resource in resources.items():
            where = f"{self.qualname}: resources['{name}']"
            if not isinstance(name, str) or not _IDENTIFIER.match(name):
                raise DeclarationError(f"{self.qualname}: resource names must be identifiers, got {name!r}")
            if not isinstance(resource, Resource):
                raise DeclarationError(f"{where} must be a torchtrt_plugins.Resource, got {type(resource).__name__}")
            keys = tuple(resource.key_fields) if not isinstance(resource.key_fields, str) else (resource.key_fields,)
            if not keys:
                raise DeclarationError(
                    f"{where}: key_fields is empty; expected the scalar arguments of {self.schema} "
                    "the table is computed from"
                )
            for key in keys:
                if key not in scalars:
                    raise DeclarationError(
                        f"{where}: key_fields names argument '{key}', which is not a scalar argument of "
                        f"{self.schema}; expected some of {scalars}"
                    )
                if self._types[key] == "SymInt":
                    raise DeclarationError(
                        f"{where}: key_fields names argument '{key}', a SymInt (it may reach the plugin as a shape "
                        "input, unknown when the table is built); declare it int"
                    )
            if len(set(keys)) != len(keys):
                raise DeclarationError(f"{where}: key_fields {list(keys)} names an argument twice")
            for what in ("size", "init"):
                symbol = getattr(resource, what)
                if not isinstance(symbol, str) or not CXX_SYMBOL.match(symbol):
                    raise DeclarationError(
                        f"{where}: {what} must be a C++ function name (e.g. 'myops::cacheBytes'), got {symbol!r}"
                    )
            out[name] = Resource(keys, resource.size, resource.init, resource.doc)
        return out

    def _weight_fields(self, names: Sequence[str], inputs: Sequence[TensorSpec], fields: set[str]) -> tuple[str, ...]:
        """The tensor arguments ``weight_fields`` names, each one the plugin can take as a constant field: not updated
        in place, of dtypes a PluginFieldType holds, its field names free."""
        by_name = {t.name: t for t in inputs}
        for name in names:
            spec = by_name.get(name)
            if spec is None:
                raise DeclarationError(
                    f"{self.qualname}: weight_fields names argument '{name}', which is not a tensor argument of "
                    f"{self.schema}; expected one of {sorted(by_name)}"
                )
            unheld = [str(d).replace("torch.", "") for d in spec.dtypes if d not in WEIGHT_FIELD_TYPES]
            if name in self.mutated or unheld or spec.plugin_dtype is not None:
                why = "is updated in place" if name in self.mutated else f"may have dtypes {unheld}"
                raise DeclarationError(
                    f"{self.qualname}: weight_fields names argument '{name}', which {why}; a weight field is a "
                    f"constant of a dtype in {sorted(str(d).replace('torch.', '') for d in WEIGHT_FIELD_TYPES)}"
                )
            taken = {name, f"{name}_shape"} & fields
            if taken:
                raise DeclarationError(
                    f"{self.qualname}: weight_fields names argument '{name}', whose plugin fields would take the "
                    f"names of scalar fields {sorted(taken)}"
                )
        return tuple(t.name for t in inputs if t.name in set(names))

    def _field(self, argument: Any, declared: Range | None) -> FieldSpec:
        type_name = self._types[argument.name]
        declared = declared or Range()
        has_default = argument.has_default_value()
        return FieldSpec(
            argument.name,
            SCALAR_FIELD_TYPES[type_name],
            arg=argument.name,
            default=argument.default_value if has_default else None,
            min=0 if type_name == "bool" else declared.min,
            max=1 if type_name == "bool" else declared.max,
            min_inclusive=declared.min_inclusive,
            required=not has_default,
            shape_input=type_name == "SymInt",
            shape_input_sentinel=SHAPE_INPUT_SENTINEL,
            boolean=type_name == "bool",
            doc=declared.doc,
        )

    # ------------------------------------------------------------------------------------------ checks

    def bind(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return bind(self.spec, args, kwargs)

    def check_args(self, *args: Any, **kwargs: Any) -> None:
        """The eager checks: :meth:`check_values` and, for concrete shapes, the fake kernel's own checks
        (:meth:`check_shapes`)."""
        bound, tensors = self.check_values(*args, **kwargs)
        values = {a.name: bound[a.name] for a in self.scalar_args}
        if all(isinstance(d, int) for t in tensors for d in t.shape):  # check_shapes skips symbolic scalars itself
            self.check_shapes([_derive.TensorMeta(tuple(t.shape), t.dtype) for t in tensors], values)

    def check_values(self, *args: Any, **kwargs: Any) -> tuple[dict[str, Any], list[torch.Tensor]]:
        """Dtypes from the declaration, scalar arguments against their declared ranges (what a fake kernel may check
        too). Returns the bound arguments and the tensors."""
        bound = self.bind(*args, **kwargs)
        tensors = [bound[a.name] for a in self.tensor_args]
        for argument, tensor in zip(self.tensor_args, tensors, strict=True):
            if not isinstance(tensor, torch.Tensor):
                raise SpecError(
                    f"{self.label}: argument '{argument.name}' must be a Tensor, got {type(tensor).__name__}"
                )
        self.spec.check_dtypes(tensors)
        for field in self.spec.fields:
            field.check(self.qualname, bound[field.arg])
        return bound, tensors

    def check_shapes(self, metas: Sequence[_derive.TensorMeta], values: Mapping[str, Any]) -> None:
        """Run the fake kernel on these concrete shapes, so its checks (e.g. ``torch._check`` that two inputs agree)
        raise for this call; the symbolic derivation records them without deciding. Cached per shapes and values;
        metas with unknown sizes are skipped."""
        if any(d is None for m in metas for d in m.shape) or not all(
            isinstance(v, (bool, int, float)) for v in values.values()
        ):
            return
        try:
            key = (tuple(metas), tuple(sorted(values.items())))
            hash(key)
        except TypeError:
            self._check_shapes(tuple(metas), tuple(values.items()))
            return
        self._check_shapes_cached(key[0], key[1])

    @functools.lru_cache(maxsize=1024)  # noqa: B019 - declarations live as long as the process
    def _check_shapes_cached(self, metas: tuple, values: tuple) -> None:
        self._check_shapes(metas, values)

    def _check_shapes(self, metas: tuple, values: tuple) -> None:
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        scalars = dict(values)
        with FakeTensorMode(shape_env=ShapeEnv()), _derive.probing():  # a ShapeEnv for ctx.new_dynamic_size()
            tensors = iter([torch.empty(m.shape, dtype=m.dtype) for m in metas])
            arguments = enumerate(self.schema.arguments)
            call = [next(tensors) if i in self.tensor_positions else scalars[a.name] for i, a in arguments]
            try:
                (self.fake_override or self.overload)(*call)
            except SpecError:
                raise
            except Exception as err:  # noqa: BLE001 - e.g. a bare torch._check: say which op and which arguments
                given = [
                    f"{a.name}: {tuple(m.shape)} {str(m.dtype).replace('torch.', '')}"
                    for a, m in zip(self.tensor_args, metas, strict=True)
                ]
                given += [f"{name}={value!r}" for name, value in values]
                raise SpecError(
                    f"{self.label}: its fake kernel rejects the arguments ({', '.join(given)}): "
                    f"{type(err).__name__}: {str(err).split(' (Could this error message be improved?')[0]}"
                ) from err

    @property
    def label(self) -> str:
        return self.qualname.replace("::", ".")

    # ------------------------------------------------------------------------------------------ derivation

    def derive(self, metas: Sequence[_derive.TensorMeta], values: Mapping[str, Any], symbolic: frozenset[str]):
        """The shape program for tensor inputs ``metas``, scalar ``values`` and the symbolic SymInt args."""
        key = (
            tuple(metas),
            tuple(sorted((k, v) for k, v in values.items() if k not in symbolic)),
            tuple(sorted((k, _derive._hint(values.get(k))) for k in symbolic)),
        )
        derived = self._derive_cached(key)
        if derived.num_size_tensors and not self.spec.requires_output_allocator and not self._probing:
            raise _derive.DerivationError(
                f"{self.label}: its fake kernel makes a data-dependent size (ctx.new_dynamic_size), so "
                "Torch-TensorRT must run it with an output allocator; declare it with data_dependent=True "
                "(or example_inputs=..., which finds out)"
            )
        return derived

    @functools.lru_cache(maxsize=256)  # noqa: B019 - declarations live as long as the process
    def _derive_cached(self, key: tuple) -> _derive.Derived:
        metas, constants, symbolic = key
        values = dict(constants)
        values.update(dict(symbolic))
        derived = _derive.derive(
            self.label,
            self.overload,
            self.schema.arguments,
            values,
            {a.name: m for a, m in zip(self.tensor_args, metas, strict=True)},
            frozenset(name for name, _ in symbolic),
            fake=self.fake_override,
            size_upper=self.size_upper,
            size_opt=self.size_opt,
        )
        return derived

    def derive_for_values(self, *args: Any, is_symbolic: Callable[[Any], bool] | None = None, **kwargs: Any):
        """The derivation for one call: tensors (real, fake, FX nodes or TensorRT ITensors) and scalars."""
        bound = self.bind(*args, **kwargs)
        metas = [tensor_meta(bound[a.name], f"{self.label}: argument '{a.name}'") for a in self.tensor_args]
        is_symbolic = is_symbolic or _is_symbolic
        symbolic = frozenset(
            a.name for a in self.scalar_args if self._types[a.name] == "SymInt" and is_symbolic(bound[a.name])
        )
        values = {a.name: _scalar_value(bound[a.name]) for a in self.scalar_args}
        if not symbolic:
            self.check_shapes(metas, values)  # the fake kernel's checks, with numbers in the messages
        return self.derive(metas, values, symbolic)

    # ------------------------------------------------------------------------------------------ compiled rules

    def rules_fingerprint(self) -> str:
        """What the compiled shape rules depend on, cheaply: torch's version, the schema, the declared dtypes and
        ranges, and the source files of the fake kernel (and of ``outputs``/``size_upper``). A library build is
        keyed on it, so that a process loading a built library derives nothing; a change to a helper the fake kernel
        imports from another file is not seen (touch the fake kernel's file, or build with force=True)."""
        import hashlib
        import inspect

        digest = hashlib.sha256(f"{torch.__version__}|{self.qualname}|{self.schema}|{self.size_opt}".encode())
        for spec in self.spec.inputs:
            digest.update(f"{spec.name}:{spec.dtypes}:{spec.same_dtype_as}".encode())
        for spec in self.spec.fields:
            digest.update(repr(spec).encode())
        for function in (_derive.fake_kernel(self.overload), self.fake_override, self.size_upper):
            try:
                path = inspect.getsourcefile(inspect.unwrap(function)) if function is not None else None
            except TypeError:  # a builtin
                path = None
            digest.update(f"{function!r}".split(" at ")[0].encode())
            if path:
                digest.update(Path(path).read_bytes())
        return digest.hexdigest()[:16]

    @functools.cached_property
    def compiled_programs(self) -> tuple[tuple[int, ...], ...]:
        """The op's shape rules as compiled into its plugin library: one shape program per combination of input
        ranks that the fake kernel accepts (ranks 0 to ``MAX_RANK``), with integer arguments as ``ARG`` leaves, so
        that ``createPlugin`` needs the op's scalar arguments only. Derived when the library's tables are generated;
        raises DeclarationError for a fake kernel whose shapes cannot hold for every argument value."""
        return ShapeRuleCompiler(self).programs()


def _replace(spec: OpSpec, **changes: Any) -> OpSpec:
    import dataclasses

    return dataclasses.replace(spec, **changes)


def _is_symbolic(value: Any) -> bool:
    return isinstance(value, (torch.fx.Node, torch.SymInt)) or type(value).__name__ == "ITensor"


def _scalar_value(value: Any) -> Any:
    if isinstance(value, torch.fx.Node):
        value = value.meta.get("val")
    if isinstance(value, torch.SymInt):
        return _derive._hint(value)
    return value


_TRT_TYPE_NAMES = {
    "FLOAT": torch.float32,
    "HALF": torch.float16,
    "BF16": torch.bfloat16,
    "INT8": torch.int8,
    "INT32": torch.int32,
    "INT64": torch.int64,
    "BOOL": torch.bool,
    "UINT8": torch.uint8,
    "FP8": torch.float8_e4m3fn,
}


def tensor_meta(value: Any, what: str) -> _derive.TensorMeta:
    """Sizes (None where unknown) and dtype of a tensor, a FakeTensor, an FX node or a TensorRT ITensor."""
    if isinstance(value, torch.fx.Node):
        value = value.meta.get("val", value.meta.get("example_value"))  # the latter in Dynamo's graphs
    if isinstance(value, torch.Tensor) or isinstance(getattr(value, "dtype", None), torch.dtype):
        # A tensor, a FakeTensor, or a shape-and-dtype stand-in (e.g. testing.harness.TensorArg).
        return _derive.TensorMeta(tuple(_derive._hint(d) for d in value.shape), value.dtype)
    if type(value).__name__ == "ITensor":
        dtype = _TRT_TYPE_NAMES.get(getattr(value.dtype, "name", str(value.dtype)).upper())
        if dtype is None:
            raise SpecError(f"{what} has TensorRT type {value.dtype}, which has no torch dtype here")
        return _derive.TensorMeta(tuple(None if int(d) < 0 else int(d) for d in value.shape), dtype)
    raise SpecError(f"{what} must be a tensor (with shape metadata), got {type(value).__name__}")

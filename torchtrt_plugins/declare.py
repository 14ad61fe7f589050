"""Bring your own op: a TensorRT plugin for any torch.library op, declared from the user's own package.

::

    import torchtrt_plugins as ttp

    LIBRARY = ttp.sdk.PluginLibrary("myops", sources=[...])       # the user's launchers (.cu)
    ttp.declare(
        "myops::scaled_add",
        library=LIBRARY,
        launcher="myops::scaledAdd",                              # tactic 0 (default); more via tactics={1: ...}
        ranges={"alpha": ttp.Range(min=-1e4, max=1e4)},
        dtypes={"x": FLOATS, "y": FLOATS},
        same_dtype={"y": "x"},
    )

The op's torch schema gives the tensor inputs and the scalar arguments. Scalars become plugin fields (``float`` ->
FLOAT64, ``int`` and ``SymInt`` -> INT64, ``bool`` -> INT32 0/1) whose valid ranges, declared once here, drive the
eager checks, the converter's validator and the C++ ``createPlugin``; a ``SymInt`` that is symbolic in the graph is
passed as a shape input instead. Output dtypes and shapes come from the op's registered fake kernel, run
symbolically for each call (``_derive``). The converter is registered with Torch-TensorRT when it imports, the
library is loaded into TensorRT by ``load_plugins``, and with ``library`` the eager CUDA kernel of the op is the same
launcher the plugin calls.

A data-dependent op's eager kernel allocates its outputs at their upper bounds and reads the sizes back after the
launch; with ``sizes_first=True`` its launcher instead takes two phases (``LaunchArgs::phase`` in ``ttp_sdk.h``:
sizes, then outputs at their exact shapes), so eager needs no upper-bound memory. The plugin always calls it once.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from . import _derive
from . import spec as spec_mod
from .spec import FieldSpec, OpEntry, OpSpec, SpecError, Tactic, TensorSpec, Tolerance

#: What a tensor input accepts when the declaration does not say (bool: cast to int32 for the plugin).
DEFAULT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int32, torch.int64)

#: Schema scalar type -> PluginFieldType of its field.
SCALAR_FIELD_TYPES = {"float": "FLOAT64", "int": "INT64", "SymInt": "INT64", "bool": "INT32"}

#: The field value of a SymInt argument that reaches the plugin as a shape input.
SHAPE_INPUT_SENTINEL = -(2**63)


class DeclarationError(SpecError):
    """A declaration that disagrees with the op's schema, or an op we cannot take. Names op and argument."""


@dataclass(frozen=True)
class Range:
    """The valid values of a scalar argument, declared once."""

    min: float | None = None
    max: float | None = None
    min_inclusive: bool = True
    doc: str = ""


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
        launcher: str | None = None,
        tactics: Mapping[int, str] | None = None,
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
        doc: str = "",
    ):
        self.qualname = _qualname(op)
        self.overload = _overload(self.qualname)
        self.schema = self.overload._schema
        namespace, name = self.qualname.split("::", 1)
        self.library = library
        self.fake_override = outputs
        self.size_upper = size_upper
        self.size_opt = float(size_opt)
        ranges, dtypes, same_dtype = dict(ranges or {}), dict(dtypes or {}), dict(same_dtype or {})
        if not 0.0 < self.size_opt <= 1.0:
            raise DeclarationError(f"{self.qualname}: size_opt must be in (0, 1], got {size_opt!r}")
        self._types = _schema_types(self.schema)
        self._check_schema()
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
        for key, other in same_dtype.items():
            order = [a.name for a in self.tensor_args]
            if other not in tensor_names or order.index(other) >= order.index(key):
                raise DeclarationError(
                    f"{self.qualname}: same_dtype['{key}'] must name an earlier tensor argument, got {other!r}"
                )
        launchers = {0: launcher} if launcher else {}
        for value, symbol in (tactics or {}).items():
            if not isinstance(value, int) or value <= 0:
                raise DeclarationError(f"{self.qualname}: tactic values must be ints > 0, got {value!r}")
            launchers[value] = symbol
        if launchers and 0 not in launchers:
            launchers = {0: launchers[min(launchers)], **launchers}
        if library is not None and not launchers:
            raise DeclarationError(f"{self.qualname}: a declaration with a library needs launcher= (a C++ symbol)")
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
            doc=doc,
            op_namespace=namespace,
            declaration=self,
        )
        self._probing = example_inputs is not None
        if example_inputs is not None:
            derived = self.derive_for_values(*example_inputs)
            self._probing = False
            if data_dependent is None:
                self.spec = _replace(self.spec, requires_output_allocator=derived.num_size_tensors > 0)
            self.spec = _replace(self.spec, hidden_outputs=derived.num_size_tensors)
        self.entry = OpEntry(
            self.spec,
            reference=reference or self.overload,
            fake=self.overload,
            check_args=self.check_args,
            # Our own library's ops are our catalogue (spec.all_ops), loaded with it (native.plugin_library_path).
            library=library.plugin_path if library is not None and not getattr(library, "ours", False) else None,
        )

    # ------------------------------------------------------------------------------------------ schema

    def _check_schema(self) -> None:
        for argument in self.schema.arguments:
            type_name = self._types[argument.name]
            if argument.alias_info is not None and argument.alias_info.is_write:
                raise DeclarationError(
                    f"{self.qualname}: argument '{argument.name}' is mutated ({self.schema}); declared ops must be "
                    "functional"
                )
            if type_name != "Tensor" and type_name not in SCALAR_FIELD_TYPES:
                raise DeclarationError(
                    f"{self.qualname}: argument '{argument.name}' has type {type_name}, which a plugin cannot take "
                    f"(expected Tensor, {', '.join(SCALAR_FIELD_TYPES)})"
                )
        if not self.schema.returns:
            raise DeclarationError(f"{self.qualname}: returns nothing; a plugin op must return tensors")
        for i, ret in enumerate(self.schema.returns):
            if str(ret.type) != "Tensor":
                raise DeclarationError(
                    f"{self.qualname}: return {i} has type {ret.type}, expected Tensor (or a tuple of Tensors)"
                )

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
        from .converters._factory import bind

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
            (self.fake_override or self.overload)(*call)

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


def declare(op: Any, **options: Any) -> Declaration:
    """Declare a TensorRT plugin for the torch op ``op`` ("ns::name" or the op); see :class:`Declaration`.

    Registers the op: its converter with Torch-TensorRT when that imports (and then its library with TensorRT's
    registry, as ``import torchtrt_plugins`` does for ours); its library for ``load_plugins``; with a ``library``,
    the eager CUDA kernel through the op's launcher. Returns the declaration.
    """
    eager_cuda = options.pop("eager_cuda", True)
    declaration = Declaration(op, **options)
    spec_mod.register(declaration.entry)
    if declaration.library is not None:
        declaration.library.add(declaration)
        if eager_cuda:
            from . import sdk

            sdk.register_eager_kernel(declaration)
    if getattr(declaration.library, "ours", False):
        return declaration  # our catalogue: `import torchtrt_plugins` registers its converters and loads the library
    from . import converters, native

    if converters.register_entry(declaration.entry) and declaration.library is not None:
        native.load_plugins_into_tensorrt()  # as at `import torchtrt_plugins`, for engines saved with this op
    return declaration

"""Our own ops' contracts for the C++ side, generated from their declarations (``torchtrt_plugins/ops/*.py``).

- The ops declared with :func:`torchtrt_plugins.declare` on our library (``rms_norm``, ``masked_rows``): the generic
  plugin's op tables and the launcher table (``csrc/sdk/generated/``), which CMake compiles into our plugin and
  launcher libraries, exactly what :class:`torchtrt_plugins.sdk.PluginLibrary` generates for a user's library at
  build time, generated here ahead of time so the wheel's prebuilt libraries carry them.
- The hand-written plugin (``pad_to``): each ``OpSpec`` (plugin name and version, tensor inputs with their dtypes,
  the scalar arguments as fields, the tactics), read by its torch adapter (``csrc/torch``) and plugin
  (``csrc/plugins``) from the generated header ``csrc/contracts/ops.h`` instead of restating it.

``tests/cpu/test_contracts.py`` fails when a generated file is stale.

    python -m torchtrt_plugins.contracts          # rewrite the generated files
    python -m torchtrt_plugins.contracts --check  # exit 1 when one is stale
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

from . import spec as spec_mod
from .spec import FieldSpec, OpSpec, TensorSpec

#: torch dtype -> ttp::DType enumerator (csrc/kernels/common.h).
KERNEL_DTYPES = {
    torch.float32: "kFLOAT32",
    torch.float16: "kFLOAT16",
    torch.bfloat16: "kBFLOAT16",
    torch.int8: "kINT8",
    torch.int32: "kINT32",
    torch.int64: "kINT64",
    torch.bool: "kBOOL",
}

#: The field types our C++ contracts carry (ttp::contract::FieldType).
FIELD_TYPES = ("FLOAT32", "FLOAT64", "INT32", "INT64")


def header_path() -> Path:
    from . import _build

    return _build.source_dir() / "csrc" / "contracts" / "ops.h"


def tables_dir() -> Path:
    from . import _build

    return _build.source_dir() / "csrc" / "sdk" / "generated"


def _number(value: float | None, default: str) -> str:
    if value is None:
        return default
    if math.isinf(value):
        return "kINF" if value > 0 else "-kINF"
    return repr(float(value))


def _string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _mask(dtypes: tuple[torch.dtype, ...], what: str) -> str:
    try:
        return " | ".join(f"bit(DType::{KERNEL_DTYPES[d]})" for d in dtypes) or "0U"
    except KeyError as error:
        raise spec_mod.SpecError(f"{what}: dtype {error.args[0]} has no kernel DType") from None


def _dtype_names(dtypes: tuple[torch.dtype, ...]) -> str:
    names = [str(d).replace("torch.", "") for d in dtypes]
    return names[0] if len(names) == 1 else "in {" + ", ".join(names) + "}"


def _input(spec: OpSpec, tensor: TensorSpec) -> str:
    names = [t.name for t in spec.inputs]
    same = names.index(tensor.same_dtype_as) if tensor.same_dtype_as else -1
    plugin = (tensor.plugin_dtype,) if tensor.plugin_dtype is not None else tensor.dtypes
    what = f"{spec.label}: input '{tensor.name}'"
    return (
        f"Input{{{_string(tensor.name)}, {_mask(tensor.dtypes, what)}, {_mask(plugin, what)}, {same}, "
        f"{_string(_dtype_names(tensor.dtypes))}}}"
    )


def _field(spec: OpSpec, field: FieldSpec) -> str:
    if field.type not in FIELD_TYPES:
        raise spec_mod.SpecError(
            f"{spec.label}: field '{field.name}' has type {field.type}, expected one of {FIELD_TYPES}"
        )
    sentinel = _number(field.shape_input_sentinel, "kNAN") if field.shape_input else "kNAN"
    return (
        f"Field{{{_string(field.name)}, FieldType::k{field.type}, {str(field.required).lower()}, "
        f"{_number(field.default, '0.0')}, {_number(field.min, '-kINF')}, {_number(field.max, 'kINF')}, "
        f"{str(field.min_inclusive).lower()}, {sentinel}, {_string(field.expectation())}}}"
    )


def _array(kind: str, items: list[str], one_line: bool = False) -> str:
    if not items:
        return f"std::array<{kind}, 0>{{}}"
    if one_line:
        return f"std::array<{kind}, {len(items)}>{{{{{', '.join(items)}}}}}"
    body = ",\n        ".join(items)
    return f"std::array<{kind}, {len(items)}>{{{{\n        {body},\n    }}}}"


def _names(tensors: tuple[TensorSpec, ...]) -> str:
    return _array("char const*", [_string(t.name) for t in tensors], one_line=True)


def _op(spec: OpSpec) -> str:
    return "\n".join(
        [
            f"namespace {spec.name}",
            "{",
            f"inline constexpr char const *kOP = {_string(spec.label)}, *kPLUGIN_NAME = {_string(spec.plugin_name)}, "
            f"*kPLUGIN_VERSION = {_string(spec.plugin_version)}, "
            f"*kPLUGIN_NAMESPACE = {_string(spec.plugin_namespace)};",
            f"inline constexpr auto kINPUT_NAMES = {_names(spec.inputs)};",
            f"inline constexpr auto kINPUTS = {_array('Input', [_input(spec, t) for t in spec.inputs])};",
            f"inline constexpr auto kOUTPUTS = {_names(spec.outputs)};",
            f"inline constexpr auto kFIELDS = {_array('Field', [_field(spec, f) for f in spec.fields])};",
            f"inline constexpr auto kTACTICS = {_array('int32_t', [str(t.value) for t in spec.tactics], True)};",
            f"}} // namespace {spec.name}",
        ]
    )


def generate() -> str:
    """The header's text for our catalogue (every op in our own plugin library), by op name."""
    from . import ops  # noqa: F401 - registers our ops

    specs = sorted((e.spec for e in spec_mod.all_ops() if e.spec.declaration is None), key=lambda s: s.name)
    parts = [
        "// Generated by `python -m torchtrt_plugins.contracts` from the op declarations in torchtrt_plugins/ops/;",
        "// do not edit. Each op's OpSpec is its whole contract; the torch adapters and plugins read it from here.",
        "// clang-format off",
        "#pragma once",
        "",
        '#include "contracts/contract.h"',
        "",
        "namespace ttp::contract",
        "{",
        "",
        *(_op(spec) + "\n" for spec in specs),
        "} // namespace ttp::contract",
        "// clang-format on",
        "",
    ]
    return "\n".join(parts)


def generate_tables() -> dict[str, str]:
    """The generic plugin's tables of our declared ops, by file name under :func:`tables_dir`."""
    from . import sdk
    from .ops import LIBRARY

    declarations = sorted(LIBRARY.declarations, key=lambda d: d.qualname)
    header = "// Generated by `python -m torchtrt_plugins.contracts` from torchtrt_plugins/ops/; do not edit.\n"
    return {name: header + "// clang-format off\n" + text for name, text in sdk.generated_sources(declarations).items()}


def generated_files() -> dict[Path, str]:
    """Every generated file and its text."""
    files = {header_path(): generate()}
    files.update({tables_dir() / name: text for name, text in generate_tables().items()})
    return files


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    stale = 0
    for path, text in generated_files().items():
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        if "--check" in argv:
            print(f"{path} is stale: run python -m torchtrt_plugins.contracts", file=sys.stderr)
            stale = 1
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    return stale


if __name__ == "__main__":
    raise SystemExit(main())

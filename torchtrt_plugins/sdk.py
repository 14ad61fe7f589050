"""The SDK a user package builds its own plugin library with: headers from the installed package and a build helper.

A :class:`PluginLibrary` is a user package's set of torch-free kernel launchers (``.cu`` files; the launcher ABI is
``csrc/sdk/ttp_sdk.h``: ``cudaError_t launcher(ttp::sdk::LaunchArgs const&)``) plus the ops declared on it with
:func:`torchtrt_plugins.declare`. :meth:`PluginLibrary.build` generates the data tables of the declared ops and
compiles, with nvcc, two products into the cache:

- ``lib<name>_plugins.so``: the TensorRT plugin library. One generic IPluginV3 (``csrc/sdk/declared_plugin.cpp``)
  per declared op, over our shared plugin machinery (``csrc/plugins/plugin_common``). Links the CUDA runtime only
  and exports only ``getCreators`` and ``setLoggerFinder``;
- ``lib<name>_launchers.so``: the same launchers behind C entry points, which the op's eager CUDA kernel
  (registered by ``declare``) calls, so eager and engine run the same kernel.

:meth:`PluginLibrary.prebuilt` takes both libraries ready-made instead (our own ops: CMake builds them from tables
generated ahead of time, and the wheel carries them), so nothing is compiled at run time.

The build recipe (SDK sources, flags, exports) is data, ``csrc/sdk/sdk_build.json`` (:func:`build_recipe`), which the
CMake package of the SDK (``csrc/sdk/cmake``, ``torchtrt_plugins_add_library``) and our own ``CMakeLists.txt`` read too.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import math
import os
import re
import subprocess
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from . import _build, _derive, dtypes, kernels_aot
from .spec import SpecError

__all__ = [
    "LibraryBuild",
    "PluginLibrary",
    "PreparedLaunch",
    "build_recipe",
    "cmake_dir",
    "generated_sources",
    "include_dir",
    "launch",
    "plugin_inputs",
    "register_eager_kernel",
]

_SYMBOL = re.compile(r"^(?:[A-Za-z_]\w*::)*[A-Za-z_]\w*$")
#: torch dtype -> ttp::DType (csrc/kernels/common.h).
KERNEL_DTYPES = dtypes.KERNEL_CODES
MAX_DIMS = 8


def include_dir() -> Path:
    """The SDK headers (``sdk/ttp_sdk.h``, ``sdk/declared_plugin.h``, ``plugins/plugin_common.h``): add with -I."""
    return _build.source_dir() / "csrc"


def cmake_dir() -> Path:
    """The SDK's CMake package (``torchtrt_pluginsConfig.cmake``): ``-Dtorchtrt_plugins_DIR=`` or CMAKE_PREFIX_PATH."""
    return include_dir() / "sdk" / "cmake"


def build_recipe() -> dict[str, Any]:
    """How a declared-op library is built (``csrc/sdk/sdk_build.json``: SDK sources relative to ``csrc/``, flags,
    version script, libraries), shared with the CMake package so that both build the same library."""
    return json.loads((include_dir() / "sdk" / "sdk_build.json").read_text())


def _recipe_files(recipe: dict[str, Any]) -> list[Path]:
    names = [
        *recipe["headers"],
        *recipe["plugin_sources"],
        *recipe["launcher_sources"],
        recipe["version_script"],
        recipe["launcher_version_script"],
    ]
    return [include_dir() / name for name in [*names, "sdk/sdk_build.json"]]


@dataclass
class LibraryBuild:
    directory: Path
    plugins: Path
    launchers: Path
    built_now: bool


def _cxx_symbol(declaration: Any, symbol: str, what: str) -> str:
    if not _SYMBOL.match(symbol):
        raise SpecError(f"{declaration.label}: {what} {symbol!r} is not a C++ function name (e.g. 'myops::scaledAdd')")
    return symbol


def _prototype(symbol: str, returns: str) -> str:
    namespace, _, name = symbol.rpartition("::")
    line = f"{returns} {name}(::ttp::sdk::LaunchArgs const& args);"
    return f"namespace {namespace} {{ {line} }}" if namespace else line


def _number(value: float) -> str:
    value = float(value)
    if value != value:
        return "kNaN"
    if value in (float("inf"), float("-inf")):
        return "kInf" if value > 0 else "-kInf"
    return repr(value)


def _dtype_mask(dtypes: Sequence[torch.dtype]) -> int:
    mask = 0
    for dtype in dtypes:
        mask |= 1 << _derive.TRT_DTYPE_CODES[torch.int32 if dtype == torch.bool else dtype]
    return mask


def _prototypes(declarations: Sequence[Any]) -> list[str]:
    lines = []
    for d in declarations:
        lines += [_prototype(_cxx_symbol(d, s, "launcher"), "cudaError_t") for s in d.launchers.values()]
        if d.workspace:
            lines.append(_prototype(_cxx_symbol(d, d.workspace, "workspace"), "size_t"))
        for resource in getattr(d, "resources", {}).values():
            lines.append(_prototype(_cxx_symbol(d, resource.size, "resource size"), "size_t"))
            lines.append(_prototype(_cxx_symbol(d, resource.init, "resource init"), "cudaError_t"))
    return sorted(set(lines))


def _resource_table(i: int, d: Any) -> tuple[list[str], str]:
    """The ResourceDecl rows of one op (``sdk/resources.h``) and the table's name (``nullptr`` when it has none)."""
    resources = getattr(d, "resources", {})
    if not resources:
        return [], "nullptr"
    scalars = [a.name for a in d.scalar_args]
    lines, rows = [], []
    for k, (name, resource) in enumerate(resources.items()):
        keys = ", ".join(str(scalars.index(key)) for key in resource.key_fields)
        lines.append(f"int32_t const kResourceKeys{i}_{k}[] = {{{keys}}};")
        rows.append(
            f"{{{_c_string(name)}, kResourceKeys{i}_{k}, {len(resource.key_fields)}, &{resource.size}, "
            f"&{resource.init}, {_c_string(resource.init)}}}"
        )
    lines.append(f"::ttp::sdk::ResourceDecl const kResources{i}[] = {{{', '.join(rows)}}};")
    return lines, f"kResources{i}"


def _compiled_programs(declaration: Any) -> list[int]:
    """The op's shape programs as the table holds them: each preceded by its token count."""
    return [token for program in declaration.compiled_programs for token in (len(program), *program)]


def generate_op_tables(declarations: Sequence[Any], programs: Callable[[Any], list[int]] = _compiled_programs) -> str:
    """C++ source: the OpDecl table and creator registration of each declared op. ``programs`` gives an op's
    compiled shape programs (a stand-in keys a build without deriving them)."""
    out = [
        "// Generated by torchtrt_plugins.sdk from the op declarations; do not edit.",
        '#include "sdk/declared_plugin.h"',
        "",
        "#include <limits>",
        "",
        *_prototypes(declarations),
        "",
        "namespace",
        "{",
        "constexpr double kInf = std::numeric_limits<double>::infinity();",
        "constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();",
        "using FT = nvinfer1::PluginFieldType;",
    ]
    for i, d in enumerate(declarations):
        spec = d.spec
        order = [t.name for t in spec.inputs]
        inputs = ", ".join(
            f'{{"{t.name}", {_dtype_mask(t.dtypes)}u, {order.index(t.same_dtype_as) if t.same_dtype_as else -1}}}'
            for t in spec.inputs
        )
        out.append(f"::ttp::sdk::InputDecl const kInputs{i}[] = {{{inputs}}};")
        names = ", ".join(f'"{o.name}"' for o in spec.outputs)
        out.append(f"char const* const kOutputs{i}[] = {{{names}}};")
        fields = []
        for f in spec.fields:
            default = 0.0 if f.default is None else float(f.default)
            low = -float("inf") if f.min is None else f.min
            high = float("inf") if f.max is None else f.max
            sentinel = _number(f.shape_input_sentinel) if f.shape_input else "kNaN"
            fields.append(
                f'{{"{f.name}", FT::k{f.type}, {str(f.required).lower()}, {_number(default)}, {_number(low)}, '
                f"{_number(high)}, {str(f.min_inclusive).lower()}, {sentinel}}}"
            )
        if fields:
            out.append(f"::ttp::plugin::FieldDesc const kFields{i}[] = {{{', '.join(fields)}}};")
        out.append(_tactics_table(f"kTactics{i}", d))
        tokens = programs(d)
        out.append(f"int64_t const kPrograms{i}[] = {{{', '.join(map(str, tokens))}}};")
        aliased = spec.aliased_inputs
        if aliased:
            out.append(f"int32_t const kAliased{i}[] = {{{', '.join(map(str, aliased))}}};")
        weights = [order.index(name) for name in spec.weight_fields]
        if weights:
            out.append(f"int32_t const kWeights{i}[] = {{{', '.join(map(str, weights))}}};")
        resource_lines, resource_table = _resource_table(i, d)
        out += resource_lines
        out.append(
            f'::ttp::sdk::OpDecl const kOp{i}{{"{d.qualname}", "{spec.plugin_name}", "{spec.plugin_version}", '
            f'"{spec.plugin_namespace}", kInputs{i}, {len(spec.inputs)}, kOutputs{i}, {len(spec.outputs)}, '
            f"{f'kFields{i}' if fields else 'nullptr'}, {len(fields)}, kTactics{i}, {len(d.launchers)}, "
            f"{'&' + d.workspace if d.workspace else 'nullptr'}, kPrograms{i}, {len(tokens)}, "
            f"{f'kAliased{i}' if aliased else 'nullptr'}, {len(aliased)}, "
            f"{f'kWeights{i}' if weights else 'nullptr'}, {len(weights)}, {resource_table}, "
            f"{len(getattr(d, 'resources', {}))}}};"
        )
        out.append(f"::ttp::sdk::DeclaredOpRegistration const kRegistration{i}{{kOp{i}}};")
    out += ["} // namespace", ""]
    return "\n".join(out)


def generated_sources(declarations: Sequence[Any], archs: str | None = None) -> dict[str, str]:
    """The C++ files generated from a library's declarations, by file name: its op tables and its launcher table,
    each followed by the launchers of its Python kernels with their cubins for ``archs`` (CMake syntax; default
    ``_build.cuda_archs()``), compiled now (kernels_aot)."""
    recipe = build_recipe()
    kernels = kernels_aot.generate_source(declarations, archs or _build.cuda_archs())
    return {
        recipe["generated_plugin_source"]: generate_op_tables(declarations) + kernels,
        recipe["generated_launcher_source"]: generate_launcher_table(declarations) + kernels,
    }


def _c_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid C string literal for the ASCII text we write


_SCALAR_KINDS = {"float": 0, "int": 1, "SymInt": 1, "bool": 2}


def _tactics_table(name: str, d: Any) -> str:
    """The op's launchers as a ``TacticDecl`` array (``csrc/sdk/op_table.h``), tactic 0 (the default) first."""
    rows = ", ".join(f'{{{v}, "{s}", &{s}}}' for v, s in sorted(d.launchers.items()))
    return f"::ttp::sdk::TacticDecl const {name}[] = {{{rows}}};"


def _eager_op(i: int, d: Any, tokens: Sequence[int]) -> list[str]:
    """The eager kernel's table of one op (``csrc/sdk/op_table.h``): argument order, checks and launcher."""
    scalars = [a.name for a in d.scalar_args]
    tensors = [a.name for a in d.tensor_args]
    arguments = [
        tensors.index(a.name) if a.name in tensors else -(scalars.index(a.name) + 1) for a in d.schema.arguments
    ]
    order = [t.name for t in d.spec.inputs]
    inputs = []
    for t in d.spec.inputs:
        mask = sum(1 << KERNEL_DTYPES[dtype] for dtype in t.dtypes)
        names = ", ".join(str(dtype).replace("torch.", "") for dtype in t.dtypes)
        same = order.index(t.same_dtype_as) if t.same_dtype_as else -1
        inputs.append(f"{{{_c_string(t.name)}, {mask}u, {same}, {_c_string(names)}}}")
    rows = []
    for f in d.spec.fields:
        low = -float("inf") if f.min is None else f.min
        high = float("inf") if f.max is None else f.max
        kind = _SCALAR_KINDS[d._types[f.arg]]
        rows.append(
            f"{{{_c_string(f.arg)}, ::ttp::sdk::ScalarKind({kind}), {_number(low)}, {_number(high)}, "
            f"{str(f.min_inclusive).lower()}, {_c_string(f.expectation())}}}"
        )
    out = [
        _tactics_table(f"kEagerTactics{i}", d),
        f"int32_t const kArguments{i}[] = {{{', '.join(map(str, arguments)) or 0}}};",
        f"::ttp::sdk::EagerInput const kEagerInputs{i}[] = {{{', '.join(inputs)}}};",
    ]
    if rows:
        out.append(f"::ttp::sdk::EagerScalar const kScalars{i}[] = {{{', '.join(rows)}}};")
    out.append(f"int64_t const kPrograms{i}[] = {{{', '.join(map(str, tokens))}}};")
    aliased = d.spec.aliased_inputs
    if aliased:
        out.append(f"int32_t const kEagerAliased{i}[] = {{{', '.join(map(str, aliased))}}};")
    resource_lines, resource_table = _resource_table(i, d)
    out += resource_lines
    out.append(
        f"::ttp::sdk::EagerOp const kEagerOp{i}{{::ttp::sdk::kEAGER_TABLE_VERSION, {_c_string(d.qualname)}, "
        f"{_c_string(d.label)}, kArguments{i}, {len(arguments)}, kEagerInputs{i}, {len(inputs)}, "
        f"{len(d.spec.outputs)}, {f'kScalars{i}' if rows else 'nullptr'}, {len(rows)}, kEagerTactics{i}, "
        f"{len(d.launchers)}, {'&' + d.workspace if d.workspace else 'nullptr'}, {int(d.sizes_first)}, "
        f"kPrograms{i}, {len(tokens)}, {f'kEagerAliased{i}' if aliased else 'nullptr'}, "
        f"{len(aliased)}, {resource_table}, {len(getattr(d, 'resources', {}))}, &::ttp::sdk::eagerResourceTables}};"
    )
    return out


def generate_launcher_table(
    declarations: Sequence[Any], programs: Callable[[Any], list[int]] = _compiled_programs
) -> str:
    """C++ source: every (op, tactic) -> launcher row, for the eager entry points (csrc/sdk/launchers.cpp), and each
    op's eager table (csrc/sdk/op_table.h) for the generic eager kernel (csrc/sdk/eager.cpp)."""
    rows = []
    for d in declarations:
        workspace = f"&{d.workspace}" if d.workspace else "nullptr"
        rows += [f'{{"{d.qualname}", {v}, &{s}, {workspace}}}' for v, s in d.launchers.items()]
    eager = []
    for i, d in enumerate(declarations):
        eager += _eager_op(i, d, programs(d))
    pointers = ", ".join(f"&kEagerOp{i}" for i in range(len(declarations)))
    return "\n".join(
        [
            "// Generated by torchtrt_plugins.sdk from the op declarations; do not edit.",
            '#include "sdk/op_table.h"',
            "",
            "#include <limits>",
            "",
            *_prototypes(declarations),
            "",
            "namespace",
            "{",
            "constexpr double kInf = std::numeric_limits<double>::infinity();",
            *eager,
            "} // namespace",
            "",
            "namespace ttp::sdk",
            "{",
            "LauncherEntry const* launcherTable(int32_t& count)",
            "{",
            f"    static LauncherEntry const table[] = {{{', '.join(rows)}}};",
            "    count = static_cast<int32_t>(sizeof(table) / sizeof(table[0]));",
            "    return table;",
            "}",
            "",
            "EagerOp const* const* eagerOpTable(int32_t& count)",
            "{",
            f"    static EagerOp const* const table[] = {{{pointers}}};",
            "    count = static_cast<int32_t>(sizeof(table) / sizeof(table[0]));",
            "    return table;",
            "}",
            "} // namespace ttp::sdk",
            "",
        ]
    )


class PluginLibrary:
    """A user package's plugin library: its launcher sources and the ops declared on it.

    :meth:`prebuilt` makes one whose two libraries already exist (built by CMake or shipped in a wheel, with tables
    generated ahead of time by :func:`generate_op_tables` / :func:`generate_launcher_table`): it never runs nvcc.
    """

    def __init__(
        self,
        name: str,
        sources: Sequence[str | Path],
        include_dirs: Sequence[str | Path] = (),
        cuda_flags: Sequence[str] = (),
    ):
        if not re.match(r"^[A-Za-z_]\w*$", name):
            raise SpecError(f"PluginLibrary: name must be an identifier, got {name!r}")
        self.name = name
        self.sources = [Path(s).resolve() for s in sources]
        missing = [str(s) for s in self.sources if not s.is_file()]
        if missing:
            raise SpecError(f"PluginLibrary {name}: sources not found: {missing}")
        self.include_dirs = [Path(d).resolve() for d in include_dirs]
        self.cuda_flags = list(cuda_flags)
        self.declarations: list[Any] = []
        self._lock = threading.Lock()
        self._build: LibraryBuild | None = None
        self._launchers: ctypes.CDLL | None = None
        self._prebuilt: tuple[Callable[[], Path], Callable[[], Path]] | None = None
        #: True for torchtrt_plugins' own library (libtorchtrt_plugins_v3.so), whose ops are our catalogue.
        self.ours = False

    @classmethod
    def prebuilt(
        cls, name: str, plugins: Callable[[], Path], launchers: Callable[[], Path], *, ours: bool = False
    ) -> PluginLibrary:
        """A library whose plugin and launcher libraries exist already: ``plugins()`` and ``launchers()`` give their
        paths (called on first use). Its tables must have been generated from the same declarations."""
        library = cls(name, sources=())
        library._prebuilt = (plugins, launchers)
        library.ours = ours
        return library

    def add(self, declaration: Any) -> None:
        self.declarations.append(declaration)
        if self._prebuilt is None:
            self._build = None

    def plugin_path(self) -> Path:
        """The TensorRT plugin library (built on first use)."""
        return self.build().plugins

    def launcher_path(self) -> Path:
        return self.build().launchers

    def launchers(self) -> ctypes.CDLL:
        with self._lock:
            if self._launchers is None:
                lib = ctypes.CDLL(str(self.launcher_path()))
                lib.ttp_sdk_launch.restype = ctypes.c_int32
                lib.ttp_sdk_launch.argtypes = [ctypes.c_char_p, ctypes.c_int32, ctypes.POINTER(_LaunchArgs)]
                lib.ttp_sdk_workspace.restype = ctypes.c_uint64
                lib.ttp_sdk_workspace.argtypes = [ctypes.c_char_p, ctypes.POINTER(_LaunchArgs)]
                lib.ttp_sdk_launcher.restype = ctypes.c_void_p
                lib.ttp_sdk_launcher.argtypes = [ctypes.c_char_p, ctypes.c_int32]
                lib.ttp_sdk_workspace_function.restype = ctypes.c_void_p
                lib.ttp_sdk_workspace_function.argtypes = [ctypes.c_char_p]
                lib.ttp_sdk_last_error.restype = ctypes.c_char_p
                lib.ttp_sdk_last_error.argtypes = []
                if hasattr(lib, "ttp_sdk_resource_tables"):  # libraries built before declare(resources=...) lack it
                    lib.ttp_sdk_resource_tables.restype = ctypes.c_int32
                    lib.ttp_sdk_resource_tables.argtypes = [
                        ctypes.c_char_p,
                        ctypes.POINTER(ctypes.c_double),
                        ctypes.POINTER(ctypes.c_void_p),
                    ]
                self._launchers = lib
            return self._launchers

    def _inputs_hash(self, include: Path, nvcc: str, archs: str, generated: Sequence[str]) -> str:
        # NVCC_CCBIN picks nvcc's host compiler (the manylinux_2_28 toolchain for a distributable build).
        host = os.environ.get("NVCC_CCBIN", "")
        digest = hashlib.sha256(f"{include}|{nvcc}|{archs}|{self.cuda_flags}|{host}".encode())
        for text in generated:
            digest.update(text.encode())
        headers = {p for d in [s.parent for s in self.sources] + self.include_dirs for p in d.glob("*.h*")}
        for path in [*_recipe_files(build_recipe()), *self.sources, *sorted(headers)]:
            digest.update(str(path).encode())
            digest.update(path.read_bytes())
        return digest.hexdigest()[:16]

    def build(self, force: bool = False) -> LibraryBuild:
        """Generate the tables and compile both libraries (cached). Raises ``_build.BuildError`` with the reason."""
        if self._build is not None and not force:
            return self._build
        if self._prebuilt is not None:
            plugins, launchers = (Path(path()) for path in self._prebuilt)
            self._build = LibraryBuild(plugins.parent, plugins, launchers, built_now=False)
            return self._build
        if not self.declarations:
            raise SpecError(f"PluginLibrary {self.name}: no op is declared on it (torchtrt_plugins.declare)")
        missing = _build.sdk_build_prerequisites()
        if missing:
            raise _build.BuildError(f"cannot build plugin library {self.name}: " + "; ".join(missing))
        include, nvcc = _build.tensorrt_include_dir(), _build.nvcc_path()
        archs = _build.cuda_archs()
        # Keyed on the rules' fingerprints: deriving the shape programs takes seconds, and only a build needs them.
        key = [
            generate_op_tables(self.declarations, programs=lambda d: [int(d.rules_fingerprint(), 16)]),
            generate_launcher_table(self.declarations, programs=lambda d: [int(d.rules_fingerprint(), 16)]),
            kernels_aot.fingerprint(self.declarations, archs),
        ]
        directory = _build.cache_dir() / f"sdk-{self.name}-{self._inputs_hash(include, nvcc, archs, key)}"
        plugins = directory / f"lib{self.name}_plugins.so"
        launchers = directory / f"lib{self.name}_launchers.so"
        with _build._locked(directory):
            built_now = not (plugins.is_file() and launchers.is_file()) or force
            if built_now:
                _build._message(f"building plugin library {self.name} for sm_{archs} into {directory}")
                directory.mkdir(parents=True, exist_ok=True)
                for file_name, text in generated_sources(self.declarations, archs).items():
                    (directory / file_name).write_text(text)
                self._compile(directory, include, nvcc, archs, plugins, launchers)
        self._build = LibraryBuild(directory, plugins, launchers, built_now)
        return self._build

    def _compile(self, directory: Path, include: Path, nvcc: str, archs: str, plugins: Path, launchers: Path) -> None:
        csrc, recipe = include_dir(), build_recipe()
        gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs.replace(",", ";").split(";") if a]
        flags = [
            f"-std=c++{recipe['cxx_standard']}",
            recipe["optimization"],
            "-Xcompiler=" + ",".join(recipe["host_compiler_flags"]),
            *recipe["cuda_flags"],
            *gencode,
            f"-I{csrc}",
            *[f"-I{d}" for d in self.include_dirs],
            *self.cuda_flags,
        ]
        user = list(self.sources)

        def side(kind: str) -> list[Path]:
            return [*(csrc / s for s in recipe[f"{kind}_sources"]), directory / recipe[f"generated_{kind}_source"]]

        plugin_side, launcher_side = side("plugin"), side("launcher")

        def compile_one(index_source: tuple[int, Path]) -> Path:
            index, source = index_source
            obj = directory / f"{index:02d}_{source.stem}.o"
            extra = [f"-I{include}"] if source in plugin_side else []
            _run([nvcc, *flags, *extra, "-c", str(source), "-o", str(obj)])
            return obj

        sources = user + plugin_side + launcher_side
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            objects = dict(zip(sources, pool.map(compile_one, enumerate(sources)), strict=True))
        link = [nvcc, "-shared", f"-cudart={recipe['cuda_runtime']}", *gencode]

        def linker_flags(script: str) -> str:
            return "-Xlinker=" + ",".join([f"--version-script={csrc / recipe[script]}", *recipe["linker_flags"]])

        try:
            _run(
                [
                    *link,
                    "-o",
                    str(plugins),
                    *[str(objects[s]) for s in user + plugin_side],
                    linker_flags("version_script"),
                    *(f"-l{name}" for name in recipe["plugin_link_libraries"]),
                ]
            )
            _run(
                [
                    *link,
                    "-o",
                    str(launchers),
                    *[str(objects[s]) for s in user + launcher_side],
                    linker_flags("launcher_version_script"),
                ]
            )
        except _build.BuildError as err:
            raise _build.BuildError(_undefined_functions(self, str(err)) + str(err)) from None


_UNDEFINED = re.compile(r"undefined reference to `([\w:]+)\(ttp::sdk::LaunchArgs const&\)'")


def _undefined_functions(library: PluginLibrary, log: str) -> str:
    """What a failed link says in the declarations' terms: a line per declared launcher or workspace function that the
    library's sources do not define, naming its op (empty when the linker names none)."""
    missing = set(_UNDEFINED.findall(log))
    sources = [str(path) for path in library.sources]
    lines = []
    for d in library.declarations:
        functions = {symbol: ("cudaError_t", "launcher") for symbol in d.launchers.values()}
        if d.workspace:
            functions[d.workspace] = ("size_t", "workspace")
        for symbol, (returns, what) in functions.items():
            if symbol in missing:
                namespace, _, name = symbol.rpartition("::")
                lines.append(
                    f"plugin library {library.name}: {d.label}: {what} '{symbol}' is not defined in its sources "
                    f"{sources}; define `{returns} {name}(ttp::sdk::LaunchArgs const&)`"
                    + (f" in namespace {namespace}" if namespace else "")
                    + " there, or correct the name in the declaration\n"
                )
    return "".join(lines)


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise _build.BuildError(f"{' '.join(command)}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")


# ---------------------------------------------------------------------------------------------- eager


class _Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("dims", ctypes.c_int64 * MAX_DIMS),
    ]


class _LaunchArgs(ctypes.Structure):
    _fields_ = [
        ("inputs", ctypes.POINTER(_Tensor)),
        ("nbInputs", ctypes.c_int32),
        ("outputs", ctypes.POINTER(_Tensor)),
        ("nbOutputs", ctypes.c_int32),
        ("scalars", ctypes.POINTER(ctypes.c_double)),
        ("nbScalars", ctypes.c_int32),
        ("workspace", ctypes.c_void_p),
        ("workspaceSize", ctypes.c_size_t),
        ("tactic", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
        ("phase", ctypes.c_int32),
        ("resources", ctypes.POINTER(ctypes.c_void_p)),
        ("nbResources", ctypes.c_int32),
    ]


def _tensor_struct(label: str, tensor: torch.Tensor, shape: Sequence[int] | None = None) -> _Tensor:
    shape = tuple(tensor.shape) if shape is None else tuple(shape)
    if len(shape) > MAX_DIMS:
        raise SpecError(f"{label}: tensors may have at most {MAX_DIMS} dims, got shape {shape}")
    if tensor.dtype not in KERNEL_DTYPES:
        raise SpecError(f"{label}: dtype {tensor.dtype} has no kernel dtype")
    dims = (ctypes.c_int64 * MAX_DIMS)(*shape)
    return _Tensor(tensor.data_ptr() if tensor.numel() else None, KERNEL_DTYPES[tensor.dtype], len(shape), dims)


_LAUNCHER = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(_LaunchArgs))
_WORKSPACE_SIZE = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.POINTER(_LaunchArgs))
#: Where the size tensors start in the scratch buffer of a call (then the workspace, 256-byte aligned).
_SCRATCH_ALIGN = 256


class _Plan:
    """Everything about one call signature (tensor shapes, dtypes and device, scalar values, tactic) that does not
    change from call to call: checked once, then reused. Holds the ctypes structs the launcher reads, so a plan
    belongs to one thread (see :data:`_PLANS`)."""

    def __init__(self, declaration: Any, args: Sequence[Any], tactic: int):
        label = declaration.label
        if tactic not in declaration.launchers:
            raise SpecError(f"{label}: argument 'tactic' must be one of {sorted(declaration.launchers)}, got {tactic}")
        declaration.check_args(*args)
        bound = declaration.bind(*args)
        tensors = [bound[a.name] for a in declaration.tensor_args]
        self.device = _cuda_device(declaration, tensors)
        metas = [_derive.TensorMeta(tuple(t.shape), t.dtype) for t in tensors]
        values = {a.name: bound[a.name] for a in declaration.scalar_args}
        derived = declaration.derive(metas, values, frozenset())
        self.shapes = [tuple(t.shape) for t in tensors]
        out_shapes, uppers = _derive.evaluate(derived.program, self.shapes)
        # Per output, the dims that depend on a data-dependent size: (dim, expression) to evaluate after the launch.
        program = _derive._parse_cached(tuple(derived.program))
        self.sized_dims = [[(d, e) for d, e in enumerate(dims) if _uses_size(e)] for _, dims in program.outputs]
        self.outputs = list(zip(out_shapes, derived.output_dtypes, strict=True))
        self.num_sizes = len(uppers)
        self.tensor_positions = [declaration.argument_index[a.name] for a in declaration.tensor_args]
        inputs = [_tensor_struct(label, t) for t in tensors]
        outputs = [_tensor_struct(label, torch.empty(0, dtype=d), s) for s, d in self.outputs]
        outputs += [_tensor_struct(label, torch.empty(0, dtype=torch.int64), ()) for _ in uppers]
        # A mutated argument's output is the argument itself (the launcher updates it in place).
        self.mutated = [declaration.spec.aliased_inputs, [declaration.argument_index[n] for n in declaration.mutated]]
        outputs += [_tensor_struct(label, tensors[i]) for i in self.mutated[0]]
        self.in_structs = (_Tensor * max(len(inputs), 1))(*inputs)
        self.out_structs = (_Tensor * max(len(outputs), 1))(*outputs)
        scalars = [float(f.check(declaration.qualname, bound[f.arg])) for f in declaration.spec.fields]
        self.scalars = (ctypes.c_double * max(len(scalars), 1))(*scalars)
        self.args = _LaunchArgs(
            self.in_structs,
            len(inputs),
            self.out_structs,
            len(outputs),
            self.scalars,
            len(scalars),
            None,
            0,
            tactic,
            None,
        )
        self.args_pointer = ctypes.pointer(self.args)
        lib = declaration.library.launchers()
        op = declaration.qualname.encode()
        address = lib.ttp_sdk_launcher(op, tactic)
        if not address:
            raise RuntimeError(f"{label}: library {declaration.library.name} has no launcher for tactic {tactic}")
        self.launcher = _LAUNCHER(address)
        self.launcher_name = declaration.launchers[tactic]
        self.resources = _resource_tables(declaration, lib, scalars, self.device)
        if self.resources is not None:
            self.args.resources = self.resources
            self.args.nbResources = len(self.resources)
        workspace = lib.ttp_sdk_workspace_function(op)
        self.workspace_bytes = int(_WORKSPACE_SIZE(workspace)(self.args_pointer)) if workspace else 0
        self.args.workspaceSize = self.workspace_bytes
        self.workspace_offset = -(-8 * self.num_sizes // _SCRATCH_ALIGN) * _SCRATCH_ALIGN
        self.scratch_bytes = self.workspace_offset + self.workspace_bytes


def _resource_tables(declaration: Any, lib: ctypes.CDLL, scalars: Sequence[float], device: torch.device) -> Any:
    """The op's shared tables for these scalars on ``device`` (``declare(resources=...)``), built by the launcher
    library once per key and device and kept there for the process; None when it declares none."""
    count = len(getattr(declaration, "resources", {}))
    if not count:
        return None
    tables = (ctypes.c_void_p * count)()
    values = (ctypes.c_double * max(len(scalars), 1))(*scalars)
    with torch.cuda.device(device):
        status = lib.ttp_sdk_resource_tables(declaration.qualname.encode(), values, tables)
    if status != 0:
        raise RuntimeError(
            f"{declaration.label}: building its shared tables {sorted(declaration.resources)} failed with cudaError "
            f"{status} (the first call with new table fields must not be inside a CUDA graph capture)"
        )
    return tables


def _cuda_device(declaration: Any, tensors: Sequence[torch.Tensor]) -> torch.device:
    """The device of a call's tensors, which must all be CUDA tensors on one device."""
    for argument, tensor in zip(declaration.tensor_args, tensors, strict=True):
        if not tensor.is_cuda or tensor.device != tensors[0].device:
            raise SpecError(
                f"{declaration.label}: argument '{argument.name}' must be a CUDA tensor on {tensors[0].device} (the "
                f"device of '{declaration.tensor_args[0].name}'), got device {tensor.device}"
            )
    return tensors[0].device


def plugin_inputs(spec: Any, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The op's tensor inputs as the plugin takes them: each cast to its ``TensorSpec.plugin_dtype`` when it has one
    (e.g. a bool mask to int32), as the converter's cast layers do in an engine; the others as they are."""
    specs = list(spec.inputs)
    out = []
    for i, tensor in enumerate(tensors):
        dtype = getattr(specs[i], "plugin_dtype", None) if i < len(specs) else None
        out.append(tensor if dtype is None or tensor.dtype == dtype else tensor.to(dtype))
    return out


class PreparedLaunch:
    """A declared op's launcher on buffers made once, called as the plugin's ``enqueue`` calls it: on the current
    stream (read at each call), with no host synchronization (a data-dependent size stays in its size tensor on the
    device) and no allocation, so it is timed per call like the engine and can be captured in a CUDA graph.

    The checks, the derived shapes and the launch structs are :func:`launch`'s (a :class:`_Plan` of its own, not the
    per-thread cache's, since its structs point at this object's buffers). ``inputs`` are contiguous, each in its
    plugin dtype (:func:`plugin_inputs`); ``outputs`` are at their upper bounds and start filled with -1 (the launcher
    writes a data-dependent output's rows from the start; those it leaves read -1); ``sizes`` are the size tensors;
    ``workspace`` the launcher's workspace. A call runs the launcher once (phase 0, as in an engine, also for a
    ``sizes_first`` op) and returns ``outputs[0]``.
    """

    def __init__(self, declaration: Any, *args: Any, tactic: int = 0, **kwargs: Any):
        args = _arguments(declaration, args, kwargs)
        plan = _Plan(declaration, args, tactic)
        device = plan.device
        tensors = [args[position].contiguous() for position in plan.tensor_positions]
        self.inputs = plugin_inputs(declaration.spec, tensors)
        self.outputs = [torch.full(shape, -1, dtype=dtype, device=device) for shape, dtype in plan.outputs]
        self.sizes = [torch.zeros((), dtype=torch.int64, device=device) for _ in range(plan.num_sizes)]
        self.workspace = torch.empty(max(plan.workspace_bytes, 1), dtype=torch.uint8, device=device)
        mutated = [self.inputs[i] for i in plan.mutated[0]]  # updated in place at each call, as in an engine
        for structs, buffers in (
            (plan.in_structs, self.inputs),
            (plan.out_structs, self.outputs + self.sizes + mutated),
        ):
            for i, tensor in enumerate(buffers):
                structs[i] = _tensor_struct(declaration.label, tensor)
        plan.args.workspace = self.workspace.data_ptr() if plan.workspace_bytes else None  # ttp_sdk.h: null at 0
        self._declaration, self._plan, self._tactic = declaration, plan, tactic

    def __call__(self) -> torch.Tensor:
        plan = self._plan
        plan.args.stream = torch._C._cuda_getCurrentRawStream(plan.device.index)
        _call(self._declaration, plan, self._tactic, plan.device)
        return self.outputs[0]


#: Per thread: (declaration, call signature) -> _Plan.
_PLANS = threading.local()
_MAX_PLANS = 4096
#: A data-dependent output whose upper-bound buffer wastes more than this (and more than it keeps) is copied into a
#: buffer of its actual size, so the result does not hold the upper bound's memory.
_TRIM_BYTES = 1 << 20


def _arguments(declaration: Any, args: tuple, kwargs: dict) -> tuple:
    """Every schema argument positionally: the dispatcher drops trailing defaults; keywords need the full bind."""
    if not kwargs:
        missing = declaration.num_arguments - len(args)
        if missing == 0:
            return args
        if 0 < missing <= len(declaration.trailing_defaults):
            return args + declaration.trailing_defaults[len(declaration.trailing_defaults) - missing :]
    bound = declaration.bind(*args, **kwargs)
    return tuple(bound[a.name] for a in declaration.schema.arguments)


def _signature(declaration: Any, args: tuple, tactic: int) -> tuple:
    """The cache key of a call: (declaration, tactic, each tensor's shape, dtype and device index, each scalar)."""
    key = getattr(declaration, "_eager_signature", None)
    if key is None:
        # Generated once per op: one tuple display is a few times faster than building the key in a loop.
        parts = ["d", "t"]
        for position in range(declaration.num_arguments):
            if position in declaration.tensor_positions:
                parts += [f"a[{position}].shape", f"a[{position}].dtype", f"a[{position}].get_device()"]
            else:
                parts.append(f"a[{position}]")
        key = eval(f"lambda d, a, t: ({', '.join(parts)},)")  # noqa: S307 - built from positions only
        declaration._eager_signature = key
    return key(declaration, args, tactic)


def launch(declaration: Any, *args: Any, tactic: int = 0, **kwargs: Any) -> Any:
    """Run a declared op's launcher on CUDA tensors (what its eager CUDA kernel does). ``tactic`` picks one.

    The checks, the shape derivation and the launcher lookup run once per call signature (shapes, dtypes, device,
    scalar values, tactic); later calls with the same signature allocate the outputs (one scratch buffer for the
    size tensors and the workspace) and call the launcher through its cached function pointer. A bool input is
    passed as kBOOL (only the TensorRT plugin takes it as INT32). A data-dependent output is allocated at its upper
    bound; after one host synchronization that reads the sizes, it is returned as a view of its first rows, or as a
    copy of them where the upper bound would waste more than it keeps (and over 1 MiB).
    """
    args = _arguments(declaration, args, kwargs)
    plans = _PLANS.__dict__
    try:
        key = _signature(declaration, args, tactic)
        plan = plans.get(key)
    except (AttributeError, TypeError):  # a non-tensor where a tensor goes, or an unhashable scalar: full checks
        key, plan = None, None
    if plan is None:
        plan = _Plan(declaration, args, tactic)
        if key is not None:
            if len(plans) >= _MAX_PLANS:  # many distinct shapes (e.g. a varying batch): start over
                plans.clear()
            plans[key] = plan
    device = plan.device
    # Held until the launch is queued: a contiguous copy freed earlier could be handed to an output below.
    inputs = [args[position].contiguous() for position in plan.tensor_positions]
    structs = plan.in_structs
    for i, tensor in enumerate(inputs):
        structs[i].data = tensor.data_ptr()
    sizes_first = plan.num_sizes and declaration.sizes_first
    # sizes_first: no outputs until the sizes are known (phase 1 writes only the size tensors).
    outputs = [] if sizes_first else [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in plan.outputs]
    structs = plan.out_structs
    for i in range(len(plan.outputs)):
        structs[i].data = outputs[i].data_ptr() if outputs else None
    scratch = None
    if plan.scratch_bytes:
        scratch = torch.empty(plan.scratch_bytes, dtype=torch.uint8, device=device)
        base = scratch.data_ptr()
        for k in range(plan.num_sizes):
            structs[len(plan.outputs) + k].data = base + 8 * k
        plan.args.workspace = base + plan.workspace_offset if plan.workspace_bytes else None
    index = device.index
    plan.args.stream = torch._C._cuda_getCurrentRawStream(index)
    plan.args.phase = 1 if sizes_first else 0
    if plan.mutated[0]:
        _bind_mutated(plan, inputs)
    _call(declaration, plan, tactic, device)
    if plan.mutated[0]:
        _write_back(plan, args, inputs)
    if sizes_first:
        counts = scratch[: 8 * plan.num_sizes].view(torch.int64).tolist()  # one host synchronization
        for i, ((shape, dtype), dims) in enumerate(zip(plan.outputs, plan.sized_dims, strict=True)):
            shape = _actual_shape(shape, plan.shapes, counts, dims)
            for dim, _ in dims:
                structs[i].dims[dim] = shape[dim]
            outputs.append(torch.empty(shape, dtype=dtype, device=device))
            structs[i].data = outputs[-1].data_ptr()
        plan.args.phase = 2
        try:
            _call(declaration, plan, tactic, device)
        finally:
            for i, ((shape, _), dims) in enumerate(zip(plan.outputs, plan.sized_dims, strict=True)):
                for dim, _ in dims:
                    structs[i].dims[dim] = shape[dim]  # the plan's upper bounds, for the next call
    elif plan.num_sizes:
        counts = scratch[: 8 * plan.num_sizes].view(torch.int64).tolist()  # one host synchronization
        outputs = [_trim(o, plan.shapes, counts, dims) for o, dims in zip(outputs, plan.sized_dims, strict=True)]
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _bind_mutated(plan: _Plan, inputs: list[torch.Tensor]) -> None:
    """Point each mutated argument's output at the argument's (contiguous) memory."""
    first = len(plan.outputs) + plan.num_sizes
    for k, i in enumerate(plan.mutated[0]):
        plan.out_structs[first + k].data = inputs[i].data_ptr()


def _write_back(plan: _Plan, args: tuple, inputs: list[torch.Tensor]) -> None:
    """A mutated argument that was not contiguous was updated in its contiguous copy: copy that back."""
    for i, position in zip(*plan.mutated, strict=True):
        if inputs[i] is not args[position]:
            args[position].copy_(inputs[i])


def _call(declaration: Any, plan: _Plan, tactic: int, device: torch.device) -> None:
    if torch._C._cuda_getDevice() == device.index:
        status = plan.launcher(plan.args_pointer)
    else:
        with torch.cuda.device(device):
            status = plan.launcher(plan.args_pointer)
    if status != 0:
        phase = f", phase {plan.args.phase}" if plan.args.phase else ""
        lib = declaration.library.launchers()
        why = lib.ttp_sdk_last_error().decode() if tactic in getattr(declaration, "aot_kernels", {}) else ""
        # The CUDA runtime the launcher library links names the status (as the C++ eager kernel says it).
        lib.cudaGetErrorName.restype, lib.cudaGetErrorName.argtypes = ctypes.c_char_p, [ctypes.c_int]
        raise RuntimeError(
            f"{declaration.label}: launcher '{plan.launcher_name}' (tactic {tactic}{phase}) returned "
            f"{lib.cudaGetErrorName(status).decode()} ({status})" + (f": {why}" if why else "")
        )


def _actual_shape(upper: Sequence[int], shapes: list, counts: list[int], sized_dims: list) -> list[int]:
    """An output's shape once its data-dependent sizes (``counts``) are known: ``upper``, sized dims evaluated."""
    shape = list(upper)
    for dim, expr in sized_dims:
        shape[dim] = _derive.evaluate_expr(expr, shapes, (), counts)
    return shape


def _trim(output: torch.Tensor, shapes: list, counts: list[int], sized_dims: list) -> torch.Tensor:
    """The part of an upper-bound output its data-dependent sizes say was written (the leading elements)."""
    if not sized_dims:
        return output
    shape = _actual_shape(output.shape, shapes, counts, sized_dims)
    if len(sized_dims) == 1 and sized_dims[0][0] == 0:
        kept = output.narrow(0, 0, shape[0])
    else:
        kept = output.view(-1)[: math.prod(shape)].view(shape)
    wasted = (output.numel() - kept.numel()) * output.element_size()
    if wasted > _TRIM_BYTES and wasted > kept.numel() * output.element_size():
        return kept.clone()
    return kept


def _uses_size(expr: Sequence[int]) -> bool:
    i = 0
    while i < len(expr):
        if expr[i] == _derive.SIZE:
            return True
        i += 1 if expr[i] in _derive._BINARY else 1 + _derive._OPERAND_COUNTS[expr[i]]
    return False


#: The Library objects holding the Python eager CUDA kernels (registrations last as long as their Library).
_EAGER_LIBRARIES: list[torch.library.Library] = []
#: The registered kernels of ops' ``_tactic`` variants, by the declared op's name.
_TACTIC_KERNELS: dict[str, _PythonKernel] = {}


class _PythonKernel:
    """An op's eager CUDA kernel as registered at ``declare``: its first call puts the C++ kernel in its place
    (:func:`torchtrt_plugins.eager_kernel.install`) and redispatches; where that cannot be, it stays and runs
    :func:`launch`. With ``tactic``, the kernel of op ``<name>_tactic`` (the op's arguments, then the tactic's value:
    benchmarks and tests force each launcher with it)."""

    def __init__(self, declaration: Any, *, tactic: bool = False):
        self.declaration = declaration
        self.tactic = tactic
        self.first = True
        namespace, name = declaration.qualname.split("::", 1)
        name += "_tactic" if tactic else ""
        self.qualname = f"{namespace}::{name}"
        self.overload = getattr(getattr(torch.ops, namespace), name).default
        self.library = torch.library.Library(namespace, "IMPL")
        self.library.impl(name, self, "CUDA")
        _EAGER_LIBRARIES.append(self.library)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.first:
            self.first = False
            from . import eager_kernel

            if eager_kernel.install(
                self.declaration, self.library, qualname=self.qualname, tactic_argument=self.tactic
            ):
                _EAGER_LIBRARIES.remove(self.library)
                return self.overload(*args, **kwargs)
        return launch(self.declaration, *args, **kwargs)


def register_eager_kernel(declaration: Any, *, tactic: bool = False) -> _PythonKernel:
    """Register the op's CUDA kernel: the declared launcher, through the C++ eager kernel from its first call on
    (:mod:`torchtrt_plugins.eager_kernel`), else through :func:`launch`. With ``tactic``, the kernel of the op's
    ``<name>_tactic`` variant (defined by the caller), which takes the tactic's value as a keyword argument."""
    kernel = _PythonKernel(declaration, tactic=tactic)
    if tactic:
        _TACTIC_KERNELS[declaration.qualname] = kernel
    return kernel


def reset_eager_kernel(declaration: Any, *, tactic: bool = False) -> None:
    """Put the op's eager CUDA kernel (with ``tactic``, its ``_tactic`` variant's) back as first registered (its C++
    kernel removed): for tests."""
    from . import eager_kernel

    old = _TACTIC_KERNELS[declaration.qualname] if tactic else declaration.python_kernel
    eager_kernel.uninstall(declaration, qualname=old.qualname)
    if old.library in _EAGER_LIBRARIES:
        _EAGER_LIBRARIES.remove(old.library)
        old.library._destroy()
    new = _PythonKernel(declaration, tactic=tactic)
    if tactic:
        _TACTIC_KERNELS[declaration.qualname] = new
    else:
        declaration.python_kernel = new

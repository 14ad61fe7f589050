"""A user package's plugin library: the build of its two libraries with nvcc (cached) and their loading.

A :class:`PluginLibrary` is a user package's set of torch-free kernel launchers (``.cu`` files; the launcher ABI is
``csrc/sdk/ttp_sdk.h``: ``cudaError_t launcher(ttp::sdk::LaunchArgs const&)``) plus the ops declared on it with
:func:`torchtrt_plugins.declare`. :meth:`PluginLibrary.build` generates the data tables of the declared ops
(:mod:`.codegen`) and compiles, with nvcc (through :mod:`torchtrt_plugins._build`), two products into the cache:

- ``lib<name>_plugins.so``: the TensorRT plugin library. One generic IPluginV3 (``csrc/sdk/declared_plugin.cpp``)
  per declared op, over our shared plugin machinery (``csrc/sdk/plugin_support``). Links the CUDA runtime only
  and exports only ``getCreators`` and ``setLoggerFinder``;
- ``lib<name>_launchers.so``: the same launchers behind C entry points, which the op's eager CUDA kernel
  (registered by ``declare``) calls, so eager and engine run the same kernel.

:meth:`PluginLibrary.prebuilt` takes both libraries ready-made instead (our own ops: CMake builds them from tables
generated ahead of time, and the wheel carries them), so nothing is compiled at run time.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .. import _build
from ..kernels.compile import fingerprint
from ..kernels.describe import KernelError
from ..spec import SpecError
from .abi import LaunchArgs
from .codegen import generate_launcher_table, generate_op_tables, generated_sources
from .recipe import build_recipe, include_dir, recipe_files

if TYPE_CHECKING:
    from ..declaration import Declaration


@dataclass
class LibraryBuild:
    directory: Path
    plugins: Path
    launchers: Path
    built_now: bool


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
        self.declarations: list[Declaration] = []
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

    def add(self, declaration: Declaration) -> None:
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
                lib.ttp_sdk_launch.argtypes = [ctypes.c_char_p, ctypes.c_int32, ctypes.POINTER(LaunchArgs)]
                lib.ttp_sdk_workspace.restype = ctypes.c_uint64
                lib.ttp_sdk_workspace.argtypes = [ctypes.c_char_p, ctypes.POINTER(LaunchArgs)]
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
        settings = [str(include), nvcc, archs, str(self.cuda_flags), _build.nvcc_host_compiler(), *generated]
        folders = [s.parent for s in self.sources] + self.include_dirs
        files = [*recipe_files(build_recipe()), *self.sources, *_build.headers_in(folders)]
        return _build.files_digest(settings, files)

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
        # Looked up by the rules' fingerprints (deriving the shape programs takes seconds, and only a build needs
        # them), built under the generated sources' digest: fingerprints that differ with the same sources (another
        # file's fake kernel of the same shapes: torchvision's nms once torchvision is imported) share one build.
        key = [
            generate_op_tables(self.declarations, programs=lambda d: [int(d.rules_fingerprint(), 16)]),
            generate_launcher_table(self.declarations, programs=lambda d: [int(d.rules_fingerprint(), 16)]),
            fingerprint(self.declarations, archs),
        ]
        alias = _build.cache_dir() / f"sdk-{self.name}-{self._inputs_hash(include, nvcc, archs, key)}"
        with _build._locked(alias):
            if not force and _library_files(alias, self.name) is not None:
                plugins, launchers = _library_files(alias, self.name)
                self._build = LibraryBuild(alias.resolve(), plugins, launchers, built_now=False)
                return self._build
            try:
                sources = generated_sources(self.declarations, archs)
            except KernelError as err:  # a kernel that does not compile: its declaration withdraws itself
                withdraw = getattr(getattr(err, "declaration", None), "withdraw", None)
                if withdraw is not None:
                    withdraw()
                    self._build = None
                raise
            digest = self._inputs_hash(
                include, nvcc, archs, [*(f"{name}\n{text}" for name, text in sorted(sources.items())), key[2]]
            )
            directory = _build.cache_dir() / f"sdk-{self.name}-sources-{digest}"
            plugins = directory / f"lib{self.name}_plugins.so"
            launchers = directory / f"lib{self.name}_launchers.so"
            with _build._locked(directory):
                built_now = _library_files(directory, self.name) is None or force
                if built_now:
                    _build._message(f"building plugin library {self.name} for sm_{archs} into {directory}")
                    directory.mkdir(parents=True, exist_ok=True)
                    for file_name, text in sources.items():
                        (directory / file_name).write_text(text)
                    self._compile(directory, include, nvcc, archs, plugins, launchers)
            _point_to(alias, directory)
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
        plugin_flags = [*flags, f"-I{include}"]
        # The generated fields header (op_fields.h) is in `directory`: the launchers and the tables include it.
        generated = f"-I{directory}"
        user = [
            (source, directory / f"user_{index:02d}_{source.stem}.o", [*flags, generated])
            for index, source in enumerate(self.sources)
        ]
        tables = {
            kind: (
                directory / recipe[f"generated_{kind}_source"],
                directory / f"table_{kind}.o",
                [*kind_flags, generated],
            )
            for kind, kind_flags in (("plugin", plugin_flags), ("launcher", flags))
        }
        # Only the user's sources and the tables are this library's own; the SDK's sources are compiled once per set
        # of flags into the cache (while these compile, where no library compiled them yet).
        with ThreadPoolExecutor(max_workers=1) as background:
            own = background.submit(_build.compile_objects, nvcc, [*user, *tables.values()])
            sdk = _build.sdk_objects(
                nvcc,
                plugin_flags,
                flags,
                self.include_dirs,
                csrc=csrc,
                recipe=recipe,
                recipe_paths=recipe_files(recipe),
            )
            own.result()
        user_objects = [str(obj) for _, obj, _ in user]

        def objects(kind: str) -> list[str]:
            return [*user_objects, *map(str, sdk[kind]), str(tables[kind][1])]

        link = [nvcc, "-shared", f"-cudart={recipe['cuda_runtime']}", *gencode]

        def linker_flags(script: str) -> str:
            return "-Xlinker=" + ",".join([f"--version-script={csrc / recipe[script]}", *recipe["linker_flags"]])

        try:
            _build.run(
                [
                    *link,
                    "-o",
                    str(plugins),
                    *objects("plugin"),
                    linker_flags("version_script"),
                    *(f"-l{name}" for name in recipe["plugin_link_libraries"]),
                ]
            )
            _build.run(
                [
                    *link,
                    "-o",
                    str(launchers),
                    *objects("launcher"),
                    linker_flags("launcher_version_script"),
                ]
            )
        except _build.BuildError as err:
            raise _build.BuildError(_undefined_functions(self, str(err)) + str(err)) from None


def _library_files(directory: Path, name: str) -> tuple[Path, Path] | None:
    """The two libraries of a finished build in ``directory`` (or a link to one), else None."""
    plugins, launchers = directory / f"lib{name}_plugins.so", directory / f"lib{name}_launchers.so"
    return (plugins, launchers) if plugins.is_file() and launchers.is_file() else None


def _point_to(alias: Path, directory: Path) -> None:
    """Make ``alias`` a link to the build in ``directory`` (replacing a failed build's folder left there)."""
    if alias.is_symlink() and alias.resolve() == directory.resolve():
        return
    if alias.is_dir() and not alias.is_symlink():
        shutil.rmtree(alias)
    link = alias.with_name(f"{alias.name}.{os.getpid()}.link")
    link.unlink(missing_ok=True)
    link.symlink_to(directory.name)
    os.replace(link, alias)


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

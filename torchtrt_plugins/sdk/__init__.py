"""The SDK a user package builds its own plugin library with: headers from the installed package, the code generated
from its op declarations, the build of its libraries and the Python launch runtime.

- :mod:`.recipe`: where the SDK is (:func:`include_dir`, :func:`cmake_dir`) and how a library is built
  (:func:`build_recipe`, ``csrc/sdk/sdk_build.json``, shared with the CMake package);
- :mod:`.codegen`: the C++ tables generated from a library's declarations (:func:`generated_sources`);
- :mod:`.library`: :class:`PluginLibrary`, a user package's launchers and declared ops, built with nvcc into the
  cache (or :meth:`PluginLibrary.prebuilt`) and loaded;
- :mod:`.abi`: the launcher ABI (``csrc/sdk/ttp_sdk.h``) as ctypes structs;
- :mod:`.runtime`: a declared op's launcher called from Python (:func:`launch`, :class:`PreparedLaunch`) and the eager
  CUDA kernel ``declare`` registers (:func:`register_eager_kernel`).
"""

from __future__ import annotations

from .abi import KERNEL_DTYPES, MAX_DIMS
from .codegen import generate_launcher_table, generate_op_tables, generated_sources
from .library import LibraryBuild, PluginLibrary
from .recipe import build_recipe, cmake_dir, include_dir
from .runtime import PreparedLaunch, launch, plugin_inputs, register_eager_kernel

__all__ = [
    "KERNEL_DTYPES",
    "MAX_DIMS",
    "LibraryBuild",
    "PluginLibrary",
    "PreparedLaunch",
    "build_recipe",
    "cmake_dir",
    "generate_launcher_table",
    "generate_op_tables",
    "generated_sources",
    "include_dir",
    "launch",
    "plugin_inputs",
    "register_eager_kernel",
]

"""Where the installed SDK is (headers, CMake package) and how a declared-op library is built: the recipe.

The build recipe (SDK sources, flags, exports) is data, ``csrc/sdk/sdk_build.json`` (:func:`build_recipe`), which the
CMake package of the SDK (``csrc/sdk/cmake``, ``torchtrt_plugins_add_library``) and our own ``CMakeLists.txt`` read too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import _build


def include_dir() -> Path:
    """The SDK headers (``sdk/ttp_sdk.h``, ``sdk/declared_plugin.h``, ``plugins/plugin_base.h``): add with -I."""
    return _build.source_dir() / "csrc"


def cmake_dir() -> Path:
    """The SDK's CMake package (``torchtrt_pluginsConfig.cmake``): ``-Dtorchtrt_plugins_DIR=`` or CMAKE_PREFIX_PATH."""
    return include_dir() / "sdk" / "cmake"


def build_recipe() -> dict[str, Any]:
    """How a declared-op library is built (``csrc/sdk/sdk_build.json``: SDK sources relative to ``csrc/``, flags,
    version script, libraries), shared with the CMake package so that both build the same library."""
    return json.loads((include_dir() / "sdk" / "sdk_build.json").read_text())


def recipe_files(recipe: dict[str, Any]) -> list[Path]:
    names = [
        *recipe["headers"],
        *recipe["plugin_sources"],
        *recipe["launcher_sources"],
        recipe["version_script"],
        recipe["launcher_version_script"],
    ]
    return [include_dir() / name for name in [*names, "sdk/sdk_build.json"]]

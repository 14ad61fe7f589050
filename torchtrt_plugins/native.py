"""The native pieces at run time: the CUDA torch ops and the TensorRT plugin library."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from . import _build, _compat
from . import spec as spec_mod

_lock = threading.RLock()
_torch_ops_status: str | None = None


def load_torch_ops() -> str:
    """Load the CUDA kernels into ``torch.ops.torchtrt`` (build on first use). Returns a status line."""
    global _torch_ops_status
    with _lock:
        if _torch_ops_status is None:
            if os.environ.get("TORCHTRT_PLUGINS_NO_BUILD") == "1":
                _torch_ops_status = "skipped: TORCHTRT_PLUGINS_NO_BUILD=1"
            else:
                try:
                    _build.build_torch_extension()
                    _torch_ops_status = "loaded"
                except _build.BuildError as err:
                    _torch_ops_status = f"skipped: {err}"
                except Exception as err:  # noqa: BLE001 - a failed compile must not break `import torchtrt_plugins`
                    _torch_ops_status = f"failed: {type(err).__name__}: {str(err)[-2000:]}"
                    _build._message(f"the CUDA ops could not be built; CPU reference kernels only. {_torch_ops_status}")
        return _torch_ops_status


def cuda_ops_loaded() -> bool:
    return _torch_ops_status == "loaded"


def plugin_library_path(build: bool = True) -> Path:
    """Path of the TensorRT plugin library: ``TORCHTRT_PLUGINS_LIBRARY`` overrides; else the prebuilt one a wheel
    carries; else built from the sources (or found in the cache), unless ``build`` is False."""
    override = os.environ.get("TORCHTRT_PLUGINS_LIBRARY")
    if override:
        path = Path(override)
        if not path.is_file():
            raise FileNotFoundError(f"TORCHTRT_PLUGINS_LIBRARY={override} does not exist")
        return path
    with _lock:
        if not build:
            prebuilt = _build.prebuilt_libraries()
            if prebuilt is None:
                raise FileNotFoundError("plugin library not built; run `torchtrt-plugins build`")
            return prebuilt.library
        return _build.build_plugin_library().library


def _registered_keys(registry: Any) -> set[tuple[str, str, str]] | None:
    """(name, version, namespace) of every creator in the registry, or None where it cannot list them.

    Listing is preferred to ``get_creator``, which logs an ERROR through the TensorRT logger for every
    creator it does not find (TensorRT-RTX does), so a first load would print one per op.
    """
    try:
        creators = registry.all_creators  # TensorRT-RTX and recent TensorRT 10.x bindings
    except Exception:  # noqa: BLE001 - older bindings: fall back to get_creator
        return None
    return {
        (getattr(c, "name", None), getattr(c, "plugin_version", None), getattr(c, "plugin_namespace", None))
        for c in creators
    }


def _creators_present(registry: Any) -> list[bool]:
    keys = _registered_keys(registry)
    present = []
    for entry in spec_mod.all_ops():
        if keys is not None:
            present.append(entry.spec.creator_key in keys)
            continue
        try:
            present.append(registry.get_creator(*entry.spec.creator_key) is not None)
        except Exception:  # noqa: BLE001 - bindings raise for unknown creators in some versions
            present.append(False)
    return present


def load_plugins(registry: Any = None) -> Path:
    """Register our plugin creators with a TensorRT plugin registry. Idempotent.

    ``registry`` defaults to ``tensorrt.get_plugin_registry()``. Loading twice, or after an engine
    holding our plugins was deserialized (which loads the library itself), is not an error.
    """
    if registry is None:
        registry = _compat.require_tensorrt().get_plugin_registry()
    path = plugin_library_path()
    with _lock:
        if not all(_creators_present(registry)):
            handle = registry.load_library(str(path))
            # A registry that already holds this library (loaded by a deserialized plan, or by another
            # copy of the file) returns None: that is success as long as every creator is there.
            missing = [
                "/".join(entry.spec.creator_key)
                for entry, ok in zip(spec_mod.all_ops(), _creators_present(registry), strict=True)
                if not ok
            ]
            if missing:
                raise RuntimeError(
                    f"torchtrt_plugins: loading {path} (handle {handle!r}) did not register the creators "
                    f"{missing}; see the TensorRT log for the reason"
                )
    return path

"""The native pieces at run time: the TensorRT plugin library and its creators in TensorRT's registry."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import _build, _compat
from .registry import OpEntry, is_ours, registered_ops

_lock = threading.RLock()


def plugin_library_path(build: bool = True) -> Path:
    """Path of the TensorRT plugin library: ``TORCHTRT_PLUGINS_LIBRARY`` overrides; else the prebuilt one a wheel
    carries; else the one built from the sources (built now, or found in the cache). With ``build`` False it is only
    looked for: ``_build.BuildError`` says why there is none."""
    override = os.environ.get("TORCHTRT_PLUGINS_LIBRARY")
    if override:
        path = Path(override)
        if not path.is_file():
            raise FileNotFoundError(f"TORCHTRT_PLUGINS_LIBRARY={override} does not exist")
        return path
    with _lock:
        return (_build.build_plugin_library() if build else _build.built_plugin_library()).library


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


def _creators_present(registry: Any, entries: list[OpEntry]) -> list[bool]:
    keys = _registered_keys(registry)
    present = []
    for entry in entries:
        if keys is not None:
            present.append(entry.spec.creator_key in keys)
            continue
        try:
            present.append(registry.get_creator(*entry.spec.creator_key) is not None)
        except Exception:  # noqa: BLE001 - bindings raise for unknown creators in some versions
            present.append(False)
    return present


def _libraries() -> dict[Any, list[OpEntry]]:
    """Every plugin library with the ops whose creators it holds: ours first, then those of declared ops."""
    groups: dict[Any, list[OpEntry]] = {plugin_library_path: []}
    for entry in registered_ops():
        if entry.library is None and not is_ours(entry):
            continue  # declared without a library: its plugin is loaded by whoever built it
        groups.setdefault(entry.library or plugin_library_path, []).append(entry)
    return groups


def _load_library(registry: Any, path: Path, entries: list[OpEntry]) -> None:
    if all(_creators_present(registry, entries)):
        return
    handle = registry.load_library(str(path))
    # A registry that already holds this library (loaded by a deserialized plan, or by another
    # copy of the file) returns None: that is success as long as every creator is there.
    missing = [
        "/".join(entry.spec.creator_key)
        for entry, ok in zip(entries, _creators_present(registry, entries), strict=True)
        if not ok
    ]
    if missing:
        raise RuntimeError(
            f"torchtrt_plugins: loading {path} (handle {handle!r}) did not register the creators "
            f"{missing}; see the TensorRT log for the reason"
        )


class PluginLoadError(RuntimeError):
    """Some plugin libraries could not be built or loaded (the others were): names their ops and why."""

    def __init__(self, failures: dict[str, str]):
        self.failures = failures
        super().__init__(
            "torchtrt_plugins: the plugins of "
            + "; ".join(f"{ops}: {why}" for ops, why in failures.items())
            + " (the plugins of every other op are loaded)"
        )


def load_plugins(registry: Any = None, *, libraries: Iterable[Any] | None = None) -> Path:
    """Register the plugin creators of every op with a TensorRT plugin registry: ours, and those of the libraries
    of declared ops (``torchtrt_plugins.declare``); ``libraries`` (``sdk.PluginLibrary`` objects) limits the latter to
    those (a library is built on first use: one not needed is not built). Idempotent; returns the path of our library.

    ``registry`` defaults to ``tensorrt.get_plugin_registry()``. Loading twice, or after an engine
    holding our plugins was deserialized (which loads the library itself), is not an error. A declared op's library
    that cannot be built or loaded does not keep the others out: they are loaded, then ``PluginLoadError`` names the
    ops that are not and why.
    """
    if registry is None:
        registry = _compat.require_tensorrt().get_plugin_registry()
    path = plugin_library_path()
    wanted = [] if libraries is None else list(libraries)
    failures: dict[str, str] = {}
    with _lock:
        for library, entries in _libraries().items():
            if libraries is not None and library is not plugin_library_path:
                if getattr(library, "__self__", library) not in wanted:
                    continue
            if library is plugin_library_path:
                _load_library(registry, path, entries)
                continue
            try:
                _load_library(registry, Path(library()), entries)
            except Exception as err:  # noqa: BLE001 - reported below, after the other libraries are loaded
                ops = ", ".join(entry.spec.label for entry in entries)
                failures[ops] = f"{type(err).__name__}: {err}"
    if failures:
        raise PluginLoadError(failures)
    return path


#: Suffix of the folder beside a saved program that holds plugin libraries it needs and no declaration in a fresh
#: process knows (``inductor_plugins.save_plugin_libraries``): ``model.ep`` -> ``model.ep.plugins/``.
SAVED_LIBRARIES_SUFFIX = ".plugins"


def saved_libraries(path: str | os.PathLike) -> list[Path]:
    """The plugin libraries saved beside the program at ``path`` (none when it has no such folder)."""
    folder = Path(os.fspath(path) + SAVED_LIBRARIES_SUFFIX)
    return sorted(folder.glob("*.so")) if folder.is_dir() else []


def load_saved_libraries(path: str | os.PathLike, registry: Any = None) -> list[Path]:
    """Load the plugin libraries saved beside the program at ``path`` into ``registry`` (default: TensorRT's);
    returns them. A library the registry already holds is not an error."""
    libraries = saved_libraries(path)
    if libraries and registry is None:
        registry = _compat.require_tensorrt().get_plugin_registry()
    with _lock:
        for library in libraries:
            registry.load_library(str(library))
    return libraries


def load_program(path: str | os.PathLike, **kwargs: Any) -> Any:
    """Load a program saved with ``torch_tensorrt.save`` whose engines hold our plugins.

    Torch-TensorRT serializes the engines but no plugin library: deserializing them needs our creators
    in TensorRT's plugin registry first. This registers them (``load_plugins()``, idempotent) and those of the
    libraries saved beside the program (``load_saved_libraries``: generated ops'), then returns
    ``torch_tensorrt.load(path, **kwargs)`` (an ``ExportedProgram``; call ``.module()`` to run it).
    """
    torch_tensorrt = _compat.torch_tensorrt()
    if torch_tensorrt is None:
        raise ImportError("torchtrt_plugins.load_program: Torch-TensorRT is not installed (pip install torch-tensorrt)")
    load_plugins()
    load_saved_libraries(path)
    return torch_tensorrt.load(os.fspath(path), **kwargs)


def load_plugins_into_tensorrt() -> None:
    """``load_plugins()`` into TensorRT's own registry where TensorRT imports (so saved engines deserialize in a
    fresh process); a failure is a warning: the eager ops still work and conversion reports it again."""
    import warnings

    trt = _compat.tensorrt()
    if trt is None or trt.__name__ != "tensorrt":
        return
    try:
        load_plugins()
    except Exception as err:  # noqa: BLE001 - see the docstring
        warnings.warn(f"torchtrt_plugins: plugin library not loaded into TensorRT: {err}", stacklevel=2)

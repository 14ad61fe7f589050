"""The registry of declared ops: each op's entry (its spec and Python pieces), keyed by its qualified name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .declaration import Declaration
from .spec import NAMESPACE, OpSpec


@dataclass
class OpEntry:
    """A registered op: its spec plus the Python pieces (reference implementation, fake kernel) and the declaration
    the spec was made from."""

    spec: OpSpec
    reference: Callable[..., Any]
    fake: Callable[..., Any]
    #: The declaration (``torchtrt_plugins.declare``), which derives per call what the generic plugin needs (the
    #: shape program): every entry is made from one (:func:`entry_of`).
    declaration: Declaration
    #: Validation of argument values shared by the fake kernel, the eager op and the converter.
    check_args: Callable[..., None] | None = None
    #: The plugin library holding the op's creator: a callable returning its path; None is ours.
    library: Callable[[], Any] | None = None


_REGISTRY: dict[str, OpEntry] = {}


def register(entry: OpEntry) -> OpEntry:
    """Register an op entry, keyed by its qualified name (``ns::op``)."""
    if entry.spec.qualname in _REGISTRY:
        raise ValueError(f"op {entry.spec.qualname!r} registered twice")
    _REGISTRY[entry.spec.qualname] = entry
    return entry


def unregister(entry: OpEntry) -> None:
    """Remove an op entry (a declaration that failed after it was registered)."""
    if _REGISTRY.get(entry.spec.qualname) is entry:
        del _REGISTRY[entry.spec.qualname]


def is_ours(entry: OpEntry) -> bool:
    """Whether the op's plugin lives in our own plugin library (declared on our library)."""
    return getattr(entry.declaration.library, "ours", False)


def declaration_of(spec: OpSpec) -> Declaration | None:
    """The declaration a registered spec was made from; None for a spec made by hand (not registered as it is)."""
    entry = _REGISTRY.get(spec.qualname)
    if entry is None or not (entry.spec is spec or entry.spec == spec):
        return None
    return entry.declaration


def all_ops() -> list[OpEntry]:
    """Our catalogue: the ops whose plugins live in our own plugin library."""
    return [entry for entry in _REGISTRY.values() if is_ours(entry)]


def registered_ops() -> list[OpEntry]:
    """Every op with a plugin: our catalogue and the ops declared by other packages."""
    return list(_REGISTRY.values())


def get(name: str) -> OpEntry:
    """The entry for ``ns::op``, or for a bare name in our namespace."""
    qualname = name if "::" in name else f"{NAMESPACE}::{name}"
    try:
        return _REGISTRY[qualname]
    except KeyError:
        raise KeyError(f"no op named {name!r} has a plugin; known: {sorted(_REGISTRY)}") from None


def entry_of(declaration: Declaration) -> OpEntry:
    """The registry entry of a declaration: its spec, reference, fake kernel and checks, and its library."""
    library = declaration.library
    return OpEntry(
        declaration.spec,
        reference=declaration.reference,
        fake=declaration.overload,
        check_args=declaration.check_args,
        # Our own library's ops are our catalogue (all_ops), loaded with it (native.plugin_library_path).
        library=library.plugin_path if library is not None and not getattr(library, "ours", False) else None,
        declaration=declaration,
    )

"""Registration of the torch ops of our hand-written plugins from their op specs (``pad_to``; the declared ops,
``rms_norm`` and ``masked_rows``, define themselves in ``torchtrt_plugins.ops``).

Schemas and fake kernels come from the specs (Python); the CPU kernel is the reference
implementation; the CUDA kernels come from the native extension (``csrc/torch``), loaded by
``torchtrt_plugins.native``. Ops with tactics also get ``<op>_tactic(..., int tactic)`` so tests and
benchmarks can force each tactic in eager mode.
"""

from __future__ import annotations

import functools

import torch

from . import ops  # noqa: F401  (registers every op's spec; must precede the loop below)
from . import spec as spec_mod

_LIB = torch.library.Library(spec_mod.NAMESPACE, "DEF")


def tactic_schema(schema: str) -> str:
    args, returns = schema.split(") ->", 1)
    return f"{args}, *, int tactic) ->{returns}"


def _with_checks(entry: spec_mod.OpEntry, fn, drop_tactic: bool):
    @functools.wraps(fn)
    def impl(*args, **kwargs):
        if drop_tactic:
            kwargs.pop("tactic")
        if entry.check_args is not None:
            entry.check_args(*args, **kwargs)
        return fn(*args, **kwargs)

    return impl


def _register(entry: spec_mod.OpEntry) -> None:
    spec = entry.spec
    variants = [(spec.name, spec.schema, False)]
    if spec.tactics:
        variants.append((f"{spec.name}_tactic", tactic_schema(spec.schema), True))
    for name, schema, drop_tactic in variants:
        _LIB.define(name + schema)
        qualname = f"{spec_mod.NAMESPACE}::{name}"
        fake = entry.fake
        if drop_tactic:
            fake = functools.wraps(entry.fake)(lambda *a, tactic, _f=entry.fake, **kw: _f(*a, **kw))
        torch.library.register_fake(qualname, fake, lib=_LIB)
        _LIB.impl(name, _with_checks(entry, entry.reference, drop_tactic), "CPU")


for _entry in spec_mod.all_ops():
    if _entry.spec.declaration is None:
        _register(_entry)

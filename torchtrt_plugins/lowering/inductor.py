"""Our lowering inside ``torch.compile``'s default compiler, inductor: a post-grad graph pass.

    model = torch.compile(model, options=torchtrt_plugins.lowering.inductor_options())

Inductor hands the pass each graph after AOT autograd has traced and functionalized it, before its own pattern
passes, reinplacing and code generation. The pass rewrites RMSNorms into ``torchtrt.rms_norm`` and residual add +
RMSNorm into ``torchtrt.add_rms_norm`` in its functionalized form (``lowering.add_rms_norm``), which inductor's
reinplacing then runs in place on the sum's operand. Inductor fuses the rest of the graph around our ops as it would
around any extern kernel. ``TORCHTRT_PLUGINS_LOWERING=0`` (or ``set_enabled(False)``) turns the pass into a no-op,
as it does ``lower``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

_LOGGER = logging.getLogger(__name__)


class InductorPass(CustomGraphPass):
    """``lower(gm, residual_add=True)`` as an inductor ``post_grad_custom_pre_pass``.

    Its ``uuid`` (inductor's cache key for the pass) hashes the lowering's sources and whether lowering is on, so a
    cached graph compiled with another version of the patterns, or with lowering off, is not reused.
    """

    def __call__(self, graph: torch.fx.Graph) -> None:
        from . import lower_with_report

        gm = graph.owning_module
        if gm is None:  # inductor always passes a GraphModule's graph; a bare graph has nothing to recompile
            _LOGGER.debug("torchtrt_plugins inductor pass: graph without an owning module, left alone")
            return
        lower_with_report(gm, residual_add=True)

    def uuid(self) -> Any:
        from . import is_enabled

        sources = tuple(str(path) for path in sorted(Path(__file__).parent.glob("*.py")))
        return get_hash_for_files(sources, extra=f"enabled={is_enabled()}")


def inductor_options() -> dict[str, Any]:
    """``torch.compile`` options that run our lowering inside inductor: ``torch.compile(model,
    options=inductor_options())``."""
    return {"post_grad_custom_pre_pass": InductorPass()}

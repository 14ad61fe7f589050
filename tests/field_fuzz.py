"""Requests for the harness's createPlugin fuzz (csrc/harness/fuzz.h; the program ttp_fuzz_fields): the plugin
libraries, and as seeds the valid field sets the converter plans for every op's ONNX export cases (our ops, the example
package's, torchvision's roi_align and nms; traced with concrete shapes and exported with their dynamic ones, so shape
programs with shape inputs and size tensors too) and for the SDK's test ops (tests/sdk_ops), which the fuzz mutates.
Used by tests/cpu/test_fuzz_fields.py and scripts/fuzz_fields.sh:

    python tests/field_fuzz.py --seed 1 --count 1000 LIBRARY.so... > request.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from torch.fx.experimental.proxy_tensor import make_fx

if str(Path(__file__).resolve().parent) not in sys.path:  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import declared_export_cases  # noqa: E402
import export_cases  # noqa: E402
import sdk_ops  # noqa: E402

from torchtrt_plugins import converters, registry  # noqa: E402
from torchtrt_plugins import plan as planning  # noqa: E402
from torchtrt_plugins.testing.harness import field_json  # noqa: E402


def _sdk_test_calls() -> list[converters.PluginCall]:
    return [
        sdk_ops.shapes_call(symbolic=False),
        sdk_ops.shapes_call(flag=True, scale=0.5),
        converters.plan(sdk_ops.NONZERO_COUNT.spec, (torch.zeros(4, 3),)),
        converters.plan(sdk_ops.BROKEN.spec, (torch.zeros(4, 3),)),
        converters.plan(sdk_ops.SHAPES.spec, (torch.zeros(6, 5), torch.ones(5), 9, 3), weights_as_fields=True),
    ]


def plugin_calls() -> list[converters.PluginCall]:
    """The converter's plan of every op call in the export cases, traced with concrete shapes and exported with the
    cases' dynamic dims (and symbolic sizes: shape inputs)."""
    calls = []
    for case in export_cases.cases() + declared_export_cases.cases():
        concrete = make_fx(case.module)(*case.args).graph
        symbolic = torch.export.export(case.module, case.args, dynamic_shapes=case.dynamic_shapes()).graph
        for graph in (concrete, symbolic):
            for node in graph.nodes:
                if node.op == "call_function" and planning.entry_for_target(node.target) is not None:
                    calls.append(converters.plan_node(node))
    # add_rms_norm has no export case (torch's ONNX exporter cannot take its functionalized node): its plan here.
    mutating = converters.plan(
        registry.get("add_rms_norm").spec, (torch.zeros(4, 8), torch.zeros(4, 8), torch.ones(8), 1e-6)
    )
    # A weight given as a field (declare(weight_fields=...)): its elements and dims are fields too.
    weight_field = converters.plan(
        registry.get("rms_norm").spec, (torch.zeros(4, 8), torch.linspace(0.5, 2.0, 8)), weights_as_fields=True
    )
    return calls + _sdk_test_calls() + [mutating, weight_field, *_multi_scale_calls()]


def _multi_scale_calls() -> list[converters.PluginCall]:
    """multi_scale_roi_align_<L> for the level counts no export case has (the fuzz needs a valid field set of each)."""
    from torchtrt_plugins import vision

    calls = []
    for levels, declaration in vision.MULTI_SCALE_ROI_ALIGN.items():
        features = [torch.zeros(1, 2, 32 >> level, 32 >> level) for level in range(levels)]
        scales = [1.0 / (4 << level) for level in range(levels)]
        calls.append(converters.plan(declaration.spec, (*features, torch.zeros(3, 5), *scales, 3, 3, 2)))
    return calls


def seeds(calls: list[converters.PluginCall]) -> list[dict]:
    out = []
    for call in calls:
        seed = {
            "plugin": {"name": call.plugin_name, "version": call.plugin_version, "namespace": call.plugin_namespace},
            "fields": [field_json(f) for f in call.fields],
        }
        if seed not in out:
            out.append(seed)
    return out


def request(libraries: list[str | Path], seed: int, count: int, max_length: int = 4096) -> dict:
    """The fuzz request: ``count`` iterations per creator of each library, from ``seed``."""
    return {
        "libraries": [str(p) for p in libraries],
        "seed": seed,
        "count": count,
        "max_length": max_length,
        "seeds": seeds(plugin_calls()),
    }


def plugin_ids() -> set[str]:
    """ "ns::Name vN" of every creator in our library and in :func:`declared_libraries`, from the declarations."""
    libraries = [*declared_export_cases.libraries(), sdk_ops.LIBRARY]
    ids = set()
    for entry in registry.registered_ops():
        library = getattr(entry.declaration, "library", None)
        if registry.is_ours(entry) or any(library is x for x in libraries):
            ids.add(f"{entry.spec.plugin_namespace}::{entry.spec.plugin_name} v{entry.spec.plugin_version}")
    return ids


def declared_libraries() -> list[Path]:
    """The plugin libraries of the declared ops outside our catalogue and of the SDK's test ops (built with nvcc)."""
    return [library.plugin_path() for library in declared_export_cases.libraries()] + [sdk_ops.LIBRARY.plugin_path()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("libraries", nargs="+", help="plugin libraries to fuzz")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=1000, help="iterations per creator")
    parser.add_argument("--max-length", type=int, default=4096)
    args = parser.parse_args(argv)
    json.dump(request(args.libraries, args.seed, args.count, args.max_length), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
